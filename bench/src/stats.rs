//! Percentiles of latency samples (nanoseconds).

/// p50, p99 and max of a set of samples, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank; 0 when empty.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    // Nearest rank: the smallest sample with at least q of the samples at or below it.
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Sorts `samples` and summarises them.
pub fn summarize(samples: &mut [u64]) -> Summary {
    samples.sort_unstable();
    Summary {
        n: samples.len(),
        p50: quantile(samples, 0.50),
        p99: quantile(samples, 0.99),
        max: samples.last().copied().unwrap_or(0),
    }
}

/// Nanoseconds as milliseconds with three decimals, e.g. `0.137`.
pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A signed difference in nanoseconds as milliseconds with three decimals, e.g. `+0.052` or `-0.010`.
pub fn ms_diff(a: u64, b: u64) -> String {
    let d = a as f64 - b as f64;
    format!("{:+.3}", d / 1e6)
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
