//! The bench's sequence: start, check, warm up, alternate runs, collect.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};

use super::apis::{self, Route};
use super::model::{BenchReport, RouteResult, RunFigures, SCHEMA};
use super::probe::{self, Control};
use super::procs::{self, Child};
use super::{BenchArgs, INTERRUPTED};
use crate::config::{Expect, RequestSpec, RunConfig, Target, WorkMode};
use crate::driver::{self, RunResult, StopHandle};
use crate::report::Summary;

/// A temporary directory removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One thing to load: a target's route at an address, with the process
/// whose CPU is charged to it.
struct Job {
    result: RouteResult,
    addr: SocketAddr,
    cpu_pids: Vec<u32>,
    /// The control API, for our gateway's routes with middleware.
    control: bool,
}

/// Runs the whole bench and returns its report.
pub fn run(args: &BenchArgs, command: String) -> anyhow::Result<BenchReport> {
    if args.requests < args.concurrency as u64 || args.concurrency == 0 {
        bail!(
            "-n {} must be at least -c {} (and -c at least 1)",
            args.requests,
            args.concurrency
        );
    }
    let bin_dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("loadgen has no directory")?
            .to_path_buf(),
    };
    let upstream_bin = procs::binary(&bin_dir, "mock-upstream")?;
    let gateway_bin = procs::binary(&bin_dir, "gateway")?;
    for (port, flag) in [
        (args.upstream_port, "--upstream-port"),
        (args.gateway_port, "--gateway-port"),
    ] {
        if port != 0 {
            procs::check_port_free(port, flag)?;
        }
    }
    let peers = args
        .compare
        .iter()
        .map(|c| parse_compare(c))
        .collect::<anyhow::Result<Vec<_>>>()?;

    let root = std::env::current_dir()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let work =
        WorkDir(std::env::temp_dir().join(format!("loadgen-bench-{}-{nanos}", std::process::id())));
    std::fs::create_dir_all(&work.0)
        .with_context(|| format!("cannot create {}", work.0.display()))?;
    let start_timeout = Duration::from_secs(20);

    // Port 0 means any free port: the real one is read back from the child.
    let up_listen: SocketAddr = ([127, 0, 0, 1], args.upstream_port).into();
    let mut up_args = vec!["--listen".to_string(), up_listen.to_string()];
    if let Some(t) = args.upstream_threads {
        up_args.extend(["--threads".into(), t.to_string()]);
    }
    let mut upstream = Child::start(
        "mock-upstream",
        &upstream_bin,
        &up_args,
        &root,
        work.0.join("upstream.log"),
        start_timeout,
    )?;
    let up_addr = upstream.addr.filter(|a| a.port() != 0).unwrap_or(up_listen);
    procs::wait_ready(&mut upstream, up_addr, "/", start_timeout)?;

    let routes = apis::prepare(&args.apis, &work.0.join("apis"), &root, up_addr.port())?;
    if routes.is_empty() {
        bail!(
            "no API definitions with a listen_path in {}",
            args.apis.display()
        );
    }
    let secret = format!("bench-{}-{nanos}", std::process::id());
    let gw_listen: SocketAddr = ([127, 0, 0, 1], args.gateway_port).into();
    let mut gw_args = vec![
        "--apis".to_string(),
        work.0.join("apis").to_string_lossy().into_owned(),
        "--listen".into(),
        gw_listen.to_string(),
        "--secret".into(),
        secret.clone(),
        "--jsvm-timeout".into(),
        "5s".into(),
    ];
    if let Some(t) = args.gateway_threads {
        gw_args.extend(["--threads".into(), t.to_string()]);
    }
    let mut gateway = Child::start(
        "gateway",
        &gateway_bin,
        &gw_args,
        &root,
        work.0.join("gateway.log"),
        start_timeout,
    )?;
    let gw_addr = gateway.addr.filter(|a| a.port() != 0).unwrap_or(gw_listen);
    procs::wait_ready(&mut gateway, gw_addr, "/hello", start_timeout)?;
    let control = Control {
        addr: gw_addr,
        secret,
    };

    // Our routes, the upstream itself, then each peer's routes.
    let mut jobs: Vec<Job> = Vec::new();
    for r in routes {
        let control = r.marker.is_some();
        jobs.push(job(
            "ours",
            r,
            gw_addr,
            vec![gateway.pid(), upstream.pid()],
            control,
        ));
    }
    let direct = Route {
        key: "upstream".into(),
        label: "upstream direct".into(),
        path: "/hello/".into(),
        api_id: None,
        marker: None,
    };
    jobs.push(job("ours", direct, up_addr, vec![upstream.pid()], false));
    for (name, addr) in &peers {
        for r in apis::peer_routes() {
            // A peer's process is not ours to measure: no CPU column for it.
            jobs.push(job(name, r, *addr, Vec::new(), false));
        }
    }
    for j in &mut jobs {
        if let Err(mut e) = check_route(&j.result.route, j.addr) {
            if let (true, Some(id)) = (j.result.target == "ours", &j.result.route.api_id) {
                // The gateway's own words on why that API is missing.
                if let Some(line) = gateway.log_lines(&["not loaded", id]).pop() {
                    let from = line.find("API definition").unwrap_or(0);
                    e = e.context(line[from..].to_string());
                }
            }
            eprintln!(
                "loadgen bench: skipping {} {}: {e}",
                j.result.target, j.result.route.path
            );
            j.result.skipped = Some(format!("{e:#}"));
        }
    }

    let mut children = [upstream, gateway];
    let live: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].result.skipped.is_none())
        .collect();
    for &i in &live {
        let cfg = config(args, &jobs[i], args.warmup.max(args.concurrency as u64));
        eprintln!(
            "loadgen bench: warming up {} {}",
            jobs[i].result.target, jobs[i].result.route.path
        );
        watched_run(&cfg, &mut children)?;
    }
    for rep in 0..args.repeat {
        // Alternate: each repeat starts one route further along.
        for k in 0..live.len() {
            let i = live[(k + rep) % live.len()];
            let j = &mut jobs[i];
            eprintln!(
                "loadgen bench: run {}/{} {} {}",
                rep + 1,
                args.repeat,
                j.result.target,
                j.result.route.path
            );
            if j.control {
                control.reset()?;
            }
            let cfg = config(args, j, args.requests);
            let res = watched_run(&cfg, &mut children)?;
            let mut fig = figures(&cfg, &res);
            if j.control {
                let api = j.result.route.api_id.clone();
                let stats: Vec<_> = control
                    .stats()?
                    .into_iter()
                    .filter(|s| Some(&s.api_id) == api.as_ref())
                    .collect();
                if let Some(s) = stats.iter().find(|s| s.hook == "pre").or(stats.first()) {
                    fig.mw_p50_us = Some(s.p50_us);
                    fig.mw_p99_us = Some(s.p99_us);
                    fig.mw_calls_per_req = Some(s.count as f64 / res.rec.complete.max(1) as f64);
                }
                j.result.middleware = stats;
            }
            j.result.runs.push(fig);
            match &mut j.result.hist {
                Some(h) => {
                    let _ = h.add(&res.rec.total);
                }
                None => j.result.hist = Some(res.rec.total.clone()),
            }
        }
    }
    let mut routes: Vec<RouteResult> = jobs.into_iter().map(|j| j.result).collect();
    routes.iter_mut().for_each(RouteResult::finish);
    Ok(BenchReport {
        schema: SCHEMA.into(),
        requests: args.requests,
        concurrency: args.concurrency,
        keepalive: args.keepalive,
        repeat: args.repeat,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        gateway_threads: args.gateway_threads,
        command,
        processes: children.iter().map(|c| (c.name.clone(), c.pid())).collect(),
        routes,
    })
}

