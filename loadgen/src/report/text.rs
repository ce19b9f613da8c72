//! The text report: ab's lines and meanings, with sub-millisecond values.

use std::io::Write;

use super::{Percentile, PhaseStats, Summary};

/// What of the text report to leave out, as ab's display flags do.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// `-d`: no percentile table.
    pub no_percentiles: bool,
    /// `-S`: Connection Times as min, avg and max only.
    pub no_median_sd: bool,
}

/// Writes `s` as ab does, after the "Benchmarking ..." preamble.
pub fn write_text(s: &Summary, out: &mut impl Write) -> std::io::Result<()> {
    write_text_with(s, TextOptions::default(), out)
}

/// [`write_text`] with ab's display flags.
pub fn write_text_with(
    s: &Summary,
    opts: TextOptions,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if s.interrupted {
        writeln!(
            out,
            "Interrupted: the report covers the requests done so far."
        )?;
    }
    server_and_document(s, out)?;
    counts(s, out)?;
    rates(s, out)?;
    cpu(s, out)?;
    connection_times(s, opts.no_median_sd, out)?;
    if opts.no_percentiles {
        return Ok(());
    }
    percentile_tables(s, out)
}

/// ab's `Name:                   value` line.
fn kv(out: &mut dyn Write, k: &str, v: String) -> std::io::Result<()> {
    writeln!(out, "{:<24}{v}", format!("{k}:"))
}

/// Phase 1: who answered, and what was asked.
fn server_and_document(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    kv(
        out,
        "Server Software",
        s.server_software.clone().unwrap_or_default(),
    )?;
    kv(out, "Server Hostname", s.server_hostname.clone())?;
    kv(out, "Server Port", s.server_port.to_string())?;
    writeln!(out)?;
    kv(out, "Document Path", s.document_path.clone())?;
    let length = if s.variable_length {
        "Variable".to_string()
    } else {
        format!("{} bytes", s.document_length)
    };
    kv(out, "Document Length", length)?;
    writeln!(out)?;
    kv(out, "Concurrency Level", s.concurrency.to_string())?;
    if let Some(r) = s.rate {
        kv(
            out,
            "Target rate",
            format!("{r} [#/sec] (intended send times)"),
        )?;
    }
    Ok(())
}

/// Phase 2: how many requests ended, and how they failed.
fn counts(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    kv(
        out,
        "Time taken for tests",
        format!("{:.3} seconds", s.time_taken_s),
    )?;
    kv(out, "Complete requests", s.complete_requests.to_string())?;
    let f = &s.failed_requests;
    kv(out, "Failed requests", f.total.to_string())?;
    if f.total > 0 {
        writeln!(
            out,
            "   (Connect: {}, Receive: {}, Length: {}, Exceptions: {})",
            f.connect, f.receive, f.length, f.exceptions
        )?;
        for (reason, n) in &f.expectations {
            writeln!(out, "   (Expectation failed: {reason}: {n})")?;
        }
        for (msg, n) in &f.errors {
            writeln!(out, "   ({msg}: {n})")?;
        }
    }
    if s.non_2xx_responses > 0 {
        kv(out, "Non-2xx responses", s.non_2xx_responses.to_string())?;
    }
    if !s.status_codes.is_empty() {
        let codes: Vec<String> = s
            .status_codes
            .iter()
            .map(|(c, n)| format!("{c}: {n}"))
            .collect();
        kv(out, "Status codes", codes.join(", "))?;
    }
    if s.keepalive {
        kv(out, "Keep-Alive requests", s.keepalive_requests.to_string())?;
    }
    kv(
        out,
        "Total transferred",
        format!("{} bytes", s.total_transferred_bytes),
    )?;
    kv(
        out,
        "HTML transferred",
        format!("{} bytes", s.html_transferred_bytes),
    )
}

