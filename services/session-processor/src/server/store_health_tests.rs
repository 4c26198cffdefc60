use super::*;

#[test]
fn not_serving_only_after_the_grace_and_serving_at_the_first_answer() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut h = StoreHealth::new(Duration::from_millis(1000));
    assert_eq!(h.observe(true, ms(0)), None, "serving from the start");
    assert_eq!(
        h.observe(false, ms(100)),
        None,
        "one failure is not an outage"
    );
    assert_eq!(h.observe(false, ms(1099)), None, "still within the grace");
    assert_eq!(
        h.observe(false, ms(1100)),
        Some(false),
        "the grace has passed"
    );
    assert_eq!(h.observe(false, ms(5000)), None, "reported once");
    assert_eq!(
        h.observe(true, ms(5100)),
        Some(true),
        "back at the first answer"
    );
    // A new outage counts its grace from its own first failure.
    assert_eq!(h.observe(false, ms(6000)), None);
    assert_eq!(h.observe(true, ms(6500)), None);
    assert_eq!(h.observe(false, ms(7000)), None);
    assert_eq!(h.observe(false, ms(7999)), None);
    assert_eq!(h.observe(false, ms(8000)), Some(false));
}

#[test]
fn the_probe_interval_is_a_quarter_of_the_grace_at_most_half_a_second() {
    assert_eq!(
        probe_interval(Duration::from_millis(400)),
        Duration::from_millis(100)
    );
    assert_eq!(
        probe_interval(Duration::from_secs(10)),
        Duration::from_millis(500)
    );
}
