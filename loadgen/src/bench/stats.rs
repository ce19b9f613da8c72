//! The statistics behind the bench's claims: medians, spreads, and 95%
//! confidence intervals for ratios between routes.
//!
//! # Which interval, and why
//! Routes are measured in alternated rounds (round k runs every route once,
//! in a rotated order), so run k of route A and run k of route B share
//! whatever the machine was doing during round k: a busy neighbour slows
//! both. The interval is therefore *paired*: for each round the ratio
//! `a_k / b_k` is taken, and a Student-t interval is computed on the logs of
//! those ratios (`exp(mean ± t(0.975, n-1) · sd / √n)`). Logs make the
//! interval symmetric in "A faster" and "B faster" and turn the point
//! estimate into the geometric mean of the per-round ratios. With the
//! default 5 rounds a bootstrap would only resample five values and give
//! intervals too narrow to trust; the t interval widens honestly with few
//! rounds. One round gives a ratio and no interval.

use serde::{Deserialize, Serialize};

/// The median of `v` (mean of the middle two for an even count; 0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Index of the median element of `v` by value (the lower middle one for an
/// even count), so that a whole run, not a mix of runs, can be reported.
pub fn median_index(v: &[f64]) -> Option<usize> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    idx.get(v.len().saturating_sub(1) / 2).copied()
}

/// Smallest and largest value over the rounds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `v`, or `None` when it is empty.
    pub fn of(v: &[f64]) -> Option<Spread> {
        let min = v.iter().copied().reduce(f64::min)?;
        let max = v.iter().copied().reduce(f64::max)?;
        Some(Spread { min, max })
    }
}

/// A ratio between two routes over paired rounds, with its 95% interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct RatioCi {
    /// Geometric mean of the per-round ratios.
    pub ratio: f64,
    /// Lower end of the 95% confidence interval (`None` with one round).
    pub low: Option<f64>,
    /// Upper end of the 95% confidence interval.
    pub high: Option<f64>,
    /// Rounds the ratio is computed from.
    pub rounds: usize,
}

impl RatioCi {
    /// Whether the interval excludes 1 (no interval: not significant).
    pub fn significant(&self) -> bool {
        matches!((self.low, self.high), (Some(l), Some(h)) if l > 1.0 || h < 1.0)
    }
}

/// Two-sided 95% Student-t quantiles for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

fn t975(df: usize) -> f64 {
    T975.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// The paired ratio `a / b` over rounds where both have a positive value
/// (pairs are matched by index: round k with round k).
pub fn paired_ratio(a: &[Option<f64>], b: &[Option<f64>]) -> Option<RatioCi> {
    let logs: Vec<f64> = a
        .iter()
        .zip(b)
        .filter_map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) if *x > 0.0 && *y > 0.0 => Some((x / y).ln()),
            _ => None,
        })
        .collect();
    let (mean, half) = t_interval(&logs)?;
    Some(RatioCi {
        ratio: mean.exp(),
        low: half.map(|h| (mean - h).exp()),
        high: half.map(|h| (mean + h).exp()),
        rounds: logs.len(),
    })
}

/// A difference between two routes over paired rounds, with its 95% interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct DiffCi {
    /// Mean of the per-round differences.
    pub diff: f64,
    /// Lower end of the 95% confidence interval (`None` with one round).
    pub low: Option<f64>,
    /// Upper end of the 95% confidence interval.
    pub high: Option<f64>,
    /// Rounds the difference is computed from.
    pub rounds: usize,
}

impl DiffCi {
    /// Whether the interval excludes 0 (no interval: not significant).
    pub fn significant(&self) -> bool {
        matches!((self.low, self.high), (Some(l), Some(h)) if l > 0.0 || h < 0.0)
    }
}

/// Mean and the half-width of its 95% t interval (`None` for one value).
fn t_interval(v: &[f64]) -> Option<(f64, Option<f64>)> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some((mean, None));
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, Some(t975(n - 1) * (var / n as f64).sqrt())))
}

