#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::*;

/// A decoded message, owned, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    headers: Vec<(String, String)>,
    payload: Vec<u8>,
}

fn owned(m: Message<'_>) -> Owned {
    Owned {
        headers: m
            .headers()
            .map(|(n, v)| (n.to_string(), format!("{v:?}")))
            .collect(),
        payload: m.payload.to_vec(),
    }
}

fn decode_in(chunks: &[&[u8]]) -> Result<Vec<Owned>, FrameError> {
    let mut d = EventStreamDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut |m| out.push(owned(m)))?;
    }
    d.finish()?;
    Ok(out)
}

fn event(kind: &str, payload: &str) -> Vec<u8> {
    encode(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.as_bytes(),
    )
}

#[test]
fn empty_message_matches_the_documented_bytes() {
    let bytes = encode(&[], b"");
    assert_eq!(
        bytes,
        [
            0, 0, 0, 16, 0, 0, 0, 0, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff
        ]
    );
    let got = decode_in(&[&bytes]).unwrap();
    assert_eq!(
        got,
        vec![Owned {
            headers: vec![],
            payload: vec![]
        }]
    );
}

#[test]
fn string_headers_and_payload_round_trip() {
    let bytes = event("contentBlockDelta", r#"{"delta":{"text":"Hi"}}"#);
    let mut d = EventStreamDecoder::new();
    let mut seen = 0;
    d.feed(&bytes, &mut |m| {
        seen += 1;
        assert_eq!(m.header_str(":event-type"), Some("contentBlockDelta"));
        assert_eq!(m.header_str(":message-type"), Some("event"));
        assert_eq!(m.header(":missing"), None);
        assert_eq!(m.payload, br#"{"delta":{"text":"Hi"}}"#);
    })
    .unwrap();
    assert_eq!(seen, 1);
    d.finish().unwrap();
}

/// Hand-assembled headers of every value type.
fn typed_headers() -> Vec<u8> {
    let mut h = Vec::new();
    let mut push = |name: &str, ty: u8, value: &[u8]| {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(ty);
        h.extend_from_slice(value);
    };
    push("t", 0, &[]);
    push("f", 1, &[]);
    push("b", 2, &[0xff]);
    push("s", 3, &(-2i16).to_be_bytes());
    push("i", 4, &7i32.to_be_bytes());
    push("l", 5, &(1i64 << 40).to_be_bytes());
    push("y", 6, &[0, 2, 0xde, 0xad]);
    push("z", 7, &[0, 2, b'o', b'k']);
    push("ts", 8, &1_700_000_000_000i64.to_be_bytes());
    push("u", 9, &[7u8; 16]);
    h
}

fn raw_message(headers: &[u8], payload: &[u8]) -> Vec<u8> {
    let total = (16 + headers.len() + payload.len()) as u32;
    let mut out = Vec::new();
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(headers.len() as u32).to_be_bytes());
    let c = crc32fast::hash(&out);
    out.extend_from_slice(&c.to_be_bytes());
    out.extend_from_slice(headers);
    out.extend_from_slice(payload);
    let c = crc32fast::hash(&out);
    out.extend_from_slice(&c.to_be_bytes());
    out
}

#[test]
fn every_header_type_decodes() {
    let bytes = raw_message(&typed_headers(), b"{}");
    let mut d = EventStreamDecoder::new();
    let mut headers = Vec::new();
    d.feed(&bytes, &mut |m| {
        headers = m
            .headers()
            .map(|(n, v)| (n.to_string(), format!("{v:?}")))
            .collect();
    })
    .unwrap();
    let expect = [
        ("t", HeaderValue::Bool(true)),
        ("f", HeaderValue::Bool(false)),
        ("b", HeaderValue::Byte(-1)),
        ("s", HeaderValue::Short(-2)),
        ("i", HeaderValue::Int(7)),
        ("l", HeaderValue::Long(1 << 40)),
        ("y", HeaderValue::Bytes(&[0xde, 0xad])),
        ("z", HeaderValue::Str("ok")),
        ("ts", HeaderValue::Timestamp(1_700_000_000_000)),
        ("u", HeaderValue::Uuid([7; 16])),
    ]
    .map(|(n, v)| (n.to_string(), format!("{v:?}")));
    assert_eq!(headers, expect.to_vec());
}

#[test]
fn typed_errors_for_each_check() {
    let good = event("messageStart", r#"{"role":"assistant"}"#);

    let mut bad = good.clone();
    bad[1] ^= 1;
    assert!(matches!(
        decode_in(&[&bad]),
        Err(FrameError::PreludeCrc { .. })
    ));

    let mut bad = good.clone();
    let last = bad.len() - 6;
    bad[last] ^= 0x20;
    assert!(matches!(
        decode_in(&[&bad]),
        Err(FrameError::MessageCrc { .. })
    ));

    assert!(matches!(
        decode_in(&[&good[..good.len() - 1]]),
        Err(FrameError::Truncated(_))
    ));

    // Lengths out of range, with valid prelude CRCs.
    let prelude = |total: u32, headers: u32| {
        let mut p = Vec::new();
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&headers.to_be_bytes());
        let c = crc32fast::hash(&p);
        p.extend_from_slice(&c.to_be_bytes());
        p
    };
    assert_eq!(
        decode_in(&[&prelude(15, 0)]),
        Err(FrameError::BadLength(15))
    );
    assert_eq!(
        decode_in(&[&prelude(u32::MAX, 0)]),
        Err(FrameError::BadLength(u32::MAX))
    );
    assert_eq!(
        decode_in(&[&prelude(20, 5)]),
        Err(FrameError::BadHeadersLength(5))
    );

    // A header with an unknown type, inside a message whose CRCs are right.
    let bytes = raw_message(&[1, b'x', 42], b"");
    assert_eq!(decode_in(&[&bytes]), Err(FrameError::BadHeader(12)));
    // A string header longer than the section.
    let bytes = raw_message(&[1, b'x', 7, 0, 9, b'a'], b"");
    assert_eq!(decode_in(&[&bytes]), Err(FrameError::BadHeader(12)));
}

#[test]
fn a_stopped_decoder_stays_stopped() {
    let mut bad = event("messageStart", "{}");
    bad[0] ^= 0x80;
    let mut d = EventStreamDecoder::new();
    let first = d.feed(&bad, &mut |_| panic!("no message")).unwrap_err();
    let good = event("messageStart", "{}");
    assert_eq!(d.feed(&good, &mut |_| panic!("no message")), Err(first));
    assert_eq!(d.finish(), Err(first));
}

#[test]
fn the_limit_refuses_large_messages_before_buffering_them() {
    let big = event("contentBlockDelta", &"x".repeat(1000));
    let mut d = EventStreamDecoder::with_limit(512);
    // Only the prelude arrives: the announced length is refused at once.
    assert!(matches!(
        d.feed(&big[..12], &mut |_| {}),
        Err(FrameError::BadLength(_))
    ));
}

fn stream() -> Vec<u8> {
    let mut all = Vec::new();
    all.extend(event("messageStart", r#"{"p":"abc","role":"assistant"}"#));
    all.extend(event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefgh"}"#,
    ));
    all.extend(raw_message(&typed_headers(), b"{}"));
    all.extend(encode(&[], b""));
    all.extend(event("messageStop", r#"{"stopReason":"end_turn"}"#));
    all
}

proptest! {
    #[test]
    fn any_split_gives_the_same_messages(cuts in proptest::collection::vec(0usize..2000, 0..12)) {
        let all = stream();
        let whole = decode_in(&[&all]).unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (all.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut from = 0;
        for c in cuts {
            chunks.push(&all[from..c]);
            from = c;
        }
        chunks.push(&all[from..]);
        prop_assert_eq!(decode_in(&chunks).unwrap(), whole);
    }

    #[test]
    fn a_flipped_bit_is_a_typed_error_never_a_panic(bit in 0usize..10_000, cut in 0usize..2000) {
        let mut all = stream();
        let bit = bit % (all.len() * 8);
        all[bit / 8] ^= 1 << (bit % 8);
        let cut = cut % (all.len() + 1);
        // Every message is protected by a CRC32, which catches any single-bit error.
        prop_assert!(decode_in(&[&all[..cut], &all[cut..]]).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_in(&[&bytes]);
    }
}
