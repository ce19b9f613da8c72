//! Report: one [`Summary`] computed from a run, rendered by printers that
//! write to any `impl Write` (text as ab, JSON, percentile CSV, .hgrm).
//!
//! # JSON schema (`loadgen.report/1`)
//!
//! The JSON printer serialises [`Summary`] as is; its field docs are the
//! schema. Times are milliseconds (`_ms`) or seconds (`_s`) as floats with
//! microsecond resolution; counts are integers. Fields are only ever added
//! within one schema version, never renamed or removed.

mod files;
mod text;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::RunConfig;
use crate::driver::RunResult;
use crate::record::Hist;

pub use files::{write_hgrm, write_percentiles_csv};
pub use text::{write_text, write_text_with, TextOptions};

/// The schema identifier written in every JSON report.
pub const SCHEMA: &str = "loadgen.report/1";

/// The percentages shown in the table: ab's, then 99.9, 99.99 and the maximum.
pub const PERCENTS: [f64; 11] = [
    50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 100.0,
];

/// min / mean / sd / median / max of one phase, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseStats {
    /// Fastest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub sd: f64,
    /// Median.
    pub median: f64,
    /// Slowest.
    pub max: f64,
}

impl PhaseStats {
    fn of(h: &Hist) -> Self {
        if h.is_empty() {
            return PhaseStats::default();
        }
        PhaseStats {
            min: ms(h.min()),
            mean: h.mean() / 1000.0,
            sd: h.stdev() / 1000.0,
            median: ms(h.value_at_quantile(0.5)),
            max: ms(h.max()),
        }
    }
}

/// ab's "Connection Times" table.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectionTimes {
    /// Connection establishment (0 on reused connections).
    pub connect: PhaseStats,
    /// From connected to the last response byte.
    pub processing: PhaseStats,
    /// From the request written to the first response byte.
    pub waiting: PhaseStats,
    /// From the start of the request to its last byte.
    pub total: PhaseStats,
}

/// One row of a percentile table.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Percentile {
    /// Percentage of requests, 0-100.
    pub percent: f64,
    /// Served within this many milliseconds.
    pub ms: f64,
}

/// Failed requests by class.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FailedRequests {
    /// All failed requests.
    pub total: u64,
    /// Could not connect.
    pub connect: u64,
    /// Connection failed or closed before a complete response.
    pub receive: u64,
    /// Body length differs from the first response's, or was cut short.
    pub length: u64,
    /// Write errors, malformed responses, timeouts.
    pub exceptions: u64,
    /// Failed `--expect-*` checks, by reason.
    pub expectations: BTreeMap<String, u64>,
    /// Distinct error messages and how often each occurred.
    pub errors: BTreeMap<String, u64>,
}

/// CPU time of one process over the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuReport {
    /// Process id (`null` for loadgen itself).
    pub pid: Option<u32>,
    /// What the process is (`"loadgen"` or `"pid N"`).
    pub name: String,
    /// CPU time (user + system) consumed during the run, seconds.
    pub cpu_time_s: Option<f64>,
    /// `cpu_time_s` / wall time (1.0 = one core busy throughout).
    pub utilisation: Option<f64>,
    /// Why the CPU time could not be read.
    pub error: Option<String>,
}

/// Everything the report says, computed once from a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// `Server` header of the first response.
    pub server_software: Option<String>,
    /// Host from the URL.
    pub server_hostname: String,
    /// Port from the URL.
    pub server_port: u16,
    /// Path and query from the URL.
    pub document_path: String,
    /// Body length of the first response, bytes.
    pub document_length: u64,
    /// `-l`: bodies may differ in length, so the text report says
    /// "Variable" for the document length, as ab does.
    #[serde(default)]
    pub variable_length: bool,
    /// `-c`.
    pub concurrency: usize,
    /// `-k`.
    pub keepalive: bool,
    /// `--rate`, requests per second.
    pub rate: Option<f64>,
    /// The run was stopped by Ctrl-C.
    pub interrupted: bool,
    /// Wall time of the run, seconds.
    pub time_taken_s: f64,
    /// Requests that came to an end, successful or failed.
    pub complete_requests: u64,
    /// Failed requests.
    pub failed_requests: FailedRequests,
    /// Responses with a status outside 200-299 (not failures unless checked).
    pub non_2xx_responses: u64,
    /// Responses per status code.
    pub status_codes: BTreeMap<u16, u64>,
    /// ab's "Keep-Alive requests": with `-k`, complete responses that
    /// announced keep-alive (`Connection: keep-alive`), the first on each
    /// connection included, as ab counts them.
    pub keepalive_requests: u64,
    /// All bytes received for complete responses.
    pub total_transferred_bytes: u64,
    /// Body bytes received.
    pub html_transferred_bytes: u64,
    /// complete_requests / time_taken_s.
    pub requests_per_second: f64,
    /// concurrency * time_taken / complete, ms (ab's "mean").
    pub time_per_request_ms: f64,
    /// time_taken / complete, ms (ab's "mean, across all concurrent requests").
    pub time_per_request_all_ms: f64,
    /// Received KiB per second.
    pub transfer_rate_kib_s: f64,
    /// ab's Connection Times table.
    pub connection_times_ms: ConnectionTimes,
    /// Total time percentiles: ab's, plus 99.9, 99.99 and 100 (max).
    pub percentiles_ms: Vec<Percentile>,
    /// With `--rate`: percentiles measured from intended send times.
    pub corrected_percentiles_ms: Option<Vec<Percentile>>,
    /// With `--rate`: how late loadgen itself sent requests (actual send time
    /// minus intended), ms. A large lag means loadgen was the bottleneck.
    #[serde(default)]
    pub send_lag_ms: Option<PhaseStats>,
    /// `--cpu-pid` processes, then loadgen itself.
    pub cpu: Vec<CpuReport>,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Percentile rows of a histogram.
