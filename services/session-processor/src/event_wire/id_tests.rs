use super::*;

#[test]
fn ids_parse_print_and_order() {
    let a: EventId = "1700000000000-3".parse().unwrap();
    assert_eq!(
        a,
        EventId {
            ms: 1_700_000_000_000,
            seq: 3
        }
    );
    assert_eq!(a.to_string(), "1700000000000-3");
    for id in [
        EventId::ZERO,
        a,
        EventId {
            ms: u64::MAX,
            seq: u64::MAX,
        },
    ] {
        assert_eq!(id.to_id_string(), id.to_string());
        assert_eq!(id.text().as_str(), id.to_string());
        assert_eq!(id.to_id_string().parse::<EventId>().unwrap(), id);
    }
    assert_eq!("0".parse::<EventId>().unwrap(), EventId::ZERO);
    assert_eq!("5".parse::<EventId>().unwrap(), EventId { ms: 5, seq: 0 });
    assert!(EventId { ms: 2, seq: 0 } > EventId { ms: 1, seq: 9 });
    for bad in [
        "",
        "-",
        "1-",
        "-1",
        "a-1",
        "1-b",
        "$",
        "+",
        "1-2-3",
        "99999999999999999999",
    ] {
        assert!(bad.parse::<EventId>().is_err(), "{bad}");
    }
}

#[test]
fn next_ids_increase_even_when_the_clock_goes_back() {
    let a = EventId { ms: 100, seq: 4 };
    assert_eq!(a.next_at(101), EventId { ms: 101, seq: 0 });
    assert_eq!(a.next_at(100), EventId { ms: 100, seq: 5 });
    assert_eq!(a.next_at(50), EventId { ms: 100, seq: 5 });
}

#[test]
fn an_ids_text_is_its_display_at_every_digit_count() {
    let mut values = vec![0, u64::MAX, u64::MAX - 1];
    let mut p: u64 = 1;
    while let Some(next) = p.checked_mul(10) {
        values.extend([p - 1, p, p + 1]);
        p = next;
    }
    values.extend([p - 1, p, p + 1]);
    for &ms in &values {
        for &seq in &values {
            let id = EventId { ms, seq };
            assert_eq!(id.text().as_str(), id.to_string());
        }
    }
}
