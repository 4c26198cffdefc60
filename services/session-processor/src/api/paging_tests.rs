use super::*;

fn part(id: &str, bytes: usize) -> pb::Part {
    pb::Part {
        id: id.into(),
        kind: Some(pb::part::Kind::Text(pb::TextPart {
            text: "x".repeat(bytes),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn message(id: &str, parts: &[(&str, usize)]) -> pb::Message {
    pb::Message {
        id: id.into(),
        parts: parts.iter().map(|(p, n)| part(p, *n)).collect(),
        ..Default::default()
    }
}

#[test]
fn items_fit_by_bytes_and_the_cursor_resumes_after_the_last_kept() {
    let items: Vec<(String, pb::Session)> = (0..5)
        .map(|i| {
            (
                format!("c{i}"),
                pb::Session {
                    id: format!("s{i}"),
                    title: "t".repeat(100),
                    ..Default::default()
                },
            )
        })
        .collect();
    let one = entry_len(&items[0].1);
    let (page, next) = fit(items.clone(), Some("store".into()), one * 2 + 1);
    assert_eq!(page.len(), 2);
    assert_eq!(next.as_deref(), Some("c1"));
    let (page, next) = fit(items.clone(), Some("store".into()), usize::MAX);
    assert_eq!((page.len(), next.as_deref()), (5, Some("store")));
    let (page, next) = fit(items, None, 1);
    assert_eq!(
        (page.len(), next.as_deref()),
        (1, Some("c0")),
        "at least one"
    );
}

#[test]
fn a_page_of_messages_never_exceeds_the_budget() {
    let budget = 8_000;
    let messages = vec![
        message("m1", &[("p1", 3_000)]),
        message("m2", &[("p1", 3_000), ("p2", 3_000)]),
        message("m3", &[("p1", 10)]),
    ];
    let (page, next) = fit_messages(messages.clone(), None, 100, budget);
    assert_eq!(page.len(), 1, "m2 does not fit after m1");
    assert_eq!(next.as_deref(), Some("m1"));
    let (page, next) = fit_messages(messages[1..].to_vec(), None, 100, budget);
    assert_eq!((page.len(), next), (2, None), "m2 and m3 fit together");
    let (page, next) = fit_messages(messages.clone(), Some("more".into()), 3, usize::MAX);
    assert_eq!((page.len(), next.as_deref()), (3, Some("more")));
    let (page, next) = fit_messages(messages, Some("more".into()), 1, usize::MAX);
    assert_eq!(
        (page.len(), next.as_deref()),
        (1, Some("m1")),
        "count first"
    );
}

#[test]
fn a_message_larger_than_a_page_comes_in_pieces() {
    let budget = 10_000;
    let big = message(
        "m1",
        &[("p1", 4_000), ("p2", 4_000), ("p3", 4_000), ("p4", 10)],
    );
    let (page, next) = fit_messages(vec![big.clone(), message("m2", &[])], None, 100, budget);
    assert_eq!(page.len(), 1);
    let ids: Vec<&str> = page[0].parts.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["p1", "p2"]);
    assert!(entry_len(&page[0]) <= budget);
    assert_eq!(next.as_deref(), Some("m1:p2"));
    // The next page: the rest of m1, then m2.
    let rest = rest_of(big, "p2");
    let (page, next) = fit_messages(vec![rest, message("m2", &[])], None, 100, budget);
    let ids: Vec<&str> = page[0].parts.iter().map(|p| p.id.as_str()).collect();
    assert_eq!((ids, page.len(), next), (vec!["p3", "p4"], 2, None));
}
