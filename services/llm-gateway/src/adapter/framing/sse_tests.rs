use super::*;
use proptest::prelude::*;

/// An owned copy of an item, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Event(String, String),
    Bare(String),
    Comment,
}

fn ev(event: &str, data: &str) -> Item {
    Item::Event(event.to_string(), data.to_string())
}

fn owned(item: SseItem<'_>) -> Item {
    match item {
        SseItem::Event { event, data } => Item::Event(event.to_string(), data.to_string()),
        SseItem::BareJson(json) => Item::Bare(json.to_string()),
        SseItem::Comment => Item::Comment,
    }
}

/// Feeds `chunks` one after another, then finishes.
fn parse_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<Item> {
    let mut parser = SseParser::new();
    let mut items = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        items.push(owned(item));
        Ok(())
    };
    for chunk in chunks {
        parser.feed(chunk, &mut on).unwrap();
    }
    parser.finish(&mut on).unwrap();
    items
}

proptest! {
    #[test]
    fn find_eol_matches_a_byte_loop(bytes in prop::collection::vec(prop_oneof![
        Just(b'\n'), Just(b'\r'), Just(0x8a_u8), Just(0x8d_u8), Just(b'a'), Just(0x0b_u8), Just(0x0c_u8), any::<u8>()
    ], 0..40)) {
        let want = bytes.iter().position(|&b| b == b'\n' || b == b'\r');
        prop_assert_eq!(find_eol(&bytes), want);
    }
}

fn parse(body: &[u8]) -> Vec<Item> {
    parse_chunks([body])
}

fn parse_bytewise(body: &[u8]) -> Vec<Item> {
    parse_chunks(body.chunks(1))
}

#[test]
fn openai_chat_lf_frames_and_done() {
    let body = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
    assert_eq!(
        parse(body),
        vec![ev("", "{\"a\":1}"), ev("", "{\"b\":2}"), ev("", "[DONE]")]
    );
}

#[test]
fn anthropic_event_names_and_ping() {
    let body = b"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    assert_eq!(
        parse(body),
        vec![
            ev("message_start", "{\"type\":\"message_start\"}"),
            ev("ping", "{\"type\": \"ping\"}"),
            ev("message_stop", "{\"type\":\"message_stop\"}"),
        ]
    );
}

#[test]
fn gemini_crlf_frames() {
    let body = b"data: {\"candidates\": [{\"index\": 0}]}\r\n\r\ndata: {\"x\": 1}\r\n\r\n";
    assert_eq!(
        parse(body),
        vec![
            ev("", "{\"candidates\": [{\"index\": 0}]}"),
            ev("", "{\"x\": 1}")
        ]
    );
}

#[test]
fn lone_cr_line_endings() {
    assert_eq!(
        parse(b"event: e\rdata: x\r\rdata: y\r\r"),
        vec![ev("e", "x"), ev("", "y")]
    );
}

#[test]
fn crlf_split_between_cr_and_lf_is_one_break() {
    // If the LF were a second line break, the first event would end early and `data: b` would start a new one.
    let items = parse_chunks([&b"data: a\r"[..], b"\ndata: b\r", b"\n\r", b"\n"]);
    assert_eq!(items, vec![ev("", "a\nb")]);
}

#[test]
fn multi_line_data_joined_with_newline() {
    assert_eq!(
        parse(b"data: one\ndata:two\ndata:  three\ndata\n\n"),
        vec![ev("", "one\ntwo\n three\n")]
    );
}

#[test]
fn comments_are_keep_alives_id_retry_ignored_and_no_data_not_dispatched() {
    let body =
        b": OPENROUTER PROCESSING\n\nid: 7\nretry: 1000\n\nevent: lonely\n\ndata: x\nid: 8\n\n";
    // The comment is a keep-alive; the `lonely` event has no data: not dispatched, and its name does not leak into
    // the next event.
    assert_eq!(parse(body), vec![Item::Comment, ev("", "x")]);
}

#[test]
fn empty_data_line_dispatches_empty_string() {
    assert_eq!(parse(b"data:\n\n"), vec![ev("", "")]);
}

