//! The bench's sequence, one named phase each: set up, start our servers,
//! plan the jobs (our routes, the A/A control, the upstream, peers), check
//! every route, warm up, measure alternated rounds, and assemble the report.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use super::apis::{self, Found, Route};
use super::jobs::{self, Job};
use super::model::{BenchReport, PeerStatus, Process, SCHEMA};
use super::peers;
use super::pin::{self, Pinning};
use super::probe::Control;
use super::procs::{self, Child, Spawn};
use super::stamp::Stamps;
use super::{BenchArgs, Interrupt};
use crate::driver::{self, RunResult};
use crate::progress::Bar;

const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A temporary directory removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Everything started and planned: the children (stopped when dropped),
/// the jobs, and what the report needs to say about them.
struct Bench<'a> {
    args: &'a BenchArgs,
    interrupt: &'a Interrupt,
    pinning: Pinning,
    /// The cores loadgen could run on before `--cpus` pinned it: where
    /// unpinned children run.
    all_cores: Vec<usize>,
    /// mock-upstream first, then the gateway, then peers.
    children: Vec<Child>,
    jobs: Vec<Job>,
    peers: Vec<PeerStatus>,
    control: Option<Control>,
    up_addr: SocketAddr,
    gw_addr: SocketAddr,
    work: WorkDir,
    /// The round the measurements stopped in, and why (a child exited,
    /// Ctrl-C): the rounds before it are still reported.
    stopped: Option<(usize, String)>,
}

/// Runs the whole bench and returns its report.
pub fn run(
    args: &BenchArgs,
    interrupt: &Interrupt,
    command: String,
) -> anyhow::Result<BenchReport> {
    let root = std::env::current_dir()?;
    let stamps = Stamps::collect(&root, command);
    let mut bench = setup(args, interrupt)?;
    let chosen = bench.start_ours(&root)?;
    bench.plan_ours(chosen)?;
    bench.plan_peers()?;
    interrupt.check()?;
    bench.check_all();
    bench.warm_up()?;
    bench.measure()?;
    Ok(bench.report(stamps))
}

