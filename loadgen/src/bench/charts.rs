//! The bench's two charts, drawn with plotters' SVG backend.
//!
//! - The headline chart is the picture of the seed's table: per route (and
//!   peer) the CPU all processes spend per request and the requests per
//!   second, each bar the median run with a min-max whisker over the
//!   rounds; on the req/s panel, where the JS route would land with Tyk +
//!   otto's and Tyk + goja's native/JS ratios applied to our native route.
//! - The latency chart: each route's latency by percentile on HdrHistogram's
//!   x axis (log of 1/(1-p): 90%, 99%, 99.9% evenly spaced), ending where
//!   the data ends, on a log y axis so that the region below p99 (where
//!   native and JS differ) stays readable next to the tail.

use plotters::coord::combinators::{IntoLogRange, LogCoord};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::model::{BenchReport, RouteResult};
use super::tables::{SEED_OTTO, TYK_GOJA};

/// Colours by target: ours, then peers.
const TARGET_COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
];
/// Colours of the latency curves.
const CURVE_COLOURS: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(127, 127, 127),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(0, 0, 0),
    RGBColor(174, 199, 232),
];

/// How a route is named in charts, as in the tables.
pub fn legend(r: &RouteResult) -> String {
    if r.target == "ours" {
        r.route.title()
    } else {
        format!("{}: {}", r.target, r.route.title())
    }
}

fn measured(r: &BenchReport) -> Vec<&RouteResult> {
    r.routes.iter().filter(|rr| rr.median().is_some()).collect()
}

/// A bar's value with its min and max.
type Whisker = (f64, f64, f64);

/// One horizontal bar per route: value, min, max.
struct Bar {
    label: String,
    colour: RGBColor,
    value: f64,
    min: f64,
    max: f64,
}

/// A panel's chart: linear x (the value) by linear y (bar slots).
type PanelChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's drawing area.
type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// Draws one panel of horizontal bars with whiskers, and vertical markers.
fn bar_panel(
    area: &Area<'_>,
    title: &str,
    unit: &str,
    bars: &[Bar],
    markers: &[(f64, String)],
) -> Result<(), Box<dyn std::error::Error>> {
    let top = bars
        .iter()
        .map(|b| b.max)
        .chain(markers.iter().map(|m| m.0))
        .fold(1.0, f64::max)
        * 1.12;
    let n = bars.len().max(1) as f64;
    // Room above the bars for the markers' labels.
    let room = 0.6 * markers.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 17))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(300)
        .build_cartesian_2d(0.0..top, 0.0..n + room)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc(unit)
        .x_labels(8)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 12))
        .draw()?;
    draw_bars(area, &mut chart, bars, n)?;
    draw_markers(area, &mut chart, markers, n + room)
}

/// Texts are placed in the panel's own pixels; the chart maps to the whole
/// picture's.
fn local(area: &Area<'_>, (x, y): (i32, i32)) -> (i32, i32) {
    let base = area.get_base_pixel();
    (x - base.0, y - base.1)
}

