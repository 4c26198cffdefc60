use llm_proto::sessions as pb;
use pb::session_event::Event;

use super::*;

fn delta() -> Event {
    Event::PartDelta(pb::PartDelta {
        part_id: "prt_1".into(),
        message_id: "msg_1".into(),
        delta: "Hello, wörld".into(),
    })
}

#[test]
fn a_kept_event_encodes_weighs_and_comes_back_as_the_event_itself() {
    let status = Event::Status(pb::SessionStatus::default());
    let long_empty = Event::PartDelta(pb::PartDelta {
        part_id: "prt_1".into(),
        message_id: String::new(),
        delta: "a delta longer than what is kept inline, with ünïcode".into(),
    });
    for event in [
        delta(),
        long_empty,
        status,
        Event::Done(pb::Done::default()),
    ] {
        let kept = Stored::new(event.clone());
        assert_eq!(kept.to_event(), event);
        let mut whole = Vec::new();
        event.encode(&mut whole);
        assert_eq!(kept.encode(), whole, "{event:?}");
        let want_weight = match &event {
            Event::PartDelta(d) => d.delta.len(),
            other => other.encoded_len(),
        };
        assert_eq!(kept.weight(), want_weight);
        assert_eq!(
            kept.as_delta().is_some(),
            matches!(event, Event::PartDelta(_))
        );
    }
}

#[test]
fn a_ring_entry_is_the_size_of_a_delta() {
    assert_eq!(
        std::mem::size_of::<Stored>(),
        std::mem::size_of::<KeptDelta>()
    );
}

#[test]
fn a_kept_delta_is_a_fraction_of_the_event_enum() {
    let kept = std::mem::size_of::<KeptDelta>();
    let whole = std::mem::size_of::<Event>();
    assert!(kept * 6 <= whole, "delta {kept} bytes, event {whole} bytes");
}

#[test]
fn deltas_made_from_shared_ids_encode_as_the_event_with_those_ids() {
    let ids = std::sync::Arc::new(PartIds {
        part_id: "prt_1".into(),
        message_id: "msg_1".into(),
    });
    let kept = Stored::delta(std::sync::Arc::clone(&ids), "Hello, wörld");
    assert_eq!(kept.to_event(), delta());
    let mut whole = Vec::new();
    delta().encode(&mut whole);
    assert_eq!(kept.encode(), whole);
    let d = kept.as_delta().unwrap();
    assert!(std::sync::Arc::ptr_eq(&d.ids, &ids));
}

#[test]
fn an_update_kept_from_a_reference_is_the_event_kept_whole() {
    let part = pb::Part {
        id: "prt_1".into(),
        message_id: "msg_1".into(),
        session_id: "ses_1".into(),
        ..Default::default()
    };
    let message = pb::Message {
        id: "msg_1".into(),
        session_id: "ses_1".into(),
        role: pb::Role::Assistant as i32,
        ..Default::default()
    };
    for (kept, whole) in [
        (
            Stored::part_updated(&part),
            Stored::new(Event::PartUpdated(part.clone())),
        ),
        (
            Stored::message_updated(&message),
            Stored::new(Event::MessageUpdated(message.clone())),
        ),
    ] {
        assert_eq!(kept.encode(), whole.encode());
        assert_eq!(kept.kind(), whole.kind());
        assert_eq!(kept.to_event(), whole.to_event());
    }
    assert!(Stored::message_updated(&message).is_message_update());
    assert!(!Stored::part_updated(&part).is_message_update());
}
