//! What the criterion benchmarks share: their configuration.

use std::time::Duration;

use criterion::Criterion;

/// `BENCH_QUICK=1` (`make bench`): short runs, enough for a figure; the full mode keeps criterion's defaults.
pub fn config() -> Criterion {
    if std::env::var_os("BENCH_QUICK").is_some() {
        Criterion::default()
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20)
    } else {
        Criterion::default()
    }
}
