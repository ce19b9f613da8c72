//! `loadgen bench`: the seed's benchmark in one command.
//!
//! It starts `mock-upstream` and `gateway` (found next to the loadgen
//! executable), and the peer gateways asked for; checks that each route runs
//! its middleware; warms each up; then runs the workload on every route in
//! alternated rounds and prints the seed's table with intervals, where the
//! time goes, and Tyk's numbers beside ours. The runs go through the same
//! driver as `loadgen URL`.
//!
//! # Layout
//! - [`runner`]: the sequence of phases (start, plan, check, warm up, measure, report).
//! - [`apis`]: routes from the user's API definitions.
//! - [`jobs`]: one route of one target: its check, run config and figures.
//! - [`peers`]: nginx and HAProxy started from `loadgen/peers/`.
//! - [`procs`]: child processes, always stopped; [`pin`]: `--cpus`.
//! - [`probe`]: single requests and the gateway's `/tyk/stats`.
//! - [`model`]: the report's data; [`stats`]: medians and intervals; [`stamp`]: provenance.
//! - [`tables`], [`design`], [`gateways`], [`render`], [`charts`]: the report as text, Markdown, JSON and SVG.
//!
//! Processes: children get their own process group, so a terminal Ctrl-C
//! reaches only loadgen, which stops the run and then its children (in
//! `Child::drop`, on every exit path).

pub mod apis;
pub mod charts;
pub mod design;
pub mod gateways;
pub mod jobs;
pub mod model;
pub mod peers;
pub mod pin;
pub mod probe;
pub mod procs;
pub mod render;
pub mod runner;
pub mod stamp;
pub mod stats;
pub mod tables;

use std::path::PathBuf;

use clap::Parser;
use tokio::sync::watch;

/// The error text of a bench stopped by Ctrl-C (exit status 130).
pub const INTERRUPTED_MSG: &str = "interrupted";

/// `loadgen bench` options.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "loadgen bench",
    bin_name = "loadgen bench",
    about = "The seed's benchmark: native plugin vs JS middleware through the gateway, beside Tyk's numbers",
    after_help = "Exit status: 0 when every requested route and peer was measured with no failed request; \
2 on a usage error (a flag or a value the bench cannot use, found before anything starts); \
1 otherwise, with one line per reason on stderr; 130 on Ctrl-C, 143 on SIGTERM. A route whose middleware file is missing \
(a plugin not built) is skipped with the reason; that fails the bench only when it was asked for by name \
with --routes. A peer that is not installed fails the bench only when asked for with --peer, not with --peers."
)]
pub struct BenchArgs {
    /// Requests per run.
    #[arg(short = 'n', long = "requests", default_value_t = 10_000)]
    pub requests: u64,
    /// Concurrency.
    #[arg(short = 'c', long = "concurrency", default_value_t = 10)]
    pub concurrency: usize,
    /// Reuse client connections (the seed's ab runs did not).
    #[arg(short = 'k', long)]
    pub keepalive: bool,
    /// Rounds: each runs every route once, in a rotated order; figures are
    /// the median run's, ratios have 95% intervals over the rounds.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Warm-up requests per route before measuring.
    #[arg(long, default_value_t = 500)]
    pub warmup: u64,
    /// Port for mock-upstream (0: any free port).
    #[arg(long, default_value_t = 8222)]
    pub upstream_port: u16,
    /// Port for the gateway (0: any free port).
    #[arg(long, default_value_t = 8091)]
    pub gateway_port: u16,
    /// Gateway worker threads (default: the gateway's, one per core); also peers' workers.
    #[arg(long)]
    pub gateway_threads: Option<usize>,
    /// mock-upstream runtime threads (default: its own, one per four cores).
    #[arg(long)]
    pub upstream_threads: Option<usize>,
    /// loadgen threads (default: one per core, at most -c).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Directory of API definitions: every active definition is a route.
    /// Relative middleware paths in them are resolved against the current
    /// directory (the repo root).
    #[arg(long, default_value = "apis")]
    pub apis: PathBuf,
    /// Measure only these routes (repeatable, comma-separated): keys
    /// (native, js, plain, upstream), API ids or listen paths. A route asked
    /// for here that cannot be measured fails the bench.
    #[arg(long, value_name = "ROUTE")]
    pub routes: Vec<String>,
    /// Start and measure a peer gateway in front of the same upstream:
    /// nginx (native, njs, LuaJIT) or haproxy (native, Lua), configured by
    /// loadgen/peers/ (repeatable).
    #[arg(long, value_name = "NAME")]
    pub peer: Vec<String>,
    /// Every peer that is installed (the others are listed as skipped).
    #[arg(long)]
    pub peers: bool,
    /// Pin processes to cores: `0-1` pins all; `loadgen=0`, `gateway=1`,
    /// `upstream=1`, `peer=1` pin one (repeatable).
    #[arg(long, value_name = "[WHO=]CPUS")]
    pub cpus: Vec<String>,
    /// Where the gateway and mock-upstream binaries are (default: loadgen's own directory).
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// Also measure another, already running gateway serving the seed's
    /// routes, e.g. `tyk=http://127.0.0.1:8080` (repeatable).
    #[arg(long = "compare", value_name = "NAME=BASE_URL")]
    pub compare: Vec<String>,
    /// Write the results as JSON (schema `loadgen.bench/2`,
    /// loadgen/schema/bench-report.schema.json); `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a Markdown report with both charts embedded (as FILE's
    /// `-headline.svg` and `-latency.svg` siblings).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the latency chart as SVG to FILE (and the headline chart beside it).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

impl BenchArgs {
    /// The checks of the flags that need nothing but the flags (and the
    /// machine's cores): a failure is a usage error, exit status 2.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.requests < self.concurrency as u64 || self.concurrency == 0 {
            anyhow::bail!(
                "-n {} must be at least -c {} (and -c at least 1)",
                self.requests,
                self.concurrency
            );
        }
        if self.repeat == 0 {
            anyhow::bail!("--repeat must be at least 1");
        }
        pin::Pinning::parse(&self.cpus)?;
        let mut names = Vec::new();
        for c in &self.compare {
            let (name, _, _) = runner::parse_compare(c)?;
            if names.contains(&name) {
                anyhow::bail!("--compare {c:?}: {name:?} is given twice; each gateway needs a name of its own");
            }
            names.push(name);
        }
        Ok(())
    }
}