#[test]
fn last_event_name_wins() {
    assert_eq!(
        parse(b"event: a\nevent: b\ndata: x\n\n"),
        vec![ev("b", "x")]
    );
}

#[test]
fn bom_at_start_is_dropped() {
    assert_eq!(parse(b"\xEF\xBB\xBFdata: x\n\n"), vec![ev("", "x")]);
    assert_eq!(
        parse_chunks([&b"\xEF"[..], b"\xBB", b"\xBFdata: x\n\n"]),
        vec![ev("", "x")]
    );
}

#[test]
fn utf8_char_split_across_reads() {
    let body = "data: h\u{e9}llo \u{1F600}\n\n".as_bytes();
    let expected = vec![ev("", "h\u{e9}llo \u{1F600}")];
    for split in 0..body.len() {
        assert_eq!(
            parse_chunks([&body[..split], &body[split..]]),
            expected,
            "split at {split}"
        );
    }
}

#[test]
fn invalid_utf8_is_passed_lossily() {
    assert_eq!(
        parse(b"event: \xFFx\ndata: a\xFEb\n\n"),
        vec![ev("\u{FFFD}x", "a\u{FFFD}b")]
    );
    // Same through the buffered path (line assembled across reads).
    assert_eq!(
        parse_chunks([&b"data: a\xFE"[..], b"b\n\n"]),
        vec![ev("", "a\u{FFFD}b")]
    );
}

#[test]
fn gemini_bare_error_after_last_event() {
    let body = b"data: {\"candidates\": []}\r\n\r\n{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded. {Please} try again later.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n";
    let expected = vec![
            ev("", "{\"candidates\": []}"),
            Item::Bare(
                "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded. {Please} try again later.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}"
                    .to_string(),
            ),
        ];
    assert_eq!(parse(body), expected);
    assert_eq!(parse_bytewise(body), expected);
}

#[test]
fn bare_json_braces_in_strings_and_escapes() {
    let body = b"[{\"error\": {\n\"message\": \"a \\\"}\\\" ] b\\\\\"\n}}]\ndata: after\n\n";
    assert_eq!(
        parse(body),
        vec![
            Item::Bare("[{\"error\": {\n\"message\": \"a \\\"}\\\" ] b\\\\\"\n}}]".to_string()),
            ev("", "after"),
        ]
    );
}

#[test]
fn single_line_bare_json() {
    assert_eq!(
        parse(b"  {\"error\":{\"code\":500}}\n"),
        vec![Item::Bare("  {\"error\":{\"code\":500}}".to_string())]
    );
}

#[test]
fn unbalanced_bare_json_flushed_at_finish() {
    assert_eq!(
        parse(b"{\n  \"error\": {\n"),
        vec![Item::Bare("{\n  \"error\": {".to_string())]
    );
}

#[test]
fn unterminated_event_at_eof_is_dispatched() {
    assert_eq!(parse(b"data: [DONE]"), vec![ev("", "[DONE]")]);
    assert_eq!(parse(b"data: x\n"), vec![ev("", "x")]);
    assert_eq!(parse(b"event: e\n"), vec![]);
}

#[test]
fn parser_is_reusable_after_finish() {
    let mut parser = SseParser::new();
    let mut items = Vec::new();
    {
        let mut on = |item: SseItem<'_>| -> Result<(), ()> {
            items.push(owned(item));
            Ok(())
        };
        parser.feed(b"event: a\ndata: 1", &mut on).unwrap();
        parser.finish(&mut on).unwrap();
        parser.feed(b"data: 2\n\n", &mut on).unwrap();
        parser.finish(&mut on).unwrap();
    }
    assert_eq!(items, vec![ev("a", "1"), ev("", "2")]);
}

#[test]
fn callback_error_stops_and_parser_stays_safe() {
    let mut parser = SseParser::new();
    let mut seen = 0;
    let mut on = |_: SseItem<'_>| -> Result<(), &'static str> {
        seen += 1;
        Err("stop")
    };
    assert_eq!(
        parser.feed(b"data: a\n\ndata: b\n\ndata: c", &mut on),
        Err("stop")
    );
    // A later, shorter read must not index into the dropped one.
    let _ = parser.feed(b"\n", &mut on);
    let _ = parser.finish(&mut on);
    assert!(seen >= 1);
}

