//! `loadgen URL`: run the command line and write the outputs it asks for.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::cli::{Args, CliError};
use crate::config::RunConfig;
use crate::driver::{self, RunResult};
use crate::report::{self, Summary};

/// Runs ab mode and returns the exit code: 0, 1 when the target is
/// unreachable or an output cannot be written, 2 on bad usage, 130 when
/// Ctrl-C stopped the run (after the report of what was done).
pub fn main(args: Args) -> i32 {
    let quiet = args.quiet;
    let outputs = Outputs {
        text: report::TextOptions {
            no_percentiles: args.no_percentiles,
            no_median_sd: args.no_median_sd,
        },
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
    // Checked before the run: an hour of load is never lost to a typo.
    if let Err(e) = outputs.check().and_then(|_| check_pids(&cfg.cpu_pids)) {
        eprintln!("loadgen: {e}");
        return 1;
    }
    let json_stdout = outputs.json.as_deref() == Some("-");
    if !json_stdout {
        // A closed stdout is found (and handled) when the report is written.
        let _ = writeln!(
            std::io::stdout(),
            "Benchmarking {} (be patient)",
            cfg.target.host
        );
        if let Some(info) = crate::verbose::request_info(cfg.verbosity, &cfg.request) {
            let _ = write!(std::io::stdout(), "{info}");
        }
    }
    let bar = crate::progress::Bar::new(cfg.mode.max_requests(), quiet);
    let mut tick = |p: driver::Progress| bar.update(p);
    // ab mode is stopped by Ctrl-C; the driver arms it before the first request.
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let res = match driver::run(&cfg, ctrl_c, Some(&mut tick)) {
        Ok(res) => res,
        Err(e) => {
            bar.finish();
            eprintln!("loadgen: {e}");
            return 1;
        }
    };
    bar.finish();
    match write_outputs(&cfg, &res, &outputs, json_stdout) {
        Ok(()) if res.interrupted => 130,
        Ok(()) => 0,
        // `loadgen ... | head`: the reader left; nothing more to say.
        Err(CliError::BrokenPipe) => 0,
        Err(e) => {
            eprintln!("loadgen: {e}");
            1
        }
    }
}

/// Every `--cpu-pid` must be a process whose CPU clock can be read.
fn check_pids(pids: &[u32]) -> Result<(), CliError> {
    for &pid in pids {
        crate::cpu::process_cpu(pid).map_err(|e| {
            CliError::Unreachable(format!("--cpu-pid {pid}: cannot read its CPU time: {e}"))
        })?;
    }
    Ok(())
}

impl Outputs {
    /// Creates (and removes again, if new) every output file, so that an
    /// unwritable path fails before the run.
    fn check(&self) -> Result<(), CliError> {
        let json = self
            .json
            .as_deref()
            .filter(|j| *j != "-")
            .map(std::path::PathBuf::from);
        for p in json.iter().chain(&self.csv).chain(&self.hgrm) {
            let existed = p.exists();
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(p)
                .map_err(|e| CliError::Unreachable(format!("cannot write {}: {e}", p.display())))?;
            if !existed {
                let _ = std::fs::remove_file(p);
            }
        }
        Ok(())
    }
}

struct Outputs {
    /// ab's display flags for the text report.
    text: report::TextOptions,
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
        move |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::BrokenPipe => CliError::BrokenPipe,
            _ => CliError::Unreachable(format!("cannot write {what}: {e}")),
        }
    };
    let summary = Summary::new(cfg, res);
    let stdout = std::io::stdout();
    if !json_stdout {
        let mut out = stdout.lock();
        report::write_text_with(&summary, o.text, &mut out).map_err(io("report"))?;
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