pub fn percentiles(h: &Hist) -> Vec<Percentile> {
    PERCENTS
        .iter()
        .map(|&p| Percentile {
            percent: p,
            ms: if h.is_empty() {
                0.0
            } else if p >= 100.0 {
                ms(h.max())
            } else {
                ms(h.value_at_percentile(p))
            },
        })
        .collect()
}

fn cpu_report(
    pid: Option<u32>,
    name: String,
    cpu: Result<Duration, String>,
    wall: Duration,
) -> CpuReport {
    let secs = wall.as_secs_f64();
    match cpu {
        Ok(d) => CpuReport {
            pid,
            name,
            cpu_time_s: Some(d.as_secs_f64()),
            utilisation: (secs > 0.0).then(|| d.as_secs_f64() / secs),
            error: None,
        },
        Err(e) => CpuReport {
            pid,
            name,
            cpu_time_s: None,
            utilisation: None,
            error: Some(e),
        },
    }
}

impl Summary {
    /// Computes the report of `res`, a run of `cfg`.
    pub fn new(cfg: &RunConfig, res: &RunResult) -> Summary {
        let r = &res.rec;
        let secs = res.elapsed.as_secs_f64().max(1e-9);
        let done = r.complete.max(1) as f64;
        let mut cpu: Vec<CpuReport> = res
            .cpu
            .iter()
            .map(|u| {
                cpu_report(
                    Some(u.pid),
                    format!("pid {}", u.pid),
                    u.cpu.clone(),
                    res.elapsed,
                )
            })
            .collect();
        cpu.push(cpu_report(
            None,
            "loadgen".into(),
            Ok(res.own_cpu),
            res.elapsed,
        ));
        Summary {
            schema: SCHEMA.into(),
            server_software: res.server.clone(),
            server_hostname: cfg.target.host.clone(),
            server_port: cfg.target.port,
            document_path: cfg.target.path.clone(),
            document_length: res.doc_len,
            variable_length: cfg.expect.variable_length,
            concurrency: cfg.concurrency,
            keepalive: cfg.keepalive,
            rate: cfg.rate,
            interrupted: res.interrupted,
            time_taken_s: res.elapsed.as_secs_f64(),
            complete_requests: r.complete,
            failed_requests: FailedRequests {
                total: r.failures.total(),
                connect: r.failures.connect,
                receive: r.failures.receive,
                length: r.failures.length,
                exceptions: r.failures.exceptions,
                expectations: r.failures.expectations.clone(),
                errors: r.failures.samples.clone(),
            },
            non_2xx_responses: r.non_2xx,
            status_codes: r.statuses.clone(),
            keepalive_requests: r.keepalive_requests,
            total_transferred_bytes: r.wire_bytes,
            html_transferred_bytes: r.body_bytes,
            requests_per_second: r.complete as f64 / secs,
            time_per_request_ms: cfg.concurrency as f64 * secs * 1000.0 / done,
            time_per_request_all_ms: secs * 1000.0 / done,
            transfer_rate_kib_s: r.wire_bytes as f64 / 1024.0 / secs,
            connection_times_ms: ConnectionTimes {
                connect: PhaseStats::of(&r.connect),
                processing: PhaseStats::of(&r.processing),
                waiting: PhaseStats::of(&r.waiting),
                total: PhaseStats::of(&r.total),
            },
            percentiles_ms: percentiles(&r.total),
            corrected_percentiles_ms: cfg.rate.map(|_| percentiles(&r.corrected)),
            send_lag_ms: cfg.rate.map(|_| PhaseStats::of(&r.send_lag)),
            cpu,
        }
    }

    /// Writes the summary as pretty JSON.
    pub fn write_json(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}
