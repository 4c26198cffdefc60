use super::*;

#[test]
fn ids_strictly_increase_and_sort_as_strings() {
    let ids: Vec<String> = (0..5000).map(|_| new("prt")).collect();
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{} !< {}", w[0], w[1]);
    }
    assert!(ids[0].starts_with("prt_"));
    assert_eq!(ids[0].len(), 4 + 24);
}

#[test]
fn millis_round_trips() {
    let before = now_ms();
    let id = new("msg");
    let ms = millis(&id).unwrap();
    assert!(ms >= before && ms <= now_ms() + 1);
    assert_eq!(millis("nope"), None);
}
