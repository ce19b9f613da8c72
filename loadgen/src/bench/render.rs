//! The report printed: aligned text, Markdown (charts embedded), JSON and
//! the SVG charts, each to any `impl Write` or its file.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::model::BenchReport;
use super::tables::{tables, Table};
use super::BenchArgs;

/// What was run, and on what: the first lines of every report.
pub fn preamble(r: &BenchReport) -> Vec<String> {
    let pinned = r
        .loadgen_cpus
        .as_ref()
        .map(|c| format!("; loadgen pinned to cores {c:?}"))
        .unwrap_or_default();
    let mut lines = vec![
        format!(
            "loadgen bench: {} requests per run, concurrency {}, {}, {} alternated round(s), {} cores{pinned}",
            r.requests,
            r.concurrency,
            if r.keepalive { "keep-alive" } else { "no keep-alive (new connection per request, as ab)" },
            r.repeat,
            r.stamps.cores
        ),
        r.stamps.line(),
        format!("command: {}", r.stamps.command),
    ];
    if let Some(why) = &r.stopped {
        lines.push(format!("INCOMPLETE: {why}"));
    }
    // Every reason the exit status is not 0, in the report itself: a
    // route whose requests failed has figures that count the failures as
    // served, and a report pasted into an issue has no stderr beside it.
    for p in r.problems.iter().filter(|p| Some(*p) != r.stopped.as_ref()) {
        lines.push(format!("problem: {p}"));
    }
    for p in r.processes.iter().filter(|p| p.cpus.is_some()) {
        lines.push(format!(
            "{} (pid {}) pinned to cores {:?}",
            p.name,
            p.pid,
            p.cpus.as_ref().unwrap()
        ));
    }
    lines
}

fn widths(t: &Table) -> Vec<usize> {
    (0..t.head.len())
        .map(|i| {
            std::iter::once(&t.head[i])
                .chain(t.rows.iter().map(|row| &row[i]))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Aligned text tables.
pub fn write_text(r: &BenchReport, out: &mut impl Write) -> std::io::Result<()> {
    for l in preamble(r) {
        writeln!(out, "{l}")?;
    }
    for t in tables(r) {
        let widths = widths(&t);
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        writeln!(out, "\n{}\n", t.title)?;
        writeln!(out, "{}", line(&t.head))?;
        for row in &t.rows {
            writeln!(out, "{}", line(row))?;
        }
        for n in &t.notes {
            writeln!(out, "  {n}")?;
        }
    }
    Ok(())
}

/// Markdown: the same tables, ready to paste into an issue, with the two
/// charts (paths relative to the Markdown file) embedded when given.
pub fn write_markdown(
    r: &BenchReport,
    charts: Option<(&str, &str)>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(out, "# loadgen bench\n")?;
    for l in preamble(r) {
        writeln!(out, "- {l}")?;
    }
    if let Some((headline, _)) = charts {
        writeln!(
            out,
            "\n![CPU per request and requests per second by route]({headline})"
        )?;
    }
    for t in tables(r) {
        writeln!(out, "\n## {}\n", t.title)?;
        writeln!(out, "| {} |", t.head.join(" | "))?;
        writeln!(out, "|{}", "---|".repeat(t.head.len()))?;
        for row in &t.rows {
            writeln!(out, "| {} |", row.join(" | "))?;
        }
        if !t.notes.is_empty() {
            writeln!(out)?;
            for n in &t.notes {
                writeln!(out, "- {n}")?;
            }
        }
    }
    if let Some((_, latency)) = charts {
        writeln!(
            out,
            "\n## Latency by percentile\n\n![latency by percentile]({latency})"
        )?;
    }
    Ok(())
}

/// `dir/stem-suffix.svg` beside `file`.
fn sibling(file: &Path, suffix: &str) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    file.with_file_name(format!("{stem}-{suffix}.svg"))
}

/// Fails before any run when an output file cannot be created, so an hour
/// of measuring is never lost to a typo in a path.
pub fn check_outputs(args: &BenchArgs) -> anyhow::Result<()> {
    let json = args
        .json
        .as_deref()
        .filter(|j| *j != "-")
        .map(PathBuf::from);
    // The charts written beside `--markdown` and `--svg` too: a directory
    // or a read-only file in their place would fail only after the runs.
    let charts = |p: &PathBuf, kinds: &[&str]| -> Vec<PathBuf> {
        kinds.iter().map(|k| sibling(p, k)).collect()
    };
    let beside: Vec<PathBuf> = (args.markdown.iter())
        .flat_map(|p| charts(p, &["headline", "latency"]))
        .chain(args.svg.iter().flat_map(|p| charts(p, &["headline"])))
        .collect();
    for p in json
        .iter()
        .chain(&args.markdown)
        .chain(&args.svg)
        .chain(&beside)
    {
        let existed = p.exists();
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(p)
            .with_context(|| format!("cannot write {}", p.display()))?;
        if !existed {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}

/// Writes `--json`, `--markdown` (and its charts) and `--svg`.
pub fn write_files(r: &BenchReport, args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(j) = &args.json {
        if j == "-" {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, r)?;
            let _ = writeln!(out);
        } else {
            std::fs::write(j, serde_json::to_string_pretty(r)?)
                .with_context(|| format!("cannot write {j}"))?;
        }
    }
    let write = |p: &Path, text: String| {
        std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    if let Some(p) = &args.svg {
        write(p, super::charts::latency(r))?;
        write(&sibling(p, "headline"), super::charts::headline(r))?;
    }
    if let Some(p) = &args.markdown {
        let (h, l) = (sibling(p, "headline"), sibling(p, "latency"));
        write(&h, super::charts::headline(r))?;
        write(&l, super::charts::latency(r))?;
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let mut buf = Vec::new();
        write_markdown(r, Some((&name(&h), &name(&l))), &mut buf)?;
        std::fs::write(p, buf).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reasons_for_a_non_zero_exit_are_in_the_text_and_the_markdown() {
        let mut r: BenchReport = serde_json::from_value(serde_json::json!({
            "schema": "x", "requests": 1, "concurrency": 1, "keepalive": false, "repeat": 1,
            "stamps": {"version": "0", "date": "d", "cores": 2, "command": "c"},
            "processes": [], "peers": [], "routes": [], "comparisons": [], "problems": []
        }))
        .unwrap();
        let failed = "ours JS QuickJS /flaky/hello/: 1000 failed requests over 3 runs";
        r.problems = vec![failed.to_string()];
        let mut text = Vec::new();
        write_text(&r, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains(&format!("problem: {failed}")), "{text}");
        let mut md = Vec::new();
        write_markdown(&r, None, &mut md).unwrap();
        let md = String::from_utf8(md).unwrap();
        assert!(md.contains(&format!("- problem: {failed}")), "{md}");
        // A stopped run says so once, not twice.
        let stopped = "the measurements stopped in round 2 of 5: interrupted".to_string();
        r.problems.insert(0, stopped.clone());
        r.stopped = Some(stopped);
        let lines = preamble(&r).join("\n");
        assert_eq!(
            lines.matches("the measurements stopped").count(),
            1,
            "{lines}"
        );
    }
}
