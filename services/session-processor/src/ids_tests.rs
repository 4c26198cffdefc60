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

#[test]
fn ids_are_the_millisecond_sequence_and_random_part_in_fixed_width_hex() {
    let mut out = String::new();
    push_hex(&mut out, 0x1_2345_6789_abcd, 12);
    push_hex(&mut out, 7, 4);
    push_hex(&mut out, u64::from(u32::MAX), 8);
    assert_eq!(out, "23456789abcd0007ffffffff");
    let id = new("ses");
    assert!(
        id[4..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{id}"
    );
    assert_eq!(
        u64::from_str_radix(&id[4..16], 16).unwrap(),
        millis(&id).unwrap()
    );
}
