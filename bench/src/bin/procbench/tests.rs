use super::*;

#[test]
fn clock_records_first_text_gaps_and_last() {
    let mut clock = Clock::new();
    let t0 = clock.sent;
    clock.text(t0 + Duration::from_millis(1), "a");
    clock.text(t0 + Duration::from_millis(3), "b");
    clock.text(t0 + Duration::from_millis(6), "c");
    let (rec, text) = clock.finish(true, Some("abc")).unwrap();
    assert_eq!(text, "abc");
    assert_eq!(rec.ttft, 1_000_000);
    assert_eq!(rec.gaps, vec![2_000_000, 3_000_000]);
    assert_eq!(rec.last, 6_000_000);
    assert_eq!(rec.events, 3);
}

#[test]
fn clock_accepts_coalesced_events_but_not_missing_text() {
    // A processor that merges deltas into fewer events still delivers the whole text.
    let mut clock = Clock::new();
    let t0 = clock.sent;
    clock.text(t0 + Duration::from_millis(1), "ab");
    clock.text(t0 + Duration::from_millis(2), "c");
    assert_eq!(clock.finish(true, Some("abc")).unwrap().0.events, 2);

    let mut short = Clock::new();
    short.text(Instant::now(), "ab");
    let err = short.finish(true, Some("abc")).err().unwrap();
    assert!(err.contains("2 of 3 bytes"), "{err}");
    let err = Clock::new().finish(false, None).err().unwrap();
    assert!(err.contains("end marker missing"), "{err}");
}

#[test]
fn per_thousand_and_per_unit_format() {
    assert_eq!(per_thousand(50, 12_800), "3.9");
    assert_eq!(per_thousand(5, 0), "-");
    assert_eq!(per_unit(10, 4), "2.50");
    assert_eq!(per_unit(1, 0), "-");
}

#[test]
fn redis_deployments_parse_and_name_themselves() {
    let setups =
        Setup::parse_list("standalone, cluster,cluster+replicas,cluster+replicas+wait").unwrap();
    let names: Vec<String> = setups.iter().map(Setup::name).collect();
    assert_eq!(
        names,
        [
            "standalone",
            "cluster",
            "cluster+replicas",
            "cluster+replicas+wait"
        ]
    );
    assert!(setups[3].cluster && setups[3].replicas && setups[3].wait);
    for bad in [
        "",
        "sentinel",
        "standalone+replicas",
        "cluster+wait",
        "cluster+fast",
    ] {
        assert!(Setup::parse_list(bad).is_err(), "{bad:?}");
    }
}
