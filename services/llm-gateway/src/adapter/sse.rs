//! Incremental Server-Sent Events parser (docs/providers.md §0), written for provider streams.
//!
//! Why our own parser: providers disagree on framing. Gemini ends lines with CRLF, OpenRouter sends `:` comments as
//! keep-alives, and Gemini writes a bare pretty-printed JSON error object *outside* SSE framing after the last event,
//! which a spec-compliant parser silently drops (§4). Network reads split frames at arbitrary bytes, including inside
//! a CRLF pair or a multi-byte UTF-8 character, so the parser keeps only the unfinished line between reads.
//!
//! Hot path: a `data:` line that arrives complete inside one read, followed by its blank line in the same read, is
//! handed to the callback as a slice of the read buffer, with no copy. Everything else goes through a few buffers that
//! are cleared, never reallocated, so after warm-up the parser does not allocate per event.
//!
//! End of body ([`SseParser::finish`]): an unterminated last line is treated as terminated and an event that has data
//! but never saw its closing blank line **is dispatched**. The WHATWG algorithm would discard it; we keep it because
//! some OpenAI-compatible servers end the body without the final blank line, and a frame that was really cut short is
//! still caught: its JSON fails to parse in the decoder, which reports a malformed stream instead of silently losing
//! the tail. A pending (even unbalanced) bare-JSON capture is flushed the same way.
//!
//! Size cap ([`SseParser::with_limit`]): a line, an event's joined data or a bare JSON value longer than the limit
//! stops the parser. It frees its buffers, ignores every later byte and reports [`SseParser::overflowed`], so the
//! transport ends the stream with a typed error. Memory stays below the limit plus one read whatever the provider
//! sends, and every byte is scanned once (the terminator search never revisits the unfinished line).

use std::mem;

/// One item parsed from a provider body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// A dispatched SSE event: `event` is the `event:` name (empty when none was given), `data` the `data:` lines
    /// joined with `\n`.
    Event {
        /// The `event:` field, or empty.
        event: &'a str,
        /// The joined `data:` lines.
        data: &'a str,
    },
    /// A JSON object or array that arrived outside SSE framing (Gemini's mid-stream error), lines joined with `\n`.
    BareJson(&'a str),
}

/// UTF-8 byte-order mark, which the SSE spec says to drop at the start of the stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Where the data of the event being assembled currently lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Data {
    /// No `data:` line yet: a blank line dispatches nothing.
    None,
    /// Exactly one `data:` line, still inside the current read at `start..end`: dispatched without a copy if the
    /// blank line arrives in the same read.
    InInput { start: usize, end: usize },
    /// Copied into `SseParser::data` (several lines, or the read ended before the blank line).
    Buffered,
}

/// Brace balance of a bare JSON capture. Brackets inside JSON strings do not count, and `\"` does not end a string.
/// Scanning bytes is safe for UTF-8: every byte of a multi-byte character is >= 0x80 and never equals a delimiter.
#[derive(Debug, Clone, Copy, Default)]
struct JsonScan {
    depth: i64,
    in_string: bool,
    escaped: bool,
}

impl JsonScan {
    fn scan(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
            } else {
                match b {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => self.depth -= 1,
                    _ => {}
                }
            }
        }
    }

    /// True once every opened bracket is closed. A stray closer (depth below zero) also ends the capture, so a
    /// malformed object cannot swallow the rest of the stream.
    fn balanced(&self) -> bool {
        self.depth <= 0
    }
}

/// Incremental SSE parser: feed it the body as it arrives, in reads of any size.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of a line whose terminator has not arrived yet.
    partial: Vec<u8>,
    /// The previous read ended with CR: an LF at the start of the next read is the second half of that CRLF.
    skip_lf: bool,
    /// No line processed yet, so a leading BOM is still to be dropped.
    at_start: bool,
    /// The `event:` name of the event being assembled.
    event: String,
    /// The joined `data:` lines when `data_state` is `Buffered`.
    data: String,
    data_state: Data,
    /// True while a bare JSON value spans lines.
    capturing: bool,
    /// The lines of the bare JSON being captured.
    json: String,
    scan: JsonScan,
    /// Largest line, event data or bare JSON value accepted.
    limit: usize,
    /// A value went over `limit`: everything else is ignored.
    overflowed: bool,
}

