use super::*;

#[test]
fn split_keeps_every_byte() {
    let body = "data: 1\n\ndata: 2\r\n\r\nevent: x\ndata: 3\n\ntail";
    let frames = split_frames(body);
    assert_eq!(
        frames,
        vec![
            "data: 1\n\n",
            "data: 2\r\n\r\n",
            "event: x\ndata: 3\n\n",
            "tail"
        ]
    );
    assert_eq!(frames.concat(), body);
}

#[test]
fn every_scaled_fixture_decodes_to_n_deltas_and_a_finish() {
    for proto in Proto::ALL {
        let scaled = scaled(proto, 100).unwrap();
        let events = decode(proto, &scaled.body);
        // Gemini's finishing frame carries the answer's last text as well.
        let expected = if proto == Proto::Gemini { 101 } else { 100 };
        assert_eq!(scaled.deltas, expected, "{}", proto.name());
        assert!(
            matches!(events.last(), Some(Event::Finish(_))),
            "{}: {:?}",
            proto.name(),
            events.last()
        );
    }
}