fn job(target: &str, route: Route, addr: SocketAddr, cpu_pids: Vec<u32>, control: bool) -> Job {
    Job {
        result: RouteResult::new(target, route),
        addr,
        cpu_pids,
        control,
    }
}

/// `NAME=http://host:port` of `--compare`.
fn parse_compare(s: &str) -> anyhow::Result<(String, SocketAddr)> {
    let (name, url) = s
        .split_once('=')
        .with_context(|| format!("--compare {s:?}: expected NAME=BASE_URL"))?;
    let (host, port, _) =
        crate::cli::parse_url(url).map_err(|e| anyhow::anyhow!("--compare {s:?}: {e}"))?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))?
        .next()
        .with_context(|| format!("--compare {s:?}: {host} has no address"))?;
    Ok((name.to_string(), addr))
}

/// The proof that a route runs its middleware: the upstream's echo shows
/// the route's marker header, and a route without middleware shows none.
fn check_route(route: &Route, addr: SocketAddr) -> anyhow::Result<()> {
    let (status, body) =
        probe::get(addr, &route.path, &[]).with_context(|| format!("GET {}", route.path))?;
    if status != 200 {
        bail!("GET {} answered {status}: {}", route.path, body.trim());
    }
    if !body.contains("hello from mock upstream") {
        bail!(
            "GET {} did not reach the mock upstream: {}",
            route.path,
            body.trim()
        );
    }
    match &route.marker {
        Some(m) if !body.contains(&format!("\"{m}\"")) => {
            bail!(
                "the upstream did not see {m} on {}: its middleware did not run (echo: {})",
                route.path,
                body.trim()
            )
        }
        None => {
            if let Some(m) = apis::all_markers()
                .iter()
                .find(|m| body.contains(&format!("\"{m}\"")))
            {
                bail!("{} has no middleware but the upstream saw {m}", route.path);
            }
        }
        _ => {}
    }
    Ok(())
}

