//! Latency percentile curves of every route on one SVG chart, with
//! HdrHistogram's x axis: log scale of 1/(1-percentile), so 90%, 99%,
//! 99.9% ... are evenly spaced and the tail is visible.

use std::fmt::Write;

use super::model::BenchReport;

const W: f64 = 900.0;
const H: f64 = 500.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#7f7f7f", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
];

/// x position of a percentile: log10(1/(1-p)), capped at 99.999%.
fn xlog(percentile: f64) -> f64 {
    let p = (percentile / 100.0).min(0.99999);
    (1.0 / (1.0 - p)).log10()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart as an SVG document.
pub fn render(r: &BenchReport) -> String {
    let curves: Vec<_> = r.routes.iter().filter(|rr| !rr.curve.is_empty()).collect();
    let x_max = curves
        .iter()
        .flat_map(|c| c.curve.iter().map(|p| xlog(p.0)))
        .fold(2.0f64, f64::max)
        .ceil();
    let y_max = curves
        .iter()
        .flat_map(|c| c.curve.iter().map(|p| p.1))
        .fold(0.001f64, f64::max)
        * 1.05;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |x: f64| LEFT + x / x_max * pw;
    let py = |y: f64| TOP + ph - y / y_max * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15">Latency by percentile ({} requests, c={}, {})</text>"#,
        r.requests,
        r.concurrency,
        if r.keepalive {
            "keep-alive"
        } else {
            "no keep-alive"
        }
    );
    // Axes, grid and ticks.
    let _ = writeln!(s, r##"<g stroke="#ccc">"##);
    for k in 0..=(x_max as u32) {
        let x = px(f64::from(k));
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}"/>"#,
            TOP + ph
        );
    }
    for k in 0..=5 {
        let y = py(y_max * f64::from(k) / 5.0);
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/>"#,
            LEFT + pw
        );
    }
    let _ = writeln!(s, "</g>");
    for k in 0..=(x_max as u32) {
        let label = 100.0 - 100.0 / 10f64.powi(k as i32);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}%</text>"#,
            px(f64::from(k)),
            TOP + ph + 18.0,
            label
        );
    }
    for k in 0..=5 {
        let v = y_max * f64::from(k) / 5.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{v:.2}</text>"#,
            LEFT - 6.0,
            py(v) + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        LEFT + pw / 2.0,
        H - 10.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">latency (ms)</text>"#,
        TOP + ph / 2.0
    );
    // One polyline per route, with its legend entry.
    for (i, c) in curves.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<String> = c
            .curve
            .iter()
            .map(|&(p, ms)| format!("{:.1},{:.1}", px(xlog(p)), py(ms)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let lx = LEFT + pw + 15.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="3"/>"#,
            lx + 20.0
        );
        let name = if c.target == "ours" {
            c.route.path.clone()
        } else {
            format!("{} {}", c.target, c.route.path)
        };
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 26.0,
            ly + 4.0,
            esc(&name)
        );
    }
    s.push_str("</svg>\n");
    s
}
