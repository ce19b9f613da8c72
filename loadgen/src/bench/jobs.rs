//! One thing the bench loads: a route of a target at an address, how it is
//! checked before the runs, the run configuration, and the figures a run
//! yields.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};

use super::apis::{echoed_headers, Route};
use super::model::{RouteResult, RunFigures};
use super::probe::{self, CallStats};
use super::BenchArgs;
use crate::config::{Expect, RequestSpec, RunConfig, Target, WorkMode};
use crate::driver::RunResult;
use crate::report::Summary;

/// A route of a target, with the processes whose CPU is charged to it.
pub struct Job {
    /// What is being measured, and its results so far.
    pub result: RouteResult,
    /// Where requests go.
    pub addr: SocketAddr,
    /// Processes serving the route (gateway, peer master and workers, or
    /// the upstream itself): their CPU is the "server" CPU.
    pub server_pids: Vec<u32>,
    /// The upstream behind a gateway (empty for the upstream itself and
    /// for `--compare` peers, whose processes are not ours).
    pub upstream_pids: Vec<u32>,
    /// Our gateway's route with middleware: read its `/tyk/stats`.
    pub control: bool,
    /// The cores its processes and loadgen can run on together (from
    /// `--cpus`): what "how busy were the cores" is measured against.
    pub cores: usize,
}