fn config(args: &BenchArgs, j: &Job, n: u64) -> RunConfig {
    let target = Target {
        host: j.addr.ip().to_string(),
        port: j.addr.port(),
        path: j.result.route.path.clone(),
        addr: j.addr,
    };
    let mut body_contains = vec!["hello from mock upstream".to_string()];
    if let Some(m) = &j.result.route.marker {
        body_contains.push(format!("\"{m}\""));
    }
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
        },
        cpu_pids: j.cpu_pids.clone(),
    }
}

/// Runs `cfg` while watching the children: a child that dies, or Ctrl-C,
/// stops the run at once instead of leaving it to time out.
fn watched_run(cfg: &RunConfig, children: &mut [Child]) -> anyhow::Result<RunResult> {
    let handle: Arc<Mutex<Option<StopHandle>>> = Arc::default();
    std::thread::scope(|s| {
        let h = handle.clone();
        let run = s.spawn(move || {
            let mut set = |sh| *h.lock().unwrap_or_else(|p| p.into_inner()) = Some(sh);
            driver::run_with(cfg, false, None, Some(&mut set))
        });
        let mut problem = None;
        while !run.is_finished() {
            if INTERRUPTED.load(Ordering::SeqCst) {
                problem = Some("interrupted".to_string());
            }
            for c in children.iter_mut() {
                if let Some(st) = c.exited() {
                    problem = Some(format!(
                        "{} {st} during the run of {}; {}",
                        c.name,
                        cfg.target.path,
                        c.log_tail()
                    ));
                }
            }
            if problem.is_some() {
                if let Some(h) = handle.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                    h.stop();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let res = run
            .join()
            .map_err(|_| anyhow::anyhow!("the load run panicked"))??;
        match problem {
            Some(p) => bail!(p),
            None => Ok(res),
        }
    })
}

fn figures(cfg: &RunConfig, res: &RunResult) -> RunFigures {
    let s = Summary::new(cfg, res);
    // A watched process's CPU seconds, if they could be read: first the
    // process serving the route, then (for gateway routes) the upstream.
    let cpu_s = |c: &crate::cpu::CpuUsage| c.cpu.as_ref().ok().map(|d| d.as_secs_f64());
    let server = res.cpu.first().and_then(cpu_s);
    let upstream = res.cpu.get(1).and_then(cpu_s);
    let wall = s.time_taken_s;
    let own = res.own_cpu.as_secs_f64();
    // Every process the run watched, or nothing if one could not be read.
    let watched: Option<f64> = (!res.cpu.is_empty())
        .then(|| res.cpu.iter().map(cpu_s).sum::<Option<f64>>())
        .flatten();
    let per_req = |cpu: f64| cpu * 1e6 / s.complete_requests.max(1) as f64;
    RunFigures {
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
        wall_s: wall,
        server_cpu_s: server,
        server_cpu_util: server.map(|c| c / wall.max(1e-9)),
        server_cpu_us_per_req: server.map(per_req),
        upstream_cpu_s: upstream,
        loadgen_cpu_s: own,
        all_cpu_us_per_req: watched.map(|c| per_req(c + own)),
        mw_p50_us: None,
        mw_p99_us: None,
        mw_calls_per_req: None,
    }
}