/// Phase 3: throughput. With `--rate` the request rate is set by the
/// schedule, so ab's "Time per request" (concurrency x wall / requests)
/// means nothing and is left out; loadgen's own send lag is shown instead.
fn rates(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    kv(
        out,
        "Requests per second",
        format!("{:.2} [#/sec] (mean)", s.requests_per_second),
    )?;
    if s.rate.is_none() {
        kv(
            out,
            "Time per request",
            format!("{:.3} [ms] (mean)", s.time_per_request_ms),
        )?;
        kv(
            out,
            "Time per request",
            format!(
                "{:.3} [ms] (mean, across all concurrent requests)",
                s.time_per_request_all_ms
            ),
        )?;
    }
    if let Some(lag) = &s.send_lag_ms {
        kv(
            out,
            "Send lag",
            format!(
                "{:.3} [ms] (median), {:.3} [ms] (max): loadgen's own lateness",
                lag.median, lag.max
            ),
        )?;
    }
    kv(
        out,
        "Transfer rate",
        format!("{:.2} [Kbytes/sec] received", s.transfer_rate_kib_s),
    )
}

/// Phase 4: CPU time of every watched process and of loadgen.
fn cpu(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    for c in &s.cpu {
        let who = format!("({})", c.name);
        match (c.cpu_time_s, c.utilisation, &c.error) {
            (Some(t), u, _) => {
                kv(out, "CPU time consumed", format!("{t:.3} s {who}"))?;
                let u = u.map_or("-".into(), |u| format!("{:.1}%", u * 100.0));
                kv(out, "CPU utilization", format!("{u} {who}"))?;
            }
            (None, _, e) => kv(
                out,
                "CPU time consumed",
                format!("unknown {who}: {}", e.clone().unwrap_or_default()),
            )?,
        }
    }
    Ok(())
}

/// Phase 5: ab's Connection Times table (`brief`: ab -S's min, avg, max).
fn connection_times(s: &Summary, brief: bool, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    let t = &s.connection_times_ms;
    writeln!(out, "Connection Times (ms)")?;
    if brief {
        writeln!(out, "              {:>9} {:>9} {:>9}", "min", "avg", "max")?;
        for (name, p) in [
            ("Connect", &t.connect),
            ("Processing", &t.processing),
            ("Waiting", &t.waiting),
            ("Total", &t.total),
        ] {
            writeln!(
                out,
                "{:<14}{:9.3} {:9.3} {:9.3}",
                format!("{name}:"),
                p.min,
                p.mean,
                p.max
            )?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "              {:>9} {:>9} {:>7} {:>9} {:>9}",
        "min", "mean", "[+/-sd]", "median", "max"
    )?;
    let row = |out: &mut dyn Write, name: &str, p: &PhaseStats| {
        writeln!(
            out,
            "{:<14}{:9.3} {:9.3} {:7.3} {:9.3} {:9.3}",
            format!("{name}:"),
            p.min,
            p.mean,
            p.sd,
            p.median,
            p.max
        )
    };
    row(out, "Connect", &t.connect)?;
    row(out, "Processing", &t.processing)?;
    row(out, "Waiting", &t.waiting)?;
    row(out, "Total", &t.total)
}

/// Phase 6: the percentile table(s), and the precision behind them.
fn percentile_tables(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    let head = "Percentage of the requests served within a certain time (ms)";
    tables(s, out, head)?;
    writeln!(
        out,
        "\n(Times come from HDR histograms: 1 µs to 1 h, 3 significant digits.)"
    )
}

fn tables(s: &Summary, out: &mut dyn Write, head: &str) -> std::io::Result<()> {
    match &s.corrected_percentiles_ms {
        Some(corrected) => {
            table(
                out,
                &format!("{head},\ncorrected: measured from each request's intended send time"),
                corrected,
            )?;
            table(
                out,
                &format!("{head},\nuncorrected: measured from the actual send time"),
                &s.percentiles_ms,
            )
        }
        None => table(out, head, &s.percentiles_ms),
    }
}

fn table(out: &mut dyn Write, head: &str, rows: &[Percentile]) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{head}")?;
    for p in rows {
        let label = format!("{}%", p.percent);
        if p.percent >= 100.0 {
            writeln!(out, "{label:>7} {:10.3} (longest request)", p.ms)?;
        } else {
            writeln!(out, "{label:>7} {:10.3}", p.ms)?;
        }
    }
    Ok(())
}