impl Job {
    /// A job for `route` on `target`.
    pub fn new(target: &str, route: Route, addr: SocketAddr) -> Job {
        Job {
            result: RouteResult::new(target, route),
            addr,
            server_pids: Vec::new(),
            upstream_pids: Vec::new(),
            control: false,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// "ours native plugin /gopl/hello/", for messages.
    pub fn name(&self) -> String {
        format!("{} {}", self.result.target, self.result.route.title())
    }
}

/// The header names the upstream's echo shows on `path`, after checking
/// that the request got through to it.
pub fn echo_headers(addr: SocketAddr, path: &str) -> anyhow::Result<Vec<String>> {
    let (status, body) = probe::get(addr, path, &[]).with_context(|| format!("GET {path}"))?;
    if status != 200 {
        bail!("GET {path} answered {status}: {}", body.trim());
    }
    if !body.contains("hello from mock upstream") {
        bail!(
            "GET {path} did not reach the mock upstream: {}",
            body.trim()
        );
    }
    Ok(echoed_headers(&body))
}

/// The proof that a route runs its middleware: the upstream's echo shows a
/// header that the same target's no-middleware route does not (the
/// marker, then required in every response of the runs); a route without
/// middleware shows none.
pub fn check(job: &mut Job, baseline: &[String]) -> anyhow::Result<()> {
    let route = &job.result.route;
    if route.answers_itself {
        // A virtual endpoint: its own 200 answer is the proof it ran.
        let (status, body) = probe::get(job.addr, &route.path, &[])
            .with_context(|| format!("GET {}", route.path))?;
        if status != 200 {
            bail!("GET {} answered {status}: {}", route.path, body.trim());
        }
        return Ok(());
    }
    let seen = echo_headers(job.addr, &route.path)?;
    let extra: Vec<&String> = seen.iter().filter(|h| !baseline.contains(h)).collect();
    match (route.has_middleware, extra.first()) {
        (true, None) => bail!(
            "the upstream saw no header beyond the no-middleware route's on {}: its middleware did not run",
            route.path
        ),
        (true, Some(_)) => {
            // Prefer the seed's X-Custom-* headers over anything incidental.
            let marker = extra
                .iter()
                .find(|h| h.starts_with("X-Custom-"))
                .unwrap_or(&extra[0]);
            job.result.route.marker = Some(marker.to_string());
        }
        (false, Some(h)) => bail!("{} has no middleware but the upstream saw {h}", route.path),
        (false, None) => {}
    }
    Ok(())
}

/// The run configuration of `job`: ab's workload, every response checked.
pub fn config(args: &BenchArgs, job: &Job, n: u64) -> RunConfig {
    let target = Target {
        host: job.addr.ip().to_string(),
        port: job.addr.port(),
        path: job.result.route.path.clone(),
        addr: job.addr,
    };
    let mut body_contains = vec!["hello from mock upstream".to_string()];
    if job.result.route.answers_itself {
        body_contains.clear();
    }
    if let Some(m) = &job.result.route.marker {
        body_contains.push(format!("\"{m}\":"));
    }
    let mut cpu_pids = job.server_pids.clone();
    cpu_pids.extend(&job.upstream_pids);
    RunConfig {
        request: RequestSpec::get().encode(&target, args.keepalive),
        target,
        head: false,
        keepalive: args.keepalive,
        concurrency: args.concurrency,
        mode: WorkMode::Count(n),
        rate: None,
        timeout: Duration::from_secs(10),
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        expect: Expect {
            status: Some(200),
            body_contains,
            variable_length: false,
        },
        cpu_pids,
        verbosity: 0,
    }
}

/// The figures of one run of `job` in `round`.
pub fn figures(job: &Job, cfg: &RunConfig, res: &RunResult, round: usize) -> RunFigures {
    let s = Summary::new(cfg, res);
    // Not loadgen's own affinity: pinned to one core, it would count the
    // gateway's and the upstream's CPU on the other against one core.
    let cores = job.cores.max(1) as f64;
    // CPU seconds of a group of watched processes, if every one could be read.
    let sum = |range: std::ops::Range<usize>| -> Option<f64> {
        (!range.is_empty())
            .then(|| {
                res.cpu[range]
                    .iter()
                    .map(|c| c.cpu.as_ref().ok().map(|d| d.as_secs_f64()))
                    .sum::<Option<f64>>()
            })
            .flatten()
    };
    let n_server = job.server_pids.len().min(res.cpu.len());
    let server = sum(0..n_server);
    let upstream = sum(n_server..res.cpu.len());
    let wall = s.time_taken_s.max(1e-9);
    let own = res.own_cpu.as_secs_f64();
    let all = server.map(|sv| sv + upstream.unwrap_or(0.0) + own);
    let per_req = |cpu: f64| cpu * 1e6 / s.complete_requests.max(1) as f64;
    RunFigures {
        round,
        complete: s.complete_requests,
        failed: s.failed_requests.total,
        rps: s.requests_per_second,
        mean_latency_ms: s.time_per_request_ms,
        p50_ms: s.connection_times_ms.total.median,
        p99_ms: s
            .percentiles_ms
            .iter()
            .find(|p| p.percent == 99.0)
            .map_or(0.0, |p| p.ms),
        wall_s: s.time_taken_s,
        server_cpu_s: server,
        server_cpu_util: server.map(|c| c / wall),
        server_cpu_us_per_req: server.map(per_req),
        upstream_cpu_s: upstream,
        upstream_cpu_us_per_req: upstream.map(per_req),
        loadgen_cpu_s: own,
        loadgen_cpu_us_per_req: per_req(own),
        all_cpu_s: all,
        all_cpu_us_per_req: all.map(per_req),
        cores_busy: all.map(|a| a / (wall * cores)),
        cores: all.map(|_| job.cores),
        ..RunFigures::default()
    }
}

/// Adds the route's middleware call times from `/tyk/stats` to `fig`.
pub fn add_middleware(fig: &mut RunFigures, stats: &[CallStats], complete: u64) {
    if let Some(s) = stats.iter().find(|s| s.hook == "pre").or(stats.first()) {
        fig.mw_p50_us = Some(s.p50_us);
        fig.mw_p99_us = Some(s.p99_us);
        fig.mw_mean_us = Some(s.mean_us);
        fig.mw_calls_per_req = Some(s.count as f64 / complete.max(1) as f64);
        if let Some(vm) = &s.vm_thread {
            fig.mw_vm_mean_us = Some(vm.mean_us);
            fig.mw_vm_p50_us = Some(vm.p50_us);
            fig.mw_vm_share = Some(vm.count as f64 / s.count.max(1) as f64);
        }
    }
}
