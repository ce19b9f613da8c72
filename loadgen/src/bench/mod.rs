//! `loadgen bench`: the seed's benchmark in one command.
//!
//! It starts `mock-upstream` and `gateway` (found next to the loadgen
//! executable), checks that each route runs its middleware, warms each up,
//! then runs the workload on every route, alternating routes and repeating,
//! and prints the seed's table, where the time goes, and Tyk's numbers beside
//! ours. The runs go through the same driver as `loadgen URL`.
//!
//! Processes: children get their own process group, so a terminal Ctrl-C
//! reaches only loadgen, which stops the run and then its children (in
//! `Child::drop`, on every exit path).

pub mod apis;
pub mod model;
pub mod probe;
pub mod procs;
pub mod render;
pub mod runner;
pub mod svg;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

/// Set by Ctrl-C: every wait and run of the bench checks it.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// `loadgen bench` options.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "loadgen bench",
    about = "The seed's benchmark: native plugin vs JS middleware through the gateway, beside Tyk's numbers"
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
    /// Runs per route; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Warm-up requests per route before measuring.
    #[arg(long, default_value_t = 500)]
    pub warmup: u64,
    /// Port for mock-upstream.
    #[arg(long, default_value_t = 8222)]
    pub upstream_port: u16,
    /// Port for the gateway.
    #[arg(long, default_value_t = 8091)]
    pub gateway_port: u16,
    /// Gateway worker threads (default: the gateway's, one per core).
    #[arg(long)]
    pub gateway_threads: Option<usize>,
    /// mock-upstream runtime threads (default: its own, one per core).
    #[arg(long)]
    pub upstream_threads: Option<usize>,
    /// loadgen threads (default: half the cores, at least 1, at most -c).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Directory of API definitions; relative middleware paths in them are
    /// resolved against the current directory (the repo root).
    #[arg(long, default_value = "apis")]
    pub apis: PathBuf,
    /// Where the gateway and mock-upstream binaries are (default: loadgen's own directory).
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// Also measure another gateway serving the seed's routes, e.g.
    /// `nginx=http://127.0.0.1:8093` (repeatable).
    #[arg(long = "compare", value_name = "NAME=BASE_URL")]
    pub compare: Vec<String>,
    /// Write the results as JSON (schema `loadgen.bench/1`); `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a Markdown report (tables a user can paste into an issue).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write latency percentile curves of every route as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Runs the bench; returns the exit code (0 all measured without failed
/// requests, 1 otherwise).
pub fn main(args: BenchArgs) -> i32 {
    watch_ctrl_c();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = match runner::run(&args, command) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loadgen bench: {e:#}");
            // Children are already stopped (dropped on the way out).
            return if INTERRUPTED.load(Ordering::SeqCst) {
                130
            } else {
                1
            };
        }
    };
    let stdout_json = args.json.as_deref() == Some("-");
    let mut code = 0;
    if !stdout_json {
        let mut out = std::io::stdout().lock();
        if let Err(e) = render::write_text(&report, &mut out) {
            eprintln!("loadgen bench: cannot write the report: {e}");
            code = 1;
        }
    }
    if let Err(e) = render::write_files(&report, &args) {
        eprintln!("loadgen bench: {e:#}");
        code = 1;
    }
    let failed: u64 = report
        .routes
        .iter()
        .filter_map(|r| r.median.as_ref())
        .map(|m| m.failed)
        .sum();
    if failed > 0 {
        eprintln!("loadgen bench: {failed} failed requests (see the table)");
        code = 1;
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        code = 130;
    }
    code
}

/// A thread that turns SIGINT into [`INTERRUPTED`], so that the bench can
/// stop its children and print what it measured instead of dying.
fn watch_ctrl_c() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let sig = {
        let _g = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    };
    let Ok(mut sig) = sig else { return };
    std::thread::spawn(move || {
        rt.block_on(async {
            sig.recv().await;
            eprintln!("\nloadgen bench: interrupted, stopping");
            INTERRUPTED.store(true, Ordering::SeqCst);
        })
    });
}