/// Ctrl-C (SIGINT) or SIGTERM for the whole bench: one handler, installed
/// once by [`main`], awaited by every run's stop future and checked between
/// phases. The value is the signal's number, 0 until one comes.
pub struct Interrupt(watch::Receiver<i32>);

impl Interrupt {
    /// Installs the SIGINT and SIGTERM handlers (from then on neither kills
    /// loadgen outright, which would leave its private directory behind and
    /// stop its children in no order) and a thread that turns the first
    /// signal into this value.
    pub fn install() -> Interrupt {
        use tokio::signal::unix::{signal, SignalKind};
        let (tx, rx) = watch::channel(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let sigs = rt.as_ref().ok().map(|rt| {
            let _g = rt.enter();
            (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            )
        });
        if let (Ok(rt), Some((Ok(mut int), Ok(mut term)))) = (rt, sigs) {
            std::thread::spawn(move || {
                rt.block_on(async {
                    let (sig, name) = tokio::select! {
                        _ = int.recv() => (libc::SIGINT, "interrupted"),
                        _ = term.recv() => (libc::SIGTERM, "terminated"),
                    };
                    eprintln!("\nloadgen bench: {name}, stopping");
                    let _ = tx.send(sig);
                    // Keep the sender alive: receivers must not see a close.
                    std::future::pending::<()>().await;
                })
            });
        }
        Interrupt(rx)
    }

    /// Resolves on Ctrl-C or SIGTERM.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|v| *v != 0).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// An error once Ctrl-C was pressed (or SIGTERM came).
    pub fn check(&self) -> anyhow::Result<()> {
        if *self.0.borrow() != 0 {
            anyhow::bail!(INTERRUPTED_MSG);
        }
        Ok(())
    }

    /// The exit status for the signal that came, if one did: 128 + its
    /// number, as a shell reports it (130 for Ctrl-C, 143 for SIGTERM).
    pub fn exit_code(&self) -> Option<i32> {
        let sig = *self.0.borrow();
        (sig != 0).then_some(128 + sig)
    }
}

/// Runs the bench; returns the exit code (0 all measured without failed
/// requests, 1 otherwise, 130 on Ctrl-C, 143 on SIGTERM).
pub fn main(args: BenchArgs) -> i32 {
    let interrupt = Interrupt::install();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    // Usage errors exit 2, as clap's own do (an unknown flag, a value
    // that does not parse): every check of the flags alone is made here,
    // before anything starts, and so are those that read files: the
    // output paths, the `--apis` directory (the default `apis` is
    // relative: outside the repo root it is not there), and the names
    // `--routes` gives against it.
    let usage = args
        .check()
        .and_then(|()| render::check_outputs(&args))
        .and_then(|()| runner::check_definitions(&args));
    if let Err(e) = usage {
        eprintln!("loadgen bench: {e:#}");
        return 2;
    }
    let report = match runner::run(&args, &interrupt, command) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loadgen bench: {e:#}");
            // Children are already stopped (dropped on the way out).
            return interrupt.exit_code().unwrap_or(1);
        }
    };
    let stdout_json = args.json.as_deref() == Some("-");
    let mut code = 0;
    if !stdout_json {
        let mut out = std::io::stdout().lock();
        if let Err(e) = render::write_text(&report, &mut out) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                eprintln!("loadgen bench: cannot write the report: {e}");
            }
            code = 1;
        }
    }
    if let Err(e) = render::write_files(&report, &args) {
        eprintln!("loadgen bench: {e:#}");
        code = 1;
    }
    for p in &report.problems {
        eprintln!("loadgen bench: {p}");
        code = 1;
    }
    interrupt.exit_code().unwrap_or(code)
}