/// The paired difference `a - b` over rounds where both have a value
/// (pairs are matched by index: round k with round k).
pub fn paired_difference(a: &[Option<f64>], b: &[Option<f64>]) -> Option<DiffCi> {
    let diffs: Vec<f64> = a
        .iter()
        .zip(b)
        .filter_map(|(x, y)| Some((*x)? - (*y)?))
        .filter(|d| d.is_finite())
        .collect();
    let (diff, half) = t_interval(&diffs)?;
    Some(DiffCi {
        diff,
        low: half.map(|h| diff - h),
        high: half.map(|h| diff + h),
        rounds: diffs.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![f64::INFINITY, 1.0, 0.5]), 1.0);
    }

    #[test]
    fn median_index_picks_a_real_run() {
        assert_eq!(median_index(&[30.0, 10.0, 20.0]), Some(2));
        // Even count: the lower middle, never an average of two runs.
        assert_eq!(median_index(&[40.0, 10.0, 30.0, 20.0]), Some(3));
        assert_eq!(median_index(&[]), None);
    }

    #[test]
    fn spread_is_min_and_max() {
        assert_eq!(
            Spread::of(&[2.0, 5.0, 1.0]),
            Some(Spread { min: 1.0, max: 5.0 })
        );
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn identical_rounds_give_a_zero_width_interval() {
        let a = [Some(110.0); 5];
        let b = [Some(100.0); 5];
        let r = paired_ratio(&a, &b).unwrap();
        assert!((r.ratio - 1.1).abs() < 1e-12);
        assert!((r.low.unwrap() - 1.1).abs() < 1e-12 && (r.high.unwrap() - 1.1).abs() < 1e-12);
        assert!(r.significant());
    }

    #[test]
    fn the_interval_matches_a_hand_computed_t_interval() {
        // log ratios ln(1.1), ln(1.2), ln(1.0): mean m, sd s, t(0.975, 2) = 4.303.
        let a = [Some(1.1), Some(1.2), Some(1.0)];
        let b = [Some(1.0); 3];
        let r = paired_ratio(&a, &b).unwrap();
        let logs = [1.1f64.ln(), 1.2f64.ln(), 0.0];
        let m = logs.iter().sum::<f64>() / 3.0;
        let s = (logs.iter().map(|l| (l - m).powi(2)).sum::<f64>() / 2.0).sqrt();
        let half = 4.303 * s / 3f64.sqrt();
        assert!((r.ratio - m.exp()).abs() < 1e-12);
        assert!((r.low.unwrap() - (m - half).exp()).abs() < 1e-12);
        assert!((r.high.unwrap() - (m + half).exp()).abs() < 1e-12);
        // Wide enough to contain 1: no significant difference.
        assert!(!r.significant());
    }

    #[test]
    fn rounds_missing_a_value_are_left_out_and_one_round_has_no_interval() {
        let r = paired_ratio(&[Some(2.0), None], &[Some(1.0), Some(1.0)]).unwrap();
        assert_eq!((r.ratio, r.low, r.rounds), (2.0, None, 1));
        assert!(!r.significant());
        assert!(paired_ratio(&[None], &[Some(1.0)]).is_none());
    }

    #[test]
    fn the_difference_interval_is_the_t_interval_on_per_round_differences() {
        // Differences 10, 14, 12 (a missing round is left out): mean 12,
        // sd 2, t(0.975, 2) = 4.303, half-width 4.303 * 2 / sqrt(3).
        let a = [Some(110.0), Some(114.0), None, Some(112.0)];
        let b = [Some(100.0), Some(100.0), Some(100.0), Some(100.0)];
        let d = paired_difference(&a, &b).unwrap();
        let half = 4.303 * 2.0 / 3f64.sqrt();
        assert_eq!(d.rounds, 3);
        assert!((d.diff - 12.0).abs() < 1e-12);
        assert!((d.low.unwrap() - (12.0 - half)).abs() < 1e-12);
        assert!((d.high.unwrap() - (12.0 + half)).abs() < 1e-12);
        assert!(d.significant());
        // Noise around zero is not significant; one round has no interval.
        let d = paired_difference(&[Some(1.0), Some(-1.0)], &[Some(0.0), Some(0.0)]).unwrap();
        assert!(!d.significant());
        let one = paired_difference(&[Some(5.0)], &[Some(2.0)]).unwrap();
        assert_eq!((one.diff, one.low, one.rounds), (3.0, None, 1));
        assert!(paired_difference(&[None], &[Some(1.0)]).is_none());
    }
}
