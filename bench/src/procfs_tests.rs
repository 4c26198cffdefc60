use super::*;

#[test]
fn reads_own_process() {
    let pid = std::process::id();
    assert!(rss_kib(pid).unwrap() > 0);
    let anon = anon_kib(pid).unwrap();
    assert!(anon > 0 && anon <= rss_kib(pid).unwrap() + 1024);
    // Burn a little CPU so both clocks move.
    let mut x = 0u64;
    for i in 0..2_000_000u64 {
        x = x.wrapping_mul(31).wrapping_add(i);
    }
    assert!(x != 1);
    assert!(cpu_ns(pid).unwrap() > 0);
    assert!(cpu_ticks_ns(pid).is_some());
}
