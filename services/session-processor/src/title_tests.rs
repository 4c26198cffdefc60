use super::*;

#[test]
fn titles_are_one_clean_line() {
    assert_eq!(
        clean("Paris weather\nmore").as_deref(),
        Some("Paris weather")
    );
    assert_eq!(
        clean("<think>the user asks about\nweather</think>\n\n\"Weather in Paris\"").as_deref(),
        Some("Weather in Paris")
    );
    assert_eq!(clean("<think>never closed").as_deref(), None);
    assert_eq!(clean("# Title: Trip plan").as_deref(), Some("Trip plan"));
    for labelled in [
        "**Title:** Trip plan",
        "**Title**: Trip plan",
        "TITLE: Trip plan",
        "_title_: \"Trip plan\"",
    ] {
        assert_eq!(clean(labelled).as_deref(), Some("Trip plan"), "{labelled}");
    }
    assert_eq!(
        clean("Title IX compliance").as_deref(),
        Some("Title IX compliance"),
        "a title that starts with the word is not a label"
    );
    assert_eq!(clean("  \n\n").as_deref(), None);
    let long = "word ".repeat(60);
    let t = clean(&long).unwrap();
    assert!(t.chars().count() <= MAX_CHARS);
    assert_eq!(clean(&"é".repeat(150)).unwrap().chars().count(), MAX_CHARS);
}

fn user(text: &str, synthetic: bool) -> pb::Message {
    pb::Message {
        role: pb::Role::User as i32,
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text(pb::TextPart {
                text: text.into(),
                synthetic,
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_title_is_due_after_the_first_real_prompt_only() {
    assert!(!is_due(&[]));
    assert!(is_due(&[user("hi", false)]));
    assert!(is_due(&[user("hi", false), user("queued", false)]));
    assert!(!is_due(&[user("replayed", true)]));
    let answer = pb::Message {
        role: pb::Role::Assistant as i32,
        ..Default::default()
    };
    assert!(!is_due(&[user("hi", false), answer, user("again", false)]));
    let g = request(
        &[user("hi", false)],
        "openai/gpt-4o-mini",
        "ses_1",
        "default",
    )
    .unwrap();
    assert!(g.tools.is_empty());
    assert_eq!(g.system, [SYSTEM]);
}
