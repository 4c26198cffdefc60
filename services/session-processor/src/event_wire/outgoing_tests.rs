//! A kept event written straight is byte for byte the generated message's encoding of the same event, in every
//! response that carries one.

use std::sync::Arc;

use llm_proto::sessions as pb;
use pb::session_event::Event;
use prost::Message as _;

use super::Outgoing;
use crate::event_wire::{EventId, Stored};

fn events() -> Vec<Event> {
    vec![
        Event::PartDelta(pb::PartDelta {
            part_id: "prt_1".into(),
            message_id: "msg_1".into(),
            delta: "Hello, wörld".into(),
        }),
        Event::PartDelta(pb::PartDelta {
            part_id: "prt_1".into(),
            message_id: String::new(),
            delta: "x".repeat(300),
        }),
        Event::PartDelta(pb::PartDelta::default()),
        Event::Status(pb::SessionStatus::default()),
        Event::Done(pb::Done {
            stopped_by: pb::StopReason::Completed as i32,
            ..Default::default()
        }),
        Event::MessageUpdated(pb::Message {
            id: "msg_2".into(),
            parent_id: "msg_1".into(),
            role: pb::Role::Assistant as i32,
            ..Default::default()
        }),
        Event::PartUpdated(pb::Part {
            id: "prt_9".into(),
            ..Default::default()
        }),
    ]
}

fn ids() -> [EventId; 3] {
    [
        EventId::ZERO,
        EventId {
            ms: 1_700_000_000_123,
            seq: 7,
        },
        EventId {
            ms: u64::MAX,
            seq: u64::MAX,
        },
    ]
}

/// Every response type, encoded by the generated code around `event`.
fn generated(event: &pb::SessionEvent) -> [Vec<u8>; 3] {
    let e = Some(event.clone());
    [
        pb::PromptResponse { event: e.clone() }.encode_to_vec(),
        pb::SubscribeResponse { event: e.clone() }.encode_to_vec(),
        pb::CompactResponse { event: e }.encode_to_vec(),
    ]
}

fn written(out: &Outgoing) -> Vec<u8> {
    let mut buf = Vec::new();
    out.encode_response(&mut buf);
    buf
}

#[test]
fn a_kept_event_is_written_as_the_generated_code_writes_it() {
    let session: Arc<str> = Arc::from("ses_0123456789abcdef");
    for event in events() {
        for id in ids() {
            let kept = Outgoing::Kept {
                id,
                session_id: Arc::clone(&session),
                event: Stored::new(event.clone()),
            };
            let whole = kept.clone().into_event();
            assert_eq!(whole.event.as_ref(), Some(&event));
            assert_eq!(whole.event_id, id.to_string());
            for expected in generated(&whole) {
                assert_eq!(written(&kept), expected, "{event:?} at {id}");
            }
        }
    }
}

#[test]
fn a_whole_event_is_written_as_the_generated_code_writes_it() {
    for event in events() {
        let whole = pb::SessionEvent {
            event_id: "5-1".into(),
            session_id: "ses_1".into(),
            event: Some(event),
        };
        let out = Outgoing::Event(Box::new(whole.clone()));
        for expected in generated(&whole) {
            assert_eq!(written(&out), expected);
        }
    }
    // An event without one (the stream's own terminal event) omits it, as proto3 does.
    let bare = pb::SessionEvent::default();
    assert_eq!(
        written(&Outgoing::Event(Box::new(bare.clone()))),
        generated(&bare)[0]
    );
}

#[test]
fn what_a_stream_asks_of_an_event_is_the_same_kept_or_whole() {
    let session: Arc<str> = Arc::from("ses_1");
    for event in events() {
        let kept = Outgoing::Kept {
            id: EventId { ms: 9, seq: 0 },
            session_id: Arc::clone(&session),
            event: Stored::new(event.clone()),
        };
        let whole = Outgoing::Event(Box::new(kept.clone().into_event()));
        assert_eq!(kept.is_done(), matches!(event, Event::Done(_)));
        assert_eq!(whole.is_done(), kept.is_done());
        let expected = match &event {
            Event::MessageUpdated(m) => Some(m.clone()),
            _ => None,
        };
        assert_eq!(kept.message_updated().map(|m| m.into_owned()), expected);
        assert_eq!(whole.message_updated().map(|m| m.into_owned()), expected);
        assert!(!kept.unlogged() && !whole.unlogged());
    }
    let unlogged = Outgoing::Event(Box::new(pb::SessionEvent {
        event: Some(Event::Done(pb::Done::default())),
        ..Default::default()
    }));
    assert!(unlogged.unlogged() && unlogged.is_done());
}