/// The bars, top to bottom in table order, each with its whisker and its
/// label right-aligned in the y label area.
fn draw_bars(
    area: &Area<'_>,
    chart: &mut PanelChart<'_, '_>,
    bars: &[Bar],
    n: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    for (i, b) in bars.iter().enumerate() {
        let y = n - i as f64 - 0.5;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, y - 0.32), (b.value, y + 0.32)],
            b.colour.mix(0.75).filled(),
        )))?;
        chart.draw_series(std::iter::once(ErrorBar::new_horizontal(
            y,
            b.min,
            b.value,
            b.max,
            BLACK.stroke_width(1),
            8,
        )))?;
        let (px, py) = local(area, chart.backend_coord(&(0.0, y)));
        let font = ("sans-serif", 12).into_font().color(&BLACK);
        area.draw(&Text::new(
            b.label.clone(),
            (px - 6, py),
            font.pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// Dashed vertical markers (the first in red), their labels stacked above
/// the bars up to `top`.
fn draw_markers(
    area: &Area<'_>,
    chart: &mut PanelChart<'_, '_>,
    markers: &[(f64, String)],
    top: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    for (k, (x, label)) in markers.iter().enumerate() {
        let colour = if k == 0 {
            RGBColor(214, 39, 40)
        } else {
            RGBColor(90, 90, 90)
        };
        let label_y = top - 0.6 * (k as f64 + 0.5);
        chart.draw_series(DashedLineSeries::new(
            [(*x, 0.0), (*x, label_y)],
            6,
            4,
            colour.stroke_width(2),
        ))?;
        // The label sits at the line's top, above the bars.
        let (px, py) = local(area, chart.backend_coord(&(*x, label_y)));
        area.draw(&Text::new(
            label.clone(),
            (px + 4, py - 6),
            ("sans-serif", 12).into_font().color(&colour),
        ))?;
    }
    Ok(())
}

/// The headline chart as an SVG document.
pub fn headline(r: &BenchReport) -> String {
    let routes = measured(r);
    let targets = r.targets();
    let colour = |rr: &RouteResult| {
        let i = targets.iter().position(|t| *t == rr.target).unwrap_or(0);
        TARGET_COLOURS[i % TARGET_COLOURS.len()]
    };
    let bars = |f: &dyn Fn(&RouteResult) -> Option<Whisker>| -> Vec<Bar> {
        routes
            .iter()
            .filter_map(|rr| {
                f(rr).map(|(value, min, max)| Bar {
                    label: legend(rr),
                    colour: colour(rr),
                    value,
                    min,
                    max,
                })
            })
            .collect()
    };
    let cpu = bars(&|rr| {
        let v = rr.median()?.all_cpu_us_per_req?;
        let s = rr.spread.all_cpu_us_per_req?;
        Some((v, s.min, s.max))
    });
    let rps = bars(&|rr| {
        let s = rr.spread.rps?;
        Some((rr.median()?.rps, s.min, s.max))
    });
    let mut markers = Vec::new();
    if let Some(n) = r.get("ours", "native") {
        let otto = SEED_OTTO.0 / SEED_OTTO.1;
        let goja = TYK_GOJA.0 / TYK_GOJA.1;
        markers.push((
            n.rps / otto,
            format!("JS at Tyk + otto's ratio ({otto:.1}x)"),
        ));
        markers.push((
            n.rps / goja,
            format!("JS at Tyk + goja's ratio ({goja:.2}x)"),
        ));
    }
    let rows = cpu.len().max(rps.len()) as u32;
    let panel_h = 110 + 26 * rows;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 2 * panel_h + 30)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let root = root.titled(
            &format!(
                "Plugin vs VM: the median of {} rounds, whiskers min-max ({} requests per run, c={})",
                r.repeat,
                thousands_u(r.requests),
                r.concurrency
            ),
            ("sans-serif", 19),
        );
        if let Ok(root) = root {
            let (a, b) = root.split_vertically(panel_h);
            let _ = bar_panel(
                &a,
                "CPU per request, all processes (lower is better)",
                "µs per request",
                &cpu,
                &[],
            );
            let _ = bar_panel(
                &b,
                "Requests per second (higher is better)",
                "requests per second",
                &rps,
                &markers,
            );
            let _ = root.present();
        }
    }
    svg
}

/// x position of a percentile: log10(1/(1-p)).
fn xlog(percentile: f64) -> f64 {
    let p = (percentile / 100.0).min(1.0 - 1e-9);
    (1.0 / (1.0 - p)).log10()
}