/// The parser's default size cap: the gateway's `limits.max_sse_event_bytes` default.
pub const DEFAULT_LIMIT: usize = 4 * 1024 * 1024;

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser at the start of a body, capped at [`DEFAULT_LIMIT`].
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_LIMIT)
    }

    /// A parser that stops at a line, event or bare JSON value longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        SseParser {
            partial: Vec::new(),
            skip_lf: false,
            at_start: true,
            event: String::new(),
            data: String::new(),
            data_state: Data::None,
            capturing: false,
            json: String::new(),
            scan: JsonScan::default(),
            limit,
            overflowed: false,
        }
    }

    /// True once a line, event or bare JSON value went over the limit; the parser then ignores all input.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The size cap.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Marks the overflow and gives the buffers' memory back.
    fn overflow(&mut self) {
        self.overflowed = true;
        self.partial = Vec::new();
        self.data = String::new();
        self.json = String::new();
        self.event = String::new();
        self.data_state = Data::None;
        self.capturing = false;
    }

    /// True (after marking the overflow) when `len` bytes are over the limit.
    fn over(&mut self, len: usize) -> bool {
        if len > self.limit {
            self.overflow();
        }
        self.overflowed
    }

    /// Feeds one read of the body, calling `on` for every item it completes, in order.
    ///
    /// If `on` returns an error, parsing stops and the error is returned; the rest of this read is dropped, so the
    /// caller should treat the stream as finished.
    pub fn feed<E>(
        &mut self,
        bytes: &[u8],
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.overflowed {
            return Ok(());
        }
        let result = self.feed_lines(bytes, on);
        // A single `data:` line may still point into `bytes`, which the caller is about to drop: copy it out. This
        // runs on the error path too, so the parser never holds a range into a buffer it no longer sees.
        if let Data::InInput { start, end } = self.data_state {
            self.data.clear();
            push_lossy(&mut self.data, bytes.get(start..end).unwrap_or_default());
            self.data_state = Data::Buffered;
        }
        result
    }

    /// Ends the body: processes an unterminated last line, dispatches an event that has data but no closing blank
    /// line, and flushes a pending bare-JSON capture even if it is unbalanced (the decoder reports it as malformed).
    /// The parser is then reset and can parse a new body.
    pub fn finish<E>(
        &mut self,
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.skip_lf = false;
        if self.overflowed {
            return Ok(());
        }
        let mut result = Ok(());
        if !self.partial.is_empty() {
            let line = mem::take(&mut self.partial);
            result = self.line(&[], &line, None, on);
            self.partial = line;
            self.partial.clear();
        }
        if result.is_ok() && self.data_state != Data::None {
            result = self.dispatch(&[], on);
        }
        if result.is_ok() && self.capturing {
            result = on(SseItem::BareJson(&self.json));
        }
        self.event.clear();
        self.data.clear();
        self.data_state = Data::None;
        self.capturing = false;
        self.json.clear();
        self.scan = JsonScan::default();
        self.at_start = true;
        result
    }

    fn feed_lines<E>(
        &mut self,
        bytes: &[u8],
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut pos = 0;
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                pos = 1;
            }
        }
        // Finish the line left over from the previous read: it is the only one that needs copying to get whole.
        if !self.partial.is_empty() {
            match find_eol(&bytes[pos..]) {
                None => {
                    if !self.over(self.partial.len() + bytes.len() - pos) {
                        self.partial.extend_from_slice(&bytes[pos..]);
                    }
                    return Ok(());
                }
                Some(i) => {
                    let eol = pos + i;
                    if self.over(self.partial.len() + i) {
                        return Ok(());
                    }
                    self.partial.extend_from_slice(&bytes[pos..eol]);
                    // Take the buffer out so the line can be borrowed while `self` is mutated; it goes back with
                    // its capacity intact.
                    let line = mem::take(&mut self.partial);
                    let result = self.line(bytes, &line, None, on);
                    self.partial = line;
                    self.partial.clear();
                    pos = self.after_eol(bytes, eol);
                    result?;
                }
            }
        }
        while pos < bytes.len() && !self.overflowed {
            match find_eol(&bytes[pos..]) {
                None => {
                    if !self.over(bytes.len() - pos) {
                        self.partial.extend_from_slice(&bytes[pos..]);
                    }
                    break;
                }
                Some(i) => {
                    let eol = pos + i;
                    if self.over(i) {
                        break;
                    }
                    self.line(bytes, &bytes[pos..eol], Some(pos), on)?;
                    pos = self.after_eol(bytes, eol);
                }
            }
        }
        Ok(())
    }

    /// The index after the line terminator at `eol`, treating CRLF as one terminator even when the read ends
    /// between the CR and the LF.
    fn after_eol(&mut self, bytes: &[u8], eol: usize) -> usize {
        if bytes[eol] == b'\r' {
            match bytes.get(eol + 1) {
                Some(b'\n') => eol + 2,
                Some(_) => eol + 1,
                None => {
                    self.skip_lf = true;
                    eol + 1
                }
            }
        } else {
            eol + 1
        }
    }

    /// Processes one complete line (without its terminator). `input` is the current read; `at` is the line's
    /// offset in it when the line lies inside it (`None` for a line assembled from several reads).
    fn line<E>(
        &mut self,
        input: &[u8],
        mut line: &[u8],
        mut at: Option<usize>,
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.at_start {
            self.at_start = false;
            if let Some(rest) = line.strip_prefix(BOM) {
                line = rest;
                at = at.map(|a| a + BOM.len());
            }
        }
        if self.capturing {
            // Inside a bare JSON value every line belongs to it, whatever it looks like.
            if self.over(self.json.len() + 1 + lossy_len(line)) {
                return Ok(());
            }
            self.json.push('\n');
            push_lossy(&mut self.json, line);
            self.scan.scan(line);
            if self.scan.balanced() {
                self.capturing = false;
                let result = on(SseItem::BareJson(&self.json));
                self.json.clear();
                return result;
            }
            return Ok(());
        }
        let Some(&first) = line.first() else {
            return self.dispatch(input, on);
        };
        if first == b':' {
            // Comment, e.g. OpenRouter's `: OPENROUTER PROCESSING` keep-alive.
            return Ok(());
        }
        if matches!(
            line.iter().find(|b| !matches!(b, b' ' | b'\t')),
            Some(b'{' | b'[')
        ) {
            return self.start_capture(line, on);
        }
        let (field, value_start) = match line.iter().position(|&b| b == b':') {
            Some(colon) if line.get(colon + 1) == Some(&b' ') => (&line[..colon], colon + 2),
            Some(colon) => (&line[..colon], colon + 1),
            // A line with no colon is a field name with an empty value.
            None => (line, line.len()),
        };
        let value = &line[value_start..];
        match field {
            b"data" => match (self.data_state, at) {
                (Data::None, _) if self.over(lossy_len(value)) => {}
                (Data::None, Some(at)) => {
                    self.data_state = Data::InInput {
                        start: at + value_start,
                        end: at + line.len(),
                    };
                }
                (Data::None, None) => {
                    self.data.clear();
                    push_lossy(&mut self.data, value);
                    self.data_state = Data::Buffered;
                }
                (Data::InInput { start, end }, _)
                    if self.over(
                        lossy_len(input.get(start..end).unwrap_or_default()) + 1 + lossy_len(value),
                    ) => {}
                (Data::Buffered, _) if self.over(self.data.len() + 1 + lossy_len(value)) => {}
                (Data::InInput { start, end }, _) => {
                    self.data.clear();
                    push_lossy(&mut self.data, input.get(start..end).unwrap_or_default());
                    self.data.push('\n');
                    push_lossy(&mut self.data, value);
                    self.data_state = Data::Buffered;
                }
                (Data::Buffered, _) => {
                    self.data.push('\n');
                    push_lossy(&mut self.data, value);
                }
            },
            b"event" => {
                self.event.clear();
                push_lossy(&mut self.event, value);
            }
            // `id:` and `retry:` matter only to browsers reconnecting; unknown fields are ignored per spec.
            _ => {}
        }
        Ok(())
    }

    /// Starts a bare JSON capture at `line`. A value complete on one line is dispatched straight from the line.
    fn start_capture<E>(
        &mut self,
        line: &[u8],
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.over(lossy_len(line)) {
            return Ok(());
        }
        self.scan = JsonScan::default();
        self.scan.scan(line);
        if self.scan.balanced()
            && let Ok(text) = std::str::from_utf8(line)
        {
            return on(SseItem::BareJson(text));
        }
        self.json.clear();
        push_lossy(&mut self.json, line);
        if self.scan.balanced() {
            let result = on(SseItem::BareJson(&self.json));
            self.json.clear();
            return result;
        }
        self.capturing = true;
        Ok(())
    }

    /// A blank line: dispatches the assembled event if it has data, then starts a new one.
    fn dispatch<E>(
        &mut self,
        input: &[u8],
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let result = match self.data_state {
            Data::None => Ok(()),
            Data::InInput { start, end } => {
                let raw = input.get(start..end).unwrap_or_default();
                match std::str::from_utf8(raw) {
                    Ok(data) => on(SseItem::Event {
                        event: &self.event,
                        data,
                    }),
                    Err(_) => {
                        self.data.clear();
                        push_lossy(&mut self.data, raw);
                        on(SseItem::Event {
                            event: &self.event,
                            data: &self.data,
                        })
                    }
                }
            }
            Data::Buffered => on(SseItem::Event {
                event: &self.event,
                data: &self.data,
            }),
        };
        self.event.clear();
        self.data.clear();
        self.data_state = Data::None;
        result
    }
}