#[test]
fn hot_path_dispatches_without_copy() {
    let body = b"data: {\"a\":1}\n\n";
    let mut parser = SseParser::new();
    let mut ptr = None;
    parser
        .feed(body, &mut |item| -> Result<(), ()> {
            if let SseItem::Event { data, .. } = item {
                ptr = Some(data.as_ptr());
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(ptr, Some(body[6..].as_ptr()));
}

#[test]
fn buffers_are_reused_across_frames() {
    let mut parser = SseParser::new();
    let mut noop = |_: SseItem<'_>| -> Result<(), ()> { Ok(()) };
    // Warm up with multi-line data split across reads so every buffer is exercised.
    parser
        .feed(b"event: warm\ndata: aaaaaaaaaa\nda", &mut noop)
        .unwrap();
    parser.feed(b"ta: bbbbbbbbbb\n\n", &mut noop).unwrap();
    let caps = (
        parser.data.capacity(),
        parser.event.capacity(),
        parser.partial.capacity(),
    );
    for _ in 0..100 {
        parser.feed(b"event: e\ndata: aaaa\nda", &mut noop).unwrap();
        parser.feed(b"ta: bbbb\n\n", &mut noop).unwrap();
    }
    assert_eq!(
        caps,
        (
            parser.data.capacity(),
            parser.event.capacity(),
            parser.partial.capacity()
        )
    );
}

// ---- property tests ----

/// One piece of a generated stream.
#[derive(Debug, Clone)]
enum Block {
    Event {
        name: Option<String>,
        data: Vec<String>,
        with_id: bool,
    },
    Comment(String),
    Bare {
        code: u16,
        message: String,
    },
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        4 => (
            proptest::option::of("[a-z_.]{1,12}"),
            proptest::collection::vec("\\PC{0,16}", 0..4),
            any::<bool>(),
        )
            .prop_map(|(name, data, with_id)| Block::Event { name, data, with_id }),
        1 => "\\PC{0,12}".prop_map(Block::Comment),
        1 => (100u16..600, "[a-z {}\\[\\]\"\\\\\u{e9}]{0,16}")
            .prop_map(|(code, message)| Block::Bare { code, message }),
    ]
}

/// Line-ending style: 0 = LF, 1 = CRLF, 2 = CR, 3 = mixed per line.
fn render(blocks: &[Block], style: u8, mix: &[u8]) -> (Vec<u8>, Vec<Item>) {
    let mut lines: Vec<String> = Vec::new();
    let mut expected = Vec::new();
    for block in blocks {
        match block {
            Block::Event {
                name,
                data,
                with_id,
            } => {
                if let Some(name) = name {
                    lines.push(format!("event: {name}"));
                }
                if *with_id {
                    lines.push("id: 42".to_string());
                }
                for d in data {
                    lines.push(format!("data: {d}"));
                }
                lines.push(String::new());
                if !data.is_empty() {
                    expected.push(ev(name.as_deref().unwrap_or(""), &data.join("\n")));
                }
            }
            Block::Comment(text) => {
                lines.push(format!(":{text}"));
                expected.push(Item::Comment);
            }
            Block::Bare { code, message } => {
                let message = serde_json::to_string(message).unwrap();
                let bare = [
                    "{".to_string(),
                    "  \"error\": {".to_string(),
                    format!("    \"code\": {code},"),
                    format!("    \"message\": {message}"),
                    "  }".to_string(),
                    "}".to_string(),
                ];
                expected.push(Item::Bare(bare.join("\n")));
                lines.extend(bare);
            }
        }
    }
    let mut body = Vec::new();
    let mut prev_cr = false;
    for (i, line) in lines.iter().enumerate() {
        body.extend_from_slice(line.as_bytes());
        let mut eol = match style {
            3 => mix.get(i % mix.len().max(1)).copied().unwrap_or(0) % 3,
            s => s,
        };
        // After a lone CR, an empty line ended by LF would read as the LF half of a CRLF: use CRLF instead.
        if prev_cr && line.is_empty() && eol == 0 {
            eol = 1;
        }
        body.extend_from_slice(match eol {
            0 => b"\n".as_slice(),
            1 => b"\r\n",
            _ => b"\r",
        });
        prev_cr = eol == 2;
    }
    (body, expected)
}

fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<Item>)> {
    (
        proptest::collection::vec(block(), 0..12),
        0u8..4,
        proptest::collection::vec(any::<u8>(), 1..16),
    )
        .prop_map(|(blocks, style, mix)| render(&blocks, style, &mix))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn whole_stream_yields_expected_items((body, expected) in stream()) {
        prop_assert_eq!(parse(&body), expected);
    }

    #[test]
    fn any_split_equals_whole(
        (body, _) in stream(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..10),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts {
            chunks.push(&body[start..cut]);
            start = cut;
        }
        chunks.push(&body[start..]);
        prop_assert_eq!(parse_chunks(chunks), parse(&body));
    }

    #[test]
    fn bytewise_equals_whole((body, _) in stream()) {
        prop_assert_eq!(parse_bytewise(&body), parse(&body));
    }

    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256), cut in any::<proptest::sample::Index>()) {
        let cut = cut.index(body.len() + 1);
        prop_assert_eq!(parse_chunks([&body[..cut], &body[cut..]]), parse(&body));
    }
}

