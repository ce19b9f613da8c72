//! `loadgen URL`: run the command line and write the outputs it asks for.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;

use crate::cli::{Args, CliError};
use crate::config::RunConfig;
use crate::driver::{self, RunResult};
use crate::report::{self, Summary};

/// Runs ab mode and returns the exit code: 0, 1 when the target is
/// unreachable or an output cannot be written, 2 on bad usage.
pub fn main(args: Args) -> i32 {
    let quiet = args.quiet;
    let outputs = Outputs {
        json: args.json.clone(),
        csv: args.percentiles_csv.clone(),
        hgrm: args.hgrm.clone(),
    };
    let cfg = match args.into_config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return e.exit_code();
        }
    };
    let json_stdout = outputs.json.as_deref() == Some("-");
    if !json_stdout {
        println!("Benchmarking {} (be patient)", cfg.target.host);
    }
    let show_progress = !quiet && std::io::stderr().is_terminal();
    let mut bar = Progress::new(cfg.mode.max_requests());
    let mut tick = |done: u64| bar.draw(done);
    let progress: Option<&mut dyn FnMut(u64)> = if show_progress { Some(&mut tick) } else { None };
    let res = match driver::run(&cfg, true, progress) {
        Ok(res) => res,
        Err(e) => {
            if show_progress {
                eprintln!();
            }
            eprintln!("loadgen: {e}");
            return 1;
        }
    };
    if show_progress {
        eprintln!();
    }
    match write_outputs(&cfg, &res, &outputs, json_stdout) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("loadgen: {e}");
            1
        }
    }
}

struct Outputs {
    json: Option<String>,
    csv: Option<std::path::PathBuf>,
    hgrm: Option<std::path::PathBuf>,
}

fn create(path: &Path, what: &str) -> Result<BufWriter<File>, CliError> {
    File::create(path).map(BufWriter::new).map_err(|e| {
        CliError::Unreachable(format!("cannot write {what} file {}: {e}", path.display()))
    })
}

fn write_outputs(
    cfg: &RunConfig,
    res: &RunResult,
    o: &Outputs,
    json_stdout: bool,
) -> Result<(), CliError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |e: std::io::Error| CliError::Unreachable(format!("cannot write {what}: {e}"))
    };
    let summary = Summary::new(cfg, res);
    let stdout = std::io::stdout();
    if !json_stdout {
        let mut out = stdout.lock();
        report::write_text(&summary, &mut out).map_err(io("report"))?;
        out.flush().map_err(io("report"))?;
    }
    if let Some(j) = &o.json {
        if j == "-" {
            let mut out = stdout.lock();
            summary.write_json(&mut out).map_err(io("JSON"))?;
        } else {
            let mut f = create(Path::new(j), "JSON")?;
            summary
                .write_json(&mut f)
                .and_then(|_| f.flush())
                .map_err(io(j))?;
        }
    }
    if let Some(p) = &o.csv {
        let mut f = create(p, "percentiles CSV")?;
        report::write_percentiles_csv(&res.rec.total, &mut f)
            .and_then(|_| f.flush())
            .map_err(io("percentiles CSV"))?;
    }
    if let Some(p) = &o.hgrm {
        let mut f = create(p, "hgrm")?;
        // With --rate the corrected distribution is the honest one to plot.
        let h = if cfg.rate.is_some() {
            &res.rec.corrected
        } else {
            &res.rec.total
        };
        report::write_hgrm(h, &mut f)
            .and_then(|_| f.flush())
            .map_err(io("hgrm"))?;
    }
    Ok(())
}

/// A one-line progress bar on stderr (drawn only when stderr is a terminal).
struct Progress {
    total: Option<u64>,
    start: std::time::Instant,
}

impl Progress {
    fn new(total: Option<u64>) -> Self {
        Progress {
            total,
            start: std::time::Instant::now(),
        }
    }

    fn draw(&mut self, done: u64) {
        let secs = self.start.elapsed().as_secs_f64();
        let line = match self.total {
            Some(t) if t > 0 => {
                let width = 40;
                let filled = ((done.min(t) * width) / t) as usize;
                format!(
                    "[{}{}] {done}/{t} ({:.1}s)",
                    "=".repeat(filled),
                    " ".repeat(width as usize - filled),
                    secs
                )
            }
            _ => format!("{done} requests ({secs:.1}s)"),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}");
        let _ = err.flush();
    }
}
