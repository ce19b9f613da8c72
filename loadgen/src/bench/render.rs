//! The bench's tables, rendered as aligned text or Markdown, and its files.

use std::io::Write;

use anyhow::Context;

use super::model::{BenchReport, RunFigures};
use super::BenchArgs;

/// The seed's published numbers (Tyk + otto, ab -n 10000 -c 10).
pub const SEED_OTTO: (f64, f64, f64, f64) = (14_247.0, 1_130.0, 2.32, 21.51);
/// Tyk's later numbers after moving the JSVM to goja (req/s).
pub const TYK_GOJA: (f64, f64) = (14_593.0, 14_061.0);

/// A titled table.
pub struct Table {
    /// Title.
    pub title: String,
    /// Column heads.
    pub head: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table.
    pub notes: Vec<String>,
}

fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let (sign, digits) = s.split_at(if s.starts_with('-') { 1 } else { 0 });
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

fn cell(f: Option<&RunFigures>, show: impl Fn(&RunFigures) -> Option<String>) -> String {
    f.and_then(show).unwrap_or_else(|| "n/a".into())
}

/// "native ~12.6x faster"-style comparison of `a` (native) and `b` (JS),
/// named after whichever wins, as the seed words it ("Go is ~12.6x faster").
fn ratio(a: Option<f64>, b: Option<f64>, better: &str, higher_is_better: bool) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => {
            let r = a / b;
            let native_wins = if higher_is_better { r >= 1.0 } else { r <= 1.0 };
            let k = if r >= 1.0 { r } else { 1.0 / r };
            let who = if native_wins { "native" } else { "JS" };
            format!("{who} ~{k:.2}x {better}")
        }
        _ => "n/a".into(),
    }
}

