//! Live progress on a terminal (rate, elapsed, failures), nothing otherwise.
//!
//! indicatif draws to stderr only when stderr is a terminal, so a run piped
//! into a file or a CI log stays quiet without a flag.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::driver::Progress;

/// One progress line for one run.
pub struct Bar(ProgressBar);

impl Bar {
    /// A bar counting to `total` requests (a spinner without a total);
    /// hidden when `quiet` or when stderr is not a terminal.
    pub fn new(total: Option<u64>, quiet: bool) -> Bar {
        Bar::with_prefix(total, quiet, "")
    }

    /// As [`Bar::new`], with a label in front (the bench's route and round).
    pub fn with_prefix(total: Option<u64>, quiet: bool, prefix: &str) -> Bar {
        let target = if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr_with_hz(10)
        };
        let (bar, template) = match total {
            Some(n) => (
                ProgressBar::with_draw_target(Some(n), target),
                "{prefix}[{bar:30}] {pos}/{len} {msg}",
            ),
            None => (
                ProgressBar::with_draw_target(None, target),
                "{prefix}{spinner} {pos} requests {msg}",
            ),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(prefix.to_string());
        Bar(bar)
    }

    /// Shows `p`: requests done, their rate, the elapsed time and failures.
    pub fn update(&self, p: Progress) {
        let secs = p.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            p.done as f64 / secs
        } else {
            0.0
        };
        self.0.set_position(p.done);
        self.0
            .set_message(format!("{rate:.0} req/s, {secs:.1} s, {} failed", p.failed));
    }

    /// Removes the line.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