/// "99.9%" for x = 3.
fn percent_label(x: f64) -> String {
    let p = 100.0 - 100.0 / 10f64.powf(x);
    let s = format!("{p:.6}");
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

/// Round numbers (1, 2, 5 per decade) between `lo` and `hi`.
fn round_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = decade * m;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

/// The latency chart's axes: where x ends, the y range, the title.
struct LatencyAxes {
    /// The last percentile each route can resolve is 1 - 1/count: the x axis
    /// ends at the furthest of those, where the data ends.
    x_end: f64,
    /// Latency range in ms, with a margin on either side.
    y: (f64, f64),
    title: String,
}

fn latency_axes(r: &BenchReport, curves: &[&RouteResult]) -> LatencyAxes {
    let counts: Vec<u64> = curves
        .iter()
        .map(|c| c.hist.as_ref().map_or(0, |h| h.len()))
        .collect();
    let total: u64 = counts.iter().sum();
    let x_end = counts
        .iter()
        .map(|&n| (n.max(10) as f64).log10())
        .fold(1.0, f64::max);
    let (lo, hi) = curves
        .iter()
        .flat_map(|c| c.curve.iter().map(|p| p.ms.max(0.001)))
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let y = if hi > 0.0 {
        (lo * 0.8, hi * 1.25)
    } else {
        (0.01, 1.0)
    };
    let title = format!(
        "Latency by percentile: {} routes, {} requests in all ({} per route: {} rounds x {}), c={}, {}",
        curves.len(),
        thousands_u(total),
        thousands_u(total / curves.len().max(1) as u64),
        r.repeat,
        thousands_u(r.requests),
        r.concurrency,
        if r.keepalive { "keep-alive" } else { "no keep-alive" }
    );
    LatencyAxes { x_end, y, title }
}

/// The latency chart as an SVG document.
pub fn latency(r: &BenchReport) -> String {
    let curves: Vec<&RouteResult> = r.routes.iter().filter(|rr| !rr.curve.is_empty()).collect();
    let LatencyAxes {
        x_end,
        y: (lo, hi),
        title,
    } = latency_axes(r, &curves);
    let points = |c: &RouteResult| -> Vec<(f64, f64)> {
        c.curve
            .iter()
            .map(|p| (xlog(p.percentile).min(x_end), p.ms.max(0.001)))
            .collect()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let built = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_end, (lo..hi).log_scale());
        if let Ok(mut chart) = built {
            // Ticks drawn by hand: plotters' log axis labels every 1..9 of
            // a decade; round 1-2-5 values read better.
            let _ = chart
                .configure_mesh()
                .disable_mesh()
                .x_labels(0)
                .y_labels(0)
                .x_label_formatter(&|_| String::new())
                .y_label_formatter(&|_| String::new())
                .x_desc("percentile (log scale of 1/(1-p))")
                .y_desc("latency (ms, log scale)")
                .label_style(("sans-serif", 12))
                .draw();
            draw_ticks(&root, &chart, x_end, (lo, hi));
            for (i, c) in curves.iter().enumerate() {
                let colour = CURVE_COLOURS[i % CURVE_COLOURS.len()];
                if let Ok(series) =
                    chart.draw_series(LineSeries::new(points(c), colour.stroke_width(2)))
                {
                    series.label(legend(c)).legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(3))
                    });
                }
            }
            let _ = chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 12))
                .draw();
        }
        let _ = root.present();
    }
    svg
}

/// The latency chart's grid and tick labels, at round values.
fn draw_ticks<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, LogCoord<f64>>>,
    x_end: f64,
    (lo, hi): (f64, f64),
) {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let grid = RGBColor(210, 210, 210);
    let font = ("sans-serif", 12).into_font().color(&BLACK);
    let line = |a: (f64, f64), b: (f64, f64)| {
        let (pa, pb) = (chart.backend_coord(&a), chart.backend_coord(&b));
        let _ = root.draw(&PathElement::new([pa, pb], grid));
    };
    for k in 0..=x_end.floor() as i32 {
        let x = f64::from(k);
        line((x, lo), (x, hi));
        let (px, py) = chart.backend_coord(&(x, lo));
        let style = font.clone().pos(Pos::new(HPos::Center, VPos::Top));
        let _ = root.draw(&Text::new(percent_label(x), (px, py + 6), style));
    }
    for y in round_ticks(lo, hi) {
        line((0.0, y), (x_end, y));
        let (px, py) = chart.backend_coord(&(0.0, y));
        let style = font.clone().pos(Pos::new(HPos::Right, VPos::Center));
        let _ = root.draw(&Text::new(format!("{y}"), (px - 6, py), style));
    }
}

fn thousands_u(n: u64) -> String {
    super::tables::thousands(n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_labels_and_round_ticks() {
        assert_eq!(percent_label(0.0), "0%");
        assert_eq!(percent_label(1.0), "90%");
        assert_eq!(percent_label(3.0), "99.9%");
        assert_eq!(round_ticks(0.3, 12.0), vec![0.5, 1.0, 2.0, 5.0, 10.0]);
    }
}