/// Feeds `reads` to a parser capped at `limit`; returns the items, whether it overflowed, and the largest
/// buffer capacity seen.
fn capped(limit: usize, reads: &[&[u8]]) -> (Vec<Item>, bool, usize) {
    let mut parser = SseParser::with_limit(limit);
    let mut items = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        items.push(owned(item));
        Ok(())
    };
    let mut peak = 0;
    for read in reads {
        parser.feed(read, &mut on).unwrap();
        peak = peak
            .max(parser.partial.capacity())
            .max(parser.data.capacity())
            .max(parser.json.capacity());
    }
    parser.finish(&mut on).unwrap();
    (items, parser.overflowed(), peak)
}

#[test]
fn a_line_longer_than_the_limit_stops_the_parser_with_bounded_memory() {
    let chunk = vec![b'x'; 16 * 1024];
    let mut reads: Vec<&[u8]> = vec![b"data: {\"a\":1}\n\ndata: "];
    // 64 MiB without a newline, against a 1 MiB cap.
    reads.extend(std::iter::repeat_n(chunk.as_slice(), 4096));
    reads.push(b"\n\ndata: {\"b\":2}\n\n");
    let (items, overflowed, peak) = capped(1024 * 1024, &reads);
    assert!(overflowed);
    assert_eq!(
        items,
        vec![ev("", "{\"a\":1}")],
        "nothing after the overflow"
    );
    assert!(peak <= 2 * 1024 * 1024 + chunk.len(), "peak buffer {peak}");
}

#[test]
fn one_read_holding_a_line_over_the_limit_overflows() {
    let mut body = b"data: ".to_vec();
    body.extend(std::iter::repeat_n(b'y', 5000));
    body.extend_from_slice(b"\n\n");
    let (items, overflowed, _) = capped(4096, &[&body]);
    assert!(overflowed);
    assert!(items.is_empty());
}

#[test]
fn many_data_lines_joined_over_the_limit_overflow() {
    let line = format!("data: {}\n", "z".repeat(1000));
    let body = line.repeat(5);
    let (items, overflowed, _) = capped(4096, &[body.as_bytes()]);
    assert!(overflowed);
    assert!(items.is_empty());
    let (items, overflowed, _) = capped(8192, &[body.as_bytes(), b"\n"]);
    assert!(!overflowed);
    assert_eq!(items.len(), 1);
}

#[test]
fn a_bare_json_value_over_the_limit_overflows() {
    let body = format!("{{\n{}\n", "\"k\": 1,\n".repeat(1000));
    let (items, overflowed, _) = capped(4096, &[body.as_bytes()]);
    assert!(overflowed);
    assert!(items.is_empty());
}

#[test]
fn events_up_to_the_limit_pass() {
    let body = format!("data: {}\n\n", "w".repeat(4090));
    let (items, overflowed, _) = capped(4096, &[body.as_bytes()]);
    assert!(!overflowed);
    assert_eq!(items.len(), 1);
}
