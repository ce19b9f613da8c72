//! What a report needs so that a reader can tell where its numbers come
//! from: loadgen's version, the repo's commit, the date, the machine and the
//! exact command line.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The stamps printed at the top of every report (text, JSON, Markdown).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stamps {
    /// loadgen's version.
    pub version: String,
    /// `git rev-parse --short HEAD` of the directory the bench ran in, when known.
    pub git_commit: Option<String>,
    /// When the bench started, RFC 3339 UTC.
    pub date: String,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Cores loadgen may run on.
    pub cores: usize,
    /// Kernel release (/proc/sys/kernel/osrelease).
    pub kernel: Option<String>,
    /// The exact command line.
    pub command: String,
}

impl Stamps {
    /// Reads the stamps now, for a bench run from `root`.
    pub fn collect(root: &Path, command: String) -> Stamps {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let git_commit = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(root)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty());
        Stamps {
            version: env!("CARGO_PKG_VERSION").into(),
            git_commit,
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string()),
            command,
        }
    }

    /// One line: "loadgen 0.1.0 (commit abc), 2026-12-01T09:00:00Z, AMD EPYC x 2 cores, Linux 6.1".
    pub fn line(&self) -> String {
        format!(
            "loadgen {}{}, {}, {} x {} cores, Linux {}",
            self.version,
            self.git_commit
                .as_ref()
                .map(|c| format!(" (commit {c})"))
                .unwrap_or_default(),
            self.date,
            self.cpu_model.as_deref().unwrap_or("unknown CPU"),
            self.cores,
            self.kernel.as_deref().unwrap_or("unknown"),
        )
    }
}
