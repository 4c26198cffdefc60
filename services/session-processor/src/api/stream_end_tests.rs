use llm_proto::sessions as pb;
use pb::session_event::Event;

use super::{StreamEnd, Until, Verdict};
use crate::event_wire::{Outgoing, Stored};
use crate::store::Delivery;

/// An event as a stream meets it: from the local ring as kept when it has an id (ids ending in `-1`), read from
/// the log otherwise (the rule must not care), whole and unlogged when it has none.
fn event(id: &str, event: Event) -> Outgoing {
    match id.parse() {
        Ok(parsed) if id.ends_with("-1") => Outgoing::Kept {
            id: parsed,
            session_id: "ses_a".into(),
            event: Stored::new(event),
        },
        _ => Outgoing::Event(Box::new(pb::SessionEvent {
            event_id: id.into(),
            session_id: "ses_a".into(),
            event: Some(event),
        })),
    }
}

fn message(id: &str, role: pb::Role, parent: &str) -> Outgoing {
    event(
        "1-1",
        Event::MessageUpdated(pb::Message {
            id: id.into(),
            role: role as i32,
            parent_id: parent.into(),
            ..Default::default()
        }),
    )
}

fn done(id: &str) -> Outgoing {
    event(id, Event::Done(pb::Done::default()))
}

fn delta() -> Outgoing {
    event("1-2", Event::PartDelta(pb::PartDelta::default()))
}

#[test]
fn a_subscription_never_ends_and_a_prompt_that_started_the_loop_ends_at_the_first_done() {
    let mut never = StreamEnd::new(Until::Never);
    let mut first = StreamEnd::new(Until::Done);
    for ev in [delta(), message("msg_a", pb::Role::User, "")] {
        assert_eq!(never.observe(&ev), Verdict::Go);
        assert_eq!(first.observe(&ev), Verdict::Go);
    }
    assert_eq!(never.observe(&done("2-1")), Verdict::Go);
    assert_eq!(first.observe(&done("2-1")), Verdict::End);
}

#[test]
fn a_queued_prompt_asks_at_each_done_and_ends_only_after_its_message_or_an_answer_to_it() {
    let tag = "qp_1".to_string();
    let mut end = StreamEnd::new(Until::Answered(tag.clone()));
    // The running loop's own messages and its `done`, before the prompt was delivered.
    assert_eq!(
        end.observe(&message("msg_u0", pb::Role::User, "")),
        Verdict::Go
    );
    assert_eq!(
        end.observe(&message("msg_a0", pb::Role::Assistant, "msg_u0")),
        Verdict::Go
    );
    assert_eq!(end.observe(&done("2-1")), Verdict::Ask(tag.clone()));
    assert!(!end.answered(&Delivery::Queued), "still queued: go on");
    // Delivered meanwhile (by the next run), but its message comes later on this stream: this `done` is not its.
    assert!(!end.answered(&Delivery::Delivered("msg_u1".into())));
    assert_eq!(
        end.observe(&message("msg_u1", pb::Role::User, "")),
        Verdict::Go
    );
    assert_eq!(end.observe(&delta()), Verdict::Go);
    assert_eq!(end.observe(&done("3-1")), Verdict::Ask(tag));
    assert!(end.answered(&Delivery::Delivered("msg_u1".into())));
}

#[test]
fn an_answer_to_the_prompt_counts_as_seeing_it_and_a_lost_prompt_or_unreadable_log_ends_the_stream()
{
    // A run resumed after a crash answers the delivered prompt without publishing its user message again.
    let mut end = StreamEnd::new(Until::Answered("qp_1".into()));
    end.observe(&message("msg_a1", pb::Role::Assistant, "msg_u1"));
    assert!(end.answered(&Delivery::Delivered("msg_u1".into())));
    // Neither queued nor delivered (deleted session, or delivered by a replica that does not tag): nothing would
    // tell a later `done` apart.
    assert!(StreamEnd::new(Until::Answered("qp_2".into())).answered(&Delivery::Unknown));
    // The `done` a stream makes up when the log stayed unreadable has no id.
    let mut end = StreamEnd::new(Until::Answered("qp_3".into()));
    assert_eq!(end.observe(&done("")), Verdict::End);
}
