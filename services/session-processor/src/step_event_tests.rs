use compact_str::CompactString;
use llm_proto::gateway as gw;
use prost::Message as _;

use super::StepEvent;
use gw::stream_response::Event as E;

/// What the generated message makes of `bytes`, as a [`StepEvent`]: the reference the fast path must match.
fn reference(bytes: &[u8]) -> Option<StepEvent> {
    let ev = gw::StreamResponse::decode(bytes).ok()?;
    Some(normal(StepEvent::Other(Box::new(ev))))
}

/// Deltas the generated way, as the fast path makes them.
fn normal(ev: StepEvent) -> StepEvent {
    match ev {
        StepEvent::Other(ev) => match ev.event {
            Some(E::TextDelta(d)) => StepEvent::Delta {
                reasoning: false,
                id: d.id.into(),
                text: d.delta.into(),
            },
            Some(E::ReasoningDelta(d)) => StepEvent::Delta {
                reasoning: true,
                id: d.id.into(),
                text: d.delta.into(),
            },
            other => StepEvent::Other(Box::new(gw::StreamResponse { event: other })),
        },
        delta => delta,
    }
}

fn encoded(event: E) -> Vec<u8> {
    gw::StreamResponse { event: Some(event) }.encode_to_vec()
}

fn text(id: &str, delta: &str) -> E {
    E::TextDelta(gw::TextDelta {
        id: id.into(),
        delta: delta.into(),
    })
}

/// A length-delimited field.
fn field(number: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint((number << 3) | 2, &mut out);
    prost::encoding::encode_varint(value.len() as u64, &mut out);
    out.extend_from_slice(value);
    out
}

#[test]
fn deltas_read_without_the_generated_message() {
    let long = "a longer piece of text than fits inline, with ünïcödé";
    for (event, reasoning) in [
        (text("0", "Hel"), false),
        (text("txt_1", long), false),
        (text("", ""), false),
        (
            E::ReasoningDelta(gw::ReasoningDelta {
                id: "r".into(),
                delta: "think".into(),
            }),
            true,
        ),
    ] {
        let bytes = encoded(event);
        let ev = StepEvent::decode(&bytes).expect("decodes");
        assert!(
            matches!(&ev, StepEvent::Delta { reasoning: r, .. } if *r == reasoning),
            "{ev:?}"
        );
        assert_eq!(Some(ev), reference(&bytes));
    }
}

#[test]
fn every_other_event_decodes_as_generated() {
    for event in [
        E::StepStart(gw::StepStart::default()),
        E::TextStart(gw::TextStart { id: "0".into() }),
        E::TextEnd(gw::TextEnd { id: "0".into() }),
        E::StepFinish(gw::StepFinish::default()),
        E::Error(gw::Error {
            message: "boom".into(),
            ..Default::default()
        }),
    ] {
        let bytes = encoded(event);
        let ev = StepEvent::decode(&bytes).expect("decodes");
        assert!(matches!(ev, StepEvent::Other(_)));
        assert_eq!(Some(normal(ev)), reference(&bytes));
    }
}

#[test]
fn any_encoding_gives_what_the_generated_message_gives() {
    let id = field(1, b"blk");
    let delta = field(2, b"hi");
    let other_delta = field(2, b"there");
    let unknown = field(9, b"x");
    let mut varint_field = Vec::new();
    prost::encoding::encode_varint(3 << 3, &mut varint_field);
    varint_field.push(1);
    let bodies: Vec<Vec<u8>> = vec![
        [delta.clone(), id.clone()].concat(),
        [id.clone(), delta.clone(), other_delta.clone()].concat(),
        [id.clone(), delta.clone(), unknown.clone()].concat(),
        [id.clone(), varint_field.clone(), delta.clone()].concat(),
        id.clone(),
        delta.clone(),
        field(2, &[0xff, 0xfe]),
    ];
    let mut cases = Vec::new();
    for body in &bodies {
        cases.push(field(4, body));
        cases.push(field(7, body));
        // Two events in one message: the last oneof field wins.
        cases.push([field(4, body), field(4, &field(2, b"last"))].concat());
        cases.push(
            [
                field(4, body),
                encoded(E::TextEnd(gw::TextEnd { id: "0".into() })),
            ]
            .concat(),
        );
        cases.push([field(4, body), unknown.clone()].concat());
    }
    for case in &cases {
        let ours = StepEvent::decode(case).ok().map(normal);
        assert_eq!(ours, reference(case), "{case:?}");
    }
}

#[test]
fn every_truncation_fails_or_reads_as_the_generated_message_does() {
    let bytes = encoded(text("txt_0", "a delta of some length"));
    for end in 0..bytes.len() {
        let cut = &bytes[..end];
        let ours = StepEvent::decode(cut).ok().map(normal);
        assert_eq!(ours, reference(cut), "cut at {end}");
    }
}

#[test]
fn only_the_streams_start_and_an_error_are_not_output() {
    let delta = StepEvent::Delta {
        reasoning: false,
        id: CompactString::from("0"),
        text: CompactString::from("x"),
    };
    assert!(delta.is_output());
    assert!(
        StepEvent::from(gw::StreamResponse {
            event: Some(text("0", "x"))
        })
        .is_output()
    );
    assert!(
        StepEvent::from(gw::StreamResponse {
            event: Some(E::StepStart(Default::default()))
        })
        .is_output()
    );
    assert!(
        !StepEvent::from(gw::StreamResponse {
            event: Some(E::StreamStart(Default::default()))
        })
        .is_output()
    );
    assert!(
        !StepEvent::from(gw::StreamResponse {
            event: Some(E::Error(Default::default()))
        })
        .is_output()
    );
    assert!(!StepEvent::from(gw::StreamResponse { event: None }).is_output());
}
