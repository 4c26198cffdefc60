use super::*;

#[test]
fn nearest_rank_percentiles() {
    let mut v: Vec<u64> = (1..=100).rev().collect();
    let s = summarize(&mut v);
    assert_eq!((s.n, s.p50, s.p99, s.max), (100, 50, 99, 100));
    assert_eq!(summarize(&mut []).p99, 0);
    let mut one = vec![7];
    assert_eq!(summarize(&mut one).p50, 7);
}

#[test]
fn formats_milliseconds() {
    assert_eq!(ms(1_234_567), "1.235");
    assert_eq!(ms_diff(1_000_000, 1_052_000), "-0.052");
    assert_eq!(ms_diff(1_052_000, 1_000_000), "+0.052");
}
