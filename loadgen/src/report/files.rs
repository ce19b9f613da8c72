//! File outputs for other tools: ab's `-e` CSV and HdrHistogram's `.hgrm`.

use std::io::Write;

use crate::record::Hist;

/// ab `-e`: for each percentage 0..=100, the time (ms) within which that
/// share of requests was served.
pub fn write_percentiles_csv(h: &Hist, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "Percentage served,Time in ms")?;
    for p in 0..=100u32 {
        let us = match p {
            _ if h.is_empty() => 0,
            0 => h.min(),
            100 => h.max(),
            _ => h.value_at_percentile(f64::from(p)),
        };
        writeln!(out, "{p},{:.3}", us as f64 / 1000.0)?;
    }
    Ok(())
}

/// The percentile distribution in HdrHistogram's text format (values in
/// milliseconds, 5 ticks per half distance), which the HdrHistogram plotter
/// (hdrhistogram.github.io/HdrHistogram/plotFiles.html) reads.
pub fn write_hgrm(h: &Hist, out: &mut impl Write) -> std::io::Result<()> {
    const SCALE: f64 = 1000.0;
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let value = v.value_iterated_to() as f64 / SCALE;
            if q < 1.0 {
                writeln!(
                    out,
                    "{value:12.3} {q:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - q)
                )?;
            } else {
                writeln!(out, "{value:12.3} {q:2.12} {total:10}")?;
            }
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean() / SCALE, h.stdev() / SCALE, h.max() as f64 / SCALE)
    };
    writeln!(out, "#[Mean    = {mean:12.3}, StdDeviation   = {sd:12.3}]")?;
    writeln!(
        out,
        "#[Max     = {max:12.3}, Total count    = {:12}]",
        h.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        // HdrHistogram's sub-bucket count: 2 * 10^digits, rounded up to a power of two.
        (2.0 * 10f64.powi(i32::from(h.sigfig())))
            .log2()
            .ceil()
            .exp2() as u64
    )
}