/// The report's tables, in print order.
pub fn tables(r: &BenchReport) -> Vec<Table> {
    let (nat, js) = (r.get("ours", "native"), r.get("ours", "js"));
    let (plain, up) = (r.get("ours", "plain"), r.get("ours", "upstream"));
    let row = |name: &str, f: &dyn Fn(&RunFigures) -> Option<String>, diff: String| {
        let mut v = vec![name.to_string(), cell(nat, f), cell(js, f), diff];
        v.extend([cell(plain, f), cell(up, f)]);
        v
    };
    let mut seed = Table {
        title: "1. The seed's table, our numbers (medians)".into(),
        head: ["Metric", "native plugin", "JS (VM)", "Difference", "no middleware", "upstream direct"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            row("Requests/sec", &|f| Some(thousands(f.rps)), ratio(nat.map(|f| f.rps), js.map(|f| f.rps), "faster", true)),
            row(
                "Mean latency",
                &|f| Some(format!("{:.3} ms", f.mean_latency_ms)),
                ratio(nat.map(|f| f.mean_latency_ms), js.map(|f| f.mean_latency_ms), "lower", false),
            ),
            row("Wall time", &|f| Some(format!("{:.2} s", f.wall_s)), String::new()),
            row(
                "CPU time consumed",
                &|f| f.server_cpu_s.map(|c| format!("{c:.2} s")),
                ratio(nat.and_then(|f| f.server_cpu_s), js.and_then(|f| f.server_cpu_s), "less CPU", false),
            ),
            row("CPU utilization", &|f| f.server_cpu_util.map(|u| format!("{:.0}%", u * 100.0)), String::new()),
            row("Failed requests", &|f| Some(f.failed.to_string()), String::new()),
        ],
        notes: vec![
            "CPU is the gateway process's (user+sys) over the run; for \"upstream direct\" it is mock-upstream's.".into(),
        ],
    };
    for rr in r.routes.iter().filter(|rr| rr.target == "ours") {
        if let Some(why) = &rr.skipped {
            seed.notes.push(format!(
                "{} ({}) was not measured: {why}",
                rr.route.label, rr.route.path
            ));
        }
    }

    let mut time = Table {
        title: "2. Where the time goes (medians)".into(),
        head: ["Route", "middleware p50", "middleware p99", "calls/request", "gateway CPU/request", "all CPU/request", "latency p50", "latency p99"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
        notes: vec![
            "middleware = time inside the middleware call, from the gateway's own histograms (GET /tyk/stats);".into(),
            "CPU/request above the no-middleware route's is what the middleware costs in all (call + marshalling);".into(),
            "all = gateway + upstream + loadgen: where they share the cores and keep them busy, throughput follows it.".into(),
        ],
    };
    for rr in r.routes.iter().filter(|rr| rr.target == "ours") {
        let f = rr.median.as_ref();
        time.rows.push(vec![
            format!("{} {}", rr.route.label, rr.route.path),
            cell(f, |f| f.mw_p50_us.map(|v| format!("{v:.2} µs"))),
            cell(f, |f| f.mw_p99_us.map(|v| format!("{v:.2} µs"))),
            cell(f, |f| f.mw_calls_per_req.map(|v| format!("{v:.2}"))),
            cell(f, |f| f.server_cpu_us_per_req.map(|v| format!("{v:.1} µs"))),
            cell(f, |f| f.all_cpu_us_per_req.map(|v| format!("{v:.1} µs"))),
            cell(f, |f| Some(format!("{:.3} ms", f.p50_ms))),
            cell(f, |f| Some(format!("{:.3} ms", f.p99_ms))),
        ]);
    }

    let x = |a: f64, b: f64| format!("{:.2}x", a / b);
    let mut tyk = Table {
        title: "3. Tyk beside us (absolute numbers depend on the machine; ratios compare)".into(),
        head: [
            "Gateway",
            "native req/s",
            "JS req/s",
            "throughput ratio",
            "native CPU",
            "JS CPU",
            "CPU ratio",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![
            vec![
                "Tyk + otto (seed: Go plugin vs JSVM)".into(),
                thousands(SEED_OTTO.0),
                thousands(SEED_OTTO.1),
                x(SEED_OTTO.0, SEED_OTTO.1),
                format!("{:.2} s", SEED_OTTO.2),
                format!("{:.2} s", SEED_OTTO.3),
                x(SEED_OTTO.3, SEED_OTTO.2),
            ],
            vec![
                "Tyk + goja (later Tyk)".into(),
                thousands(TYK_GOJA.0),
                thousands(TYK_GOJA.1),
                x(TYK_GOJA.0, TYK_GOJA.1),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
        ],
        notes: vec![
            "throughput ratio = native req/s / JS req/s; CPU ratio = JS CPU / native CPU.".into(),
        ],
    };
    for t in r.targets() {
        let (n, j) = (r.get(&t, "native"), r.get(&t, "js"));
        let name = if t == "ours" {
            "this gateway (this machine)".to_string()
        } else {
            format!("{t} (this machine)")
        };
        let both = |g: &dyn Fn(&RunFigures) -> Option<f64>| match (n.and_then(g), j.and_then(g)) {
            (Some(a), Some(b)) if b > 0.0 && a > 0.0 => Some((a, b)),
            _ => None,
        };
        tyk.rows.push(vec![
            name,
            cell(n, |f| Some(thousands(f.rps))),
            cell(j, |f| Some(thousands(f.rps))),
            both(&|f| Some(f.rps)).map_or("n/a".into(), |(a, b)| x(a, b)),
            cell(n, |f| f.server_cpu_s.map(|c| format!("{c:.2} s"))),
            cell(j, |f| f.server_cpu_s.map(|c| format!("{c:.2} s"))),
            both(&|f| f.server_cpu_s).map_or("n/a".into(), |(a, b)| x(b, a)),
        ]);
    }
    if let (Some(n), Some(j)) = (nat, js) {
        tyk.notes.extend(ratio_explained(n, j, r.cores));
    }
    let mut out = vec![seed, time, tyk];

    if r.targets().len() > 1 {
        let mut cmp = Table {
            title: "4. Every target and route (medians)".into(),
            head: [
                "Target",
                "Route",
                "req/s",
                "mean latency",
                "p50",
                "p99",
                "failed",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
            notes: Vec::new(),
        };
        for rr in &r.routes {
            let f = rr.median.as_ref();
            cmp.rows.push(vec![
                rr.target.clone(),
                format!("{} {}", rr.route.label, rr.route.path),
                cell(f, |f| Some(thousands(f.rps))),
                cell(f, |f| Some(format!("{:.3} ms", f.mean_latency_ms))),
                cell(f, |f| Some(format!("{:.3} ms", f.p50_ms))),
                cell(f, |f| Some(format!("{:.3} ms", f.p99_ms))),
                cell(f, |f| Some(f.failed.to_string())),
            ]);
            if let Some(why) = &rr.skipped {
                cmp.notes
                    .push(format!("{} {}: {why}", rr.target, rr.route.path));
            }
        }
        out.push(cmp);
    }
    out
}

/// Why this gateway's throughput ratio is what it is: on a machine whose
/// cores the load generator, gateway and upstream share and keep busy,
/// throughput follows the CPU all of them spend per request, so the ratio is
/// the JS route's total over the native route's. Empty when a figure is
/// missing.
fn ratio_explained(nat: &RunFigures, js: &RunFigures, cores: usize) -> Vec<String> {
    let (Some(gn), Some(gj), Some(an), Some(aj)) = (
        nat.server_cpu_us_per_req,
        js.server_cpu_us_per_req,
        nat.all_cpu_us_per_req,
        js.all_cpu_us_per_req,
    ) else {
        return Vec::new();
    };
    if an <= 0.0 || aj <= 0.0 || js.rps <= 0.0 {
        return Vec::new();
    }
    // Share of the cores all processes kept busy on the native route.
    let busy = an * nat.rps / 1e6 / cores.max(1) as f64;
    vec![
        format!(
            "this gateway: JS adds {:.1} µs of gateway CPU per request, {:.1} µs across all processes \
             (which kept {:.0}% of the {cores} cores busy).",
            gj - gn,
            aj - an,
            busy * 100.0
        ),
        format!(
            "Throughput follows total CPU per request: {an:.1} vs {aj:.1} µs predicts {:.2}x, measured {:.2}x; \
             each µs costs ~{:.1}% of throughput here, and Tyk + goja's {:.2}x would allow ~{:.1} µs.",
            aj / an,
            nat.rps / js.rps,
            100.0 / an,
            TYK_GOJA.0 / TYK_GOJA.1,
            (TYK_GOJA.0 / TYK_GOJA.1 - 1.0) * an
        ),
    ]
}

fn preamble(r: &BenchReport) -> String {
    format!(
        "loadgen bench: {} requests per run, concurrency {}, {}, {} run(s) per route alternated, {} cores",
        r.requests,
        r.concurrency,
        if r.keepalive { "keep-alive" } else { "no keep-alive (new connection per request, as ab)" },
        r.repeat,
        r.cores
    )
}

/// Aligned text tables.
pub fn write_text(r: &BenchReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", preamble(r))?;
    for t in tables(r) {
        let widths: Vec<usize> = (0..t.head.len())
            .map(|i| {
                std::iter::once(&t.head[i])
                    .chain(t.rows.iter().map(|row| &row[i]))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
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

/// Markdown: the same tables, ready to paste into an issue.
pub fn write_markdown(r: &BenchReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "# loadgen bench\n\n{}\n\nCommand: `{}`",
        preamble(r),
        r.command
    )?;
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
    Ok(())
}

/// Writes `--json`, `--markdown` and `--svg`.
pub fn write_files(r: &BenchReport, args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(j) = &args.json {
        if j == "-" {
            serde_json::to_writer_pretty(std::io::stdout().lock(), r)?;
            println!();
        } else {
            std::fs::write(j, serde_json::to_string_pretty(r)?)
                .with_context(|| format!("cannot write {j}"))?;
        }
    }
    if let Some(p) = &args.markdown {
        let mut buf = Vec::new();
        write_markdown(r, &mut buf)?;
        std::fs::write(p, buf).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &args.svg {
        std::fs::write(p, super::svg::render(r))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{ratio, ratio_explained};
    use crate::bench::model::RunFigures;

    #[test]
    fn differences_are_named_after_the_winner_in_the_seeds_words() {
        assert_eq!(
            ratio(Some(14247.0), Some(1130.0), "faster", true),
            "native ~12.61x faster"
        );
        assert_eq!(
            ratio(Some(0.70), Some(8.85), "lower", false),
            "native ~12.64x lower"
        );
        assert_eq!(
            ratio(Some(21.51), Some(2.32), "less CPU", false),
            "JS ~9.27x less CPU"
        );
        assert_eq!(ratio(None, Some(1.0), "faster", true), "n/a");
    }

    #[test]
    fn the_ratio_is_explained_by_total_cpu_per_request() {
        let fig = |rps: f64, gateway: f64, all: f64| RunFigures {
            rps,
            server_cpu_us_per_req: Some(gateway),
            all_cpu_us_per_req: Some(all),
            ..RunFigures::default()
        };
        let (nat, js) = (fig(20_000.0, 50.0, 100.0), fig(18_000.0, 60.0, 112.0));
        let text = ratio_explained(&nat, &js, 2).join("\n");
        for needle in [
            "JS adds 10.0 µs of gateway CPU per request, 12.0 µs across all processes",
            "kept 100% of the 2 cores busy",
            "100.0 vs 112.0 µs predicts 1.12x, measured 1.11x",
            "each µs costs ~1.0% of throughput",
            "1.04x would allow ~3.8 µs",
        ] {
            assert!(text.contains(needle), "{needle:?} missing:\n{text}");
        }
        // A figure the run could not read: no explanation rather than a wrong one.
        let unknown = RunFigures {
            all_cpu_us_per_req: None,
            ..js.clone()
        };
        assert!(ratio_explained(&nat, &unknown, 2).is_empty());
    }
}