/// Phase 1: pin loadgen, check the ports, make the private directory.
fn setup<'a>(args: &'a BenchArgs, interrupt: &'a Interrupt) -> anyhow::Result<Bench<'a>> {
    // `bench::main` has checked already (a usage error exits 2 there);
    // again for callers of `run` that did not.
    args.check()?;
    let pinning = Pinning::parse(&args.cpus)?;
    let all_cores = pin::allowed();
    if let Some(c) = &pinning.loadgen {
        pin::pin_self(c)?;
    }
    for (port, flag) in [
        (args.upstream_port, "--upstream-port"),
        (args.gateway_port, "--gateway-port"),
    ] {
        if port != 0 {
            procs::check_port_free(port, flag)?;
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let work =
        WorkDir(std::env::temp_dir().join(format!("loadgen-bench-{}-{nanos}", std::process::id())));
    std::fs::create_dir_all(&work.0)
        .with_context(|| format!("cannot create {}", work.0.display()))?;
    let unset: SocketAddr = ([127, 0, 0, 1], 0).into();
    Ok(Bench {
        args,
        interrupt,
        pinning,
        all_cores,
        children: Vec::new(),
        jobs: Vec::new(),
        peers: Vec::new(),
        control: None,
        up_addr: unset,
        gw_addr: unset,
        work,
        stopped: None,
    })
}

/// Starts one of our servers and waits until it answers `ready_path`.
fn start_server(
    how: &Spawn<'_>,
    port: u16,
    ready_path: &str,
) -> anyhow::Result<(Child, SocketAddr)> {
    let mut child = Child::start_with(how, START_TIMEOUT)?;
    let listen: SocketAddr = ([127, 0, 0, 1], port).into();
    let addr = child.addr.filter(|a| a.port() != 0).unwrap_or(listen);
    procs::wait_ready(&mut child, addr, ready_path, START_TIMEOUT)?;
    Ok((child, addr))
}

impl Bench<'_> {
    /// Phase 2: mock-upstream, the definitions rewritten for it, the
    /// routes `--routes` chooses (and the Go plugins only they need,
    /// built), the gateway.
    fn start_ours(&mut self, root: &Path) -> anyhow::Result<Vec<Chosen>> {
        let args = self.args;
        let bin_dir = match &args.bin_dir {
            Some(d) => d.clone(),
            None => std::env::current_exe()?
                .parent()
                .context("loadgen has no directory")?
                .to_path_buf(),
        };
        let upstream_bin = procs::binary(&bin_dir, "mock-upstream")?;
        let gateway_bin = procs::binary(&bin_dir, "gateway")?;
        // Port 0 means any free port: the real one is read back from the child.
        let mut up_args = vec![
            "--listen".to_string(),
            format!("127.0.0.1:{}", args.upstream_port),
        ];
        if let Some(t) = args.upstream_threads {
            up_args.extend(["--threads".into(), t.to_string()]);
        }
        let how = Spawn {
            name: "mock-upstream",
            program: &upstream_bin,
            args: &up_args,
            cwd: root,
            log: self.work.0.join("upstream.log"),
            cpus: self.pinning.upstream.as_deref(),
        };
        let (upstream, up_addr) = start_server(&how, args.upstream_port, "/")?;
        self.children.push(upstream);
        self.up_addr = up_addr;

        let defs = self.work.0.join("apis");
        let found = apis::prepare(&args.apis, &defs, root, up_addr.port())?;
        if found.is_empty() {
            bail!(
                "no active API definitions with a listen_path in {}",
                args.apis.display()
            );
        }
        // Before the gateway starts: it loads each plugin once, so a
        // library must exist by then.
        let chosen = choose(found, &args.routes, root)?;
        let secret = format!("bench-{}-{}", std::process::id(), up_addr.port());
        let mut gw_args: Vec<String> = vec![
            "--apis".into(),
            defs.to_string_lossy().into_owned(),
            "--listen".into(),
            format!("127.0.0.1:{}", args.gateway_port),
            "--secret".into(),
            secret.clone(),
            "--jsvm-timeout".into(),
            "5s".into(),
        ];
        if let Some(t) = args.gateway_threads {
            gw_args.extend(["--threads".into(), t.to_string()]);
        }
        let how = Spawn {
            name: "gateway",
            program: &gateway_bin,
            args: &gw_args,
            cwd: root,
            log: self.work.0.join("gateway.log"),
            cpus: self.pinning.gateway.as_deref(),
        };
        let (gateway, gw_addr) = start_server(&how, args.gateway_port, "/hello")?;
        self.children.push(gateway);
        self.gw_addr = gw_addr;
        self.control = Some(Control {
            addr: gw_addr,
            secret,
        });
        Ok(chosen)
    }

    /// Phase 3: our routes (as `--routes` chose them), the A/A control,
    /// the upstream served directly, and `--compare` peers' seed routes.
    fn plan_ours(&mut self, chosen: Vec<Chosen>) -> anyhow::Result<()> {
        let (gw, up) = (self.children[1].pid(), self.children[0].pid());
        for (route, skipped, requested) in chosen {
            let upstream = route.key == "upstream";
            let addr = if upstream { self.up_addr } else { self.gw_addr };
            let mut job = Job::new("ours", route, addr);
            job.result.requested = requested;
            job.result.skipped = skipped;
            job.server_pids = vec![if upstream { up } else { gw }];
            let p = &self.pinning;
            let server = if upstream { &p.upstream } else { &p.gateway };
            job.cores = self.cores(&[server, &p.upstream]);
            if !upstream {
                job.upstream_pids = vec![up];
                job.control = job.result.route.has_middleware;
            }
            self.jobs.push(job);
        }
        for c in &self.args.compare {
            let (name, addr) = resolve_compare(c)?;
            for (key, label, path, mw) in [
                ("native", "native plugin", "/gopl/hello/", true),
                ("js", "JS (VM)", "/jsvm/hello/", true),
                ("plain", "no middleware", "/plain/hello/", false),
            ] {
                // A peer's process is not ours to measure: no CPU column for
                // it. Asked for by name: a route that fails its check fails
                // the bench.
                let mut job = Job::new(&name, Route::bare(key, label, path, mw), addr);
                job.result.requested = true;
                self.jobs.push(job);
            }
        }
        Ok(())
    }

    /// Phase 4: the peers asked for, started in front of our upstream.
    fn plan_peers(&mut self) -> anyhow::Result<()> {
        let args = self.args;
        let mut names: Vec<(String, bool)> = args.peer.iter().map(|p| (p.clone(), true)).collect();
        if args.peers {
            for n in peers::NAMES {
                if !names.iter().any(|(m, _)| m == n) {
                    names.push((n.to_string(), false));
                }
            }
        }
        let workers = args
            .gateway_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        for (name, requested) in names {
            let mut status = PeerStatus {
                config: peers::config_file(&name).into(),
                name: name.clone(),
                skipped: None,
                requested,
            };
            let started = peers::plan(&name).and_then(|plan| {
                let dir = self.work.0.join(&name);
                let cpus = self.pinning.peer.as_deref();
                peers::start(&plan, &dir, self.up_addr.port(), workers, cpus).map(|r| (plan, r))
            });
            match started {
                Ok((plan, running)) => {
                    let pids = running.child.pids();
                    for (route, skipped) in plan.routes {
                        let mut job = Job::new(&name, route, running.addr);
                        job.result.skipped = skipped;
                        job.server_pids = pids.clone();
                        job.upstream_pids = vec![self.children[0].pid()];
                        job.cores = self.cores(&[&self.pinning.peer, &self.pinning.upstream]);
                        self.jobs.push(job);
                    }
                    self.children.push(running.child);
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    eprintln!("loadgen bench: peer {name} skipped: {why}");
                    status.skipped = Some(why);
                }
            }
            self.peers.push(status);
        }
        Ok(())
    }

    /// Phase 5: check every route once; a route that fails is skipped with
    /// the reason (for our gateway's, in the gateway's own words).
    fn check_all(&mut self) {
        let targets: Vec<String> = {
            let mut t: Vec<String> = Vec::new();
            for j in &self.jobs {
                if !t.contains(&j.result.target) {
                    t.push(j.result.target.clone());
                }
            }
            t
        };
        for target in targets {
            // What the upstream sees without middleware on this target.
            let plain = self
                .jobs
                .iter()
                .find(|j| j.result.target == target && j.result.route.key == "plain");
            let baseline = plain
                .map(|j| (j.addr, j.result.route.path.clone()))
                .unwrap_or((self.up_addr, "/hello/".into()));
            let baseline = jobs::echo_headers(baseline.0, &baseline.1).unwrap_or_default();
            for i in 0..self.jobs.len() {
                let j = &mut self.jobs[i];
                if j.result.target != target || j.result.skipped.is_some() {
                    continue;
                }
                if let Err(e) = jobs::check(j, &baseline) {
                    let e = self.explain(i, e);
                    let j = &mut self.jobs[i];
                    eprintln!("loadgen bench: skipping {}: {e:#}", j.name());
                    j.result.skipped = Some(format!("{e:#}"));
                }
            }
        }
    }

    /// Adds the gateway's log line on why an API did not load, and the
    /// user's definition file, to a failed check.
    fn explain(&self, i: usize, mut e: anyhow::Error) -> anyhow::Error {
        let route = &self.jobs[i].result.route;
        if self.jobs[i].result.target == "ours" {
            if let Some(id) = &route.api_id {
                if let Some(line) = self.children[1].log_lines(&["not loaded", id]).pop() {
                    let from = line.find("API definition").unwrap_or(0);
                    e = e.context(line[from..].to_string());
                }
            }
            if let Some(src) = &route.source {
                e = e.context(format!("{}", src.display()));
            }
        }
        e
    }

    /// The cores loadgen and the processes pinned to `pins` can run on together.
    fn cores(&self, pins: &[&Option<Vec<usize>>]) -> usize {
        let mut all: Vec<Option<&[usize]>> = vec![self.pinning.loadgen.as_deref()];
        all.extend(pins.iter().map(|p| p.as_deref()));
        pin::cores_of(&self.all_cores, &all)
    }

    fn live(&self) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&i| self.jobs[i].result.skipped.is_none())
            .collect()
    }

    /// Phase 6: warm every live route up (JIT-less, but caches, pools and
    /// the kernel's socket state all warm).
    fn warm_up(&mut self) -> anyhow::Result<()> {
        for i in self.live() {
            let n = self.args.warmup.max(self.args.concurrency as u64);
            let cfg = jobs::config(self.args, &self.jobs[i], n);
            let label = format!("warm-up {} ", self.jobs[i].name());
            self.watched_run(&cfg, &label)?;
        }
        Ok(())
    }

    /// Phase 7: `--repeat` rounds; each runs every live route once, each
    /// round starting one route further along, so that no route always runs
    /// first (or right after the same neighbour).
    ///
    /// A run that cannot finish (a child exited, Ctrl-C, SIGTERM) ends the
    /// measurements, not the bench: the runs already done are reported,
    /// with why it stopped, so that an hour of rounds is not thrown away
    /// for the last one. Only when no run finished is it an error.
    fn measure(&mut self) -> anyhow::Result<()> {
        let live = self.live();
        let rounds = self.args.repeat;
        for round in 0..rounds {
            for k in 0..live.len() {
                let i = live[(k + round) % live.len()];
                if let Err(e) = self.measure_one(i, round, rounds) {
                    if self.jobs.iter().all(|j| j.result.runs.is_empty()) {
                        return Err(e);
                    }
                    self.stopped = Some((round, format!("{e:#}")));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn measure_one(&mut self, i: usize, round: usize, rounds: usize) -> anyhow::Result<()> {
        let control = self.control.as_ref().filter(|_| self.jobs[i].control);
        if let Some(c) = control {
            c.reset()?;
        }
        let cfg = jobs::config(self.args, &self.jobs[i], self.args.requests);
        let label = format!("round {}/{rounds} {} ", round + 1, self.jobs[i].name());
        let res = self.watched_run(&cfg, &label)?;
        let mut fig = jobs::figures(&self.jobs[i], &cfg, &res, round);
        if let Some(c) = control {
            let api = self.jobs[i].result.route.api_id.clone();
            let stats: Vec<_> = c
                .stats()?
                .into_iter()
                .filter(|s| Some(&s.api_id) == api.as_ref())
                .collect();
            jobs::add_middleware(&mut fig, &stats, res.rec.complete);
            self.jobs[i].result.middleware = stats;
        }
        let r = &mut self.jobs[i].result;
        r.runs.push(fig);
        match &mut r.hist {
            Some(h) => {
                let _ = h.add(&res.rec.total);
            }
            None => r.hist = Some(res.rec.total.clone()),
        }
        Ok(())
    }

    /// One load run, stopped early when a child exits or on Ctrl-C; either
    /// ends the bench with the reason.
    fn watched_run(&self, cfg: &crate::RunConfig, label: &str) -> anyhow::Result<RunResult> {
        let why: RefCell<Option<String>> = RefCell::new(None);
        let exits: Vec<_> = self
            .children
            .iter()
            .map(|c| Box::pin(c.exit_signal()))
            .collect();
        let stop = async {
            let reason = tokio::select! {
                _ = self.interrupt.wait() => "interrupted".to_string(),
                who = first_of(exits) => who,
            };
            *why.borrow_mut() = Some(reason);
        };
        let bar = Bar::with_prefix(cfg.mode.max_requests(), false, label);
        let mut tick = |p| bar.update(p);
        let res = driver::run(cfg, stop, Some(&mut tick));
        bar.finish();
        let res = res?;
        if let Some(why) = why.into_inner() {
            if why == "interrupted" {
                bail!(super::INTERRUPTED_MSG);
            }
            let tail = self
                .children
                .iter()
                .find(|c| why.starts_with(&c.name))
                .map(|c| c.log_tail())
                .unwrap_or_default();
            bail!("{why} during the run of {}; {tail}", cfg.target.path);
        }
        Ok(res)
    }

    /// Phase 8: medians, spreads, ratios, and the reasons for a non-zero exit.
    fn report(self, stamps: Stamps) -> BenchReport {
        let mut routes: Vec<_> = self.jobs.into_iter().map(|j| j.result).collect();
        routes.iter_mut().for_each(|r| r.finish());
        let mut problems = Vec::new();
        for r in &routes {
            match &r.skipped {
                Some(why) if r.requested => problems.push(format!(
                    "route {} ({}) was not measured: {why}",
                    r.route.key, r.target
                )),
                _ if r.failed_total > 0 => problems.push(format!(
                    "{} {}: {} failed requests over {} runs",
                    r.target,
                    r.route.title(),
                    r.failed_total,
                    r.runs.len()
                )),
                _ => {}
            }
        }
        for p in self.peers.iter().filter(|p| p.requested) {
            if let Some(why) = &p.skipped {
                problems.push(format!("peer {} was not measured: {why}", p.name));
            }
        }
        // Rounds begun: the report's pairing and its preamble count these.
        let mut repeat = self.args.repeat;
        let stopped = self.stopped.map(|(round, why)| {
            repeat = round + 1;
            format!(
                "the measurements stopped in round {repeat} of {}: {why}; this report has only the runs completed before",
                self.args.repeat
            )
        });
        problems.splice(0..0, stopped.clone());
        let names = ["mock-upstream", "gateway"];
        let pins = [&self.pinning.upstream, &self.pinning.gateway];
        let processes = self
            .children
            .iter()
            .enumerate()
            .map(|(i, c)| Process {
                name: c.name.clone(),
                pid: c.pid(),
                cpus: if i < 2 && names[i] == c.name {
                    pins[i].clone()
                } else {
                    self.pinning.peer.clone()
                },
            })
            .collect();
        let mut report = BenchReport {
            schema: SCHEMA.into(),
            stamps,
            requests: self.args.requests,
            concurrency: self.args.concurrency,
            keepalive: self.args.keepalive,
            repeat,
            gateway_threads: self.args.gateway_threads,
            loadgen_cpus: self.pinning.loadgen.clone(),
            processes,
            peers: self.peers,
            routes,
            comparisons: Vec::new(),
            design_choices: Vec::new(),
            stopped,
            problems,
        };
        report.compare();
        report
    }
}

/// A route to measure: the route, why it is skipped (if it is), and
/// whether `--routes` asked for it by name.
type Chosen = (Route, Option<String>, bool);

/// Our routes, the A/A control and the upstream, as `--routes` chooses
/// them; the Go plugins of the chosen routes are built (and only theirs:
/// `--routes plain` does not wait ~30 s for a Go build it does not use).
fn choose(mut found: Vec<Found>, wanted: &[String], root: &Path) -> anyhow::Result<Vec<Chosen>> {
    let mut routes = candidates(&found);
    let selected = select(&routes, wanted)?;
    // `found` is the front of `routes`, in the same order.
    for (i, f) in found.iter_mut().enumerate() {
        if selected[i].is_some() {
            f.build(root);
            routes[i].1 = f.skipped.clone();
        }
    }
    Ok(routes
        .into_iter()
        .zip(selected)
        .filter_map(|((route, skipped), sel)| sel.map(|requested| (route, skipped, requested)))
        .collect())
}

/// Every route `--routes` can choose, with why it is skipped (if it is):
/// the definitions' (`found`, first and in order), the A/A control and the
/// upstream served directly.
fn candidates(found: &[Found]) -> Vec<(Route, Option<String>)> {
    let mut routes: Vec<(Route, Option<String>)> = found
        .iter()
        .map(|f| (f.route.clone(), f.skipped.clone()))
        .collect();
    // The A/A control: the no-middleware route again, under another name.
    if let Some((plain, _)) = routes.iter().find(|(r, _)| r.key == "plain") {
        let mut again = plain.clone();
        again.key = "plain-again".into();
        again.label = "no middleware (again)".into();
        routes.push((again, None));
    }
    routes.push((
        Route::bare("upstream", "upstream direct", "/hello/", false),
        None,
    ));
    routes
}

/// The usage check of `--apis` and `--routes`, made before anything
/// starts: the definitions directory must be readable (the bench run
/// outside the repo root, where the default `apis` is not), and every name
/// `--routes` gives must choose a route of its definitions (read, not yet
/// written: that needs the upstream's port).
pub fn check_definitions(args: &BenchArgs) -> anyhow::Result<()> {
    let root = std::env::current_dir()?;
    let defs = apis::read(&args.apis, &root)?;
    if args.routes.is_empty() {
        return Ok(());
    }
    select(&candidates(&defs.found), &args.routes).map(drop)
}

/// Which routes `--routes` selects: `Some(true)` asked for by name,
/// `Some(false)` included by default, `None` left out.
fn select(
    routes: &[(Route, Option<String>)],
    wanted: &[String],
) -> anyhow::Result<Vec<Option<bool>>> {
    let wanted: Vec<&str> = wanted
        .iter()
        .flat_map(|w| w.split(','))
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    if wanted.is_empty() {
        return Ok(vec![Some(false); routes.len()]);
    }
    let matches = |r: &Route, w: &str| {
        r.key == w
            || r.api_id.as_deref() == Some(w)
            || r.path == w
            || r.path.trim_end_matches("hello/") == w
            || r.label.eq_ignore_ascii_case(w)
    };
    for w in &wanted {
        if !routes.iter().any(|(r, _)| matches(r, w)) {
            let known: Vec<&str> = routes.iter().map(|(r, _)| r.key.as_str()).collect();
            bail!(
                "--routes: no route {w:?}; the routes are {} (or their API ids or listen paths)",
                known.join(", ")
            );
        }
    }
    let mut out: Vec<Option<bool>> = routes
        .iter()
        .map(|(r, _)| wanted.iter().any(|w| matches(r, w)).then_some(true))
        .collect();
    // The A/A control comes with the no-middleware route it repeats.
    let pos = |k: &str| routes.iter().position(|(r, _)| r.key == k);
    if let (Some(p), Some(a)) = (pos("plain"), pos("plain-again")) {
        if out[p].is_some() && out[a].is_none() {
            out[a] = Some(false);
        }
    }
    Ok(out)
}

/// A `--compare` value, `NAME=http://host[:port]`, checked for its form
/// only (a usage error when it is wrong): a name, and a URL `loadgen URL`
/// would take. Its host is resolved when the peer is planned
/// ([`resolve_compare`]).
pub fn parse_compare(s: &str) -> anyhow::Result<(String, String, u16)> {
    let (name, url) = s
        .split_once('=')
        .filter(|(name, _)| !name.trim().is_empty())
        .with_context(|| format!("--compare {s:?}: expected NAME=BASE_URL"))?;
    let (host, port, path) =
        crate::cli::parse_url(url).map_err(|e| anyhow::anyhow!("--compare {s:?}: {e}"))?;
    // The seed's routes are measured at the gateway's root: a path would be
    // dropped without a word, and the routes measured somewhere else.
    if path != "/" {
        anyhow::bail!(
            "--compare {s:?}: the base URL has a path ({path}); the seed's routes are measured at the gateway's root, so give http://host:port"
        );
    }
    // A name the report already gives rows to would mix two gateways' rows.
    let name = name.trim();
    if name == "ours" || super::peers::NAMES.contains(&name) {
        anyhow::bail!(
            "--compare {s:?}: {name:?} names this gateway's own rows or a --peer's; choose another name"
        );
    }
    Ok((name.to_string(), host, port))
}

/// A `--compare` peer's name and address. A host that does not resolve is
/// not a usage error (the flag is well formed; the name service answers
/// when asked, as for `loadgen URL`): the bench fails then, exit status 1.
fn resolve_compare(s: &str) -> anyhow::Result<(String, SocketAddr)> {
    let (name, host, port) = parse_compare(s)?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .with_context(|| format!("--compare {s:?}: cannot resolve {host}"))?
        .next()
        .with_context(|| format!("--compare {s:?}: {host} has no address"))?;
    Ok((name, addr))
}

/// The first of `futs` to resolve (never, when there are none).
async fn first_of<F: std::future::Future<Output = String> + Unpin>(mut futs: Vec<F>) -> String {
    std::future::poll_fn(|cx| {
        for f in futs.iter_mut() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}