/// The first line terminator (CR or LF) in `bytes`.
///
/// Eight bytes at a time: this scan touches every byte of the body, and a byte-by-byte loop was three quarters of the
/// parser's instructions (docs/benchmarks.md, "Profiles").
fn find_eol(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut array = [0u8; 8];
        array.copy_from_slice(word);
        let w = u64::from_le_bytes(array);
        let lf = w ^ (ONES * u64::from(b'\n'));
        let cr = w ^ (ONES * u64::from(b'\r'));
        // The usual "has a zero byte" test on each xor: its lowest set bit marks the first match exactly (bits above
        // it may be spurious and are never looked at).
        let found = ((lf.wrapping_sub(ONES) & !lf) | (cr.wrapping_sub(ONES) & !cr)) & HIGHS;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|i| at + i)
}

/// The bytes `bytes` take once appended by [`push_lossy`] (each invalid sequence becomes a 3-byte U+FFFD): what the
/// size cap counts, so a value never grows past the limit in memory and the count does not depend on whether a line
/// was still in the read or already copied out.
fn lossy_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(_) => String::from_utf8_lossy(bytes).len(),
    }
}

/// Appends `bytes` as text; invalid UTF-8 becomes U+FFFD rather than an error, since one bad byte from a provider
/// must not kill the stream.
fn push_lossy(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An owned copy of an item, for comparisons.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Item {
        Event(String, String),
        Bare(String),
    }

    fn ev(event: &str, data: &str) -> Item {
        Item::Event(event.to_string(), data.to_string())
    }

    fn owned(item: SseItem<'_>) -> Item {
        match item {
            SseItem::Event { event, data } => Item::Event(event.to_string(), data.to_string()),
            SseItem::BareJson(json) => Item::Bare(json.to_string()),
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
    fn comments_id_retry_ignored_and_no_data_not_dispatched() {
        let body =
            b": OPENROUTER PROCESSING\n\nid: 7\nretry: 1000\n\nevent: lonely\n\ndata: x\nid: 8\n\n";
        // The `lonely` event has no data: not dispatched, and its name does not leak into the next event.
        assert_eq!(parse(body), vec![ev("", "x")]);
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
                Block::Comment(text) => lines.push(format!(":{text}")),
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
}
