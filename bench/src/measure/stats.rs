//! Latency summaries: nearest-rank percentiles over milliseconds.

use serde::{Deserialize, Serialize};

/// Percentiles of a latency sample, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: usize,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 95th percentile.
    pub p95_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Largest sample.
    pub max_ms: Option<f64>,
    /// Arithmetic mean.
    pub mean_ms: Option<f64>,
}

/// Nearest-rank percentile (`p` in 0..=100) of ascending `sorted`: the smallest value with at least `p`% of
/// the samples at or below it. `None` for an empty sample.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    // NB: nearest rank = ceil(p/100 · n), 1-based; p = 0 is the minimum.
    let n = sorted.len() as f64;
    let rank = ((p / 100.0) * n).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

/// Summarises samples (any order).
pub fn summarize(samples: &[f64]) -> LatencySummary {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mean = (!sorted.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64);
    LatencySummary {
        count: sorted.len(),
        p50_ms: percentile(&sorted, 50.0),
        p95_ms: percentile(&sorted, 95.0),
        p99_ms: percentile(&sorted, 99.0),
        max_ms: sorted.last().copied(),
        mean_ms: mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 95.0), Some(95.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        let small = [3.0, 7.0, 9.0];
        assert_eq!(percentile(&small, 50.0), Some(7.0));
        assert_eq!(percentile(&small, 99.0), Some(9.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn summary_sorts_and_averages() {
        let s = summarize(&[40.0, 10.0, 30.0, 20.0]);
        assert_eq!(s.count, 4);
        assert_eq!(s.p50_ms, Some(20.0));
        assert_eq!(s.p95_ms, Some(40.0));
        assert_eq!(s.max_ms, Some(40.0));
        assert_eq!(s.mean_ms, Some(25.0));
        assert_eq!(summarize(&[]), LatencySummary::default());
    }
}
