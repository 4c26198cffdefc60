use super::*;

fn delta(part: &str, text: &str) -> Event {
    Event::PartDelta(pb::PartDelta {
        part_id: part.into(),
        message_id: "msg_1".into(),
        delta: text.into(),
    })
}

fn status() -> Event {
    Event::Status(pb::SessionStatus {
        kind: pb::session_status::Kind::Busy as i32,
        ..Default::default()
    })
}

#[test]
fn a_batch_round_trips_with_every_id_and_merged_runs_stay_small() {
    let events: Vec<(EventId, Stored)> = [
        status(),
        delta("p1", "Hé"),
        delta("p1", "llo"),
        delta("p1", ""),
        delta("p1", " wörld"),
        delta("p2", "x"),
        delta("p1", "!"),
        status(),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, e)| {
        (
            EventId {
                ms: 10 + i as u64 / 3,
                seq: i as u64,
            },
            Stored::new(e),
        )
    })
    .collect();
    let bytes = encode_batch(&events);
    let stored = StoredBatch::decode(bytes.as_slice()).unwrap();
    assert_eq!(
        stored.events.len(),
        5,
        "the p1 run of four is one stored event"
    );
    let mut out = Vec::new();
    decode_batch(&bytes, "ses_1", &mut out).unwrap();
    let expected: Vec<pb::SessionEvent> = events
        .iter()
        .map(|(id, e)| pb::SessionEvent {
            event_id: id.to_string(),
            session_id: "ses_1".into(),
            event: Some(e.to_event()),
        })
        .collect();
    assert_eq!(out, expected);
}

#[test]
fn broken_pieces_are_an_error_not_a_panic() {
    let mut stored = StoredBatch::decode(
        encode_batch(&[
            (EventId { ms: 1, seq: 0 }, Stored::new(delta("p", "ab"))),
            (EventId { ms: 1, seq: 1 }, Stored::new(delta("p", "c"))),
        ])
        .as_slice(),
    )
    .unwrap();
    stored.events[0].piece_lens[0] = 9;
    let mut out = Vec::new();
    assert!(decode_batch(&stored.encode_to_vec(), "s", &mut out).is_err());
}
