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
    /// A comment line (`: …`): a keep-alive, such as OpenRouter's `: OPENROUTER PROCESSING`.
    Comment,
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
            return self.continue_capture(line, on);
        }
        let Some(&first) = line.first() else {
            return self.dispatch(input, on);
        };
        if first == b':' {
            // Comment, e.g. OpenRouter's `: OPENROUTER PROCESSING` keep-alive.
            return on(SseItem::Comment);
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
            b"data" => self.data_line(input, line, value_start, at),
            b"event" => {
                self.event.clear();
                push_lossy(&mut self.event, value);
            }
            // `id:` and `retry:` matter only to browsers reconnecting; unknown fields are ignored per spec.
            _ => {}
        }
        Ok(())
    }

    /// A `data:` line, its value from `value_start` (`at` and `input` as for [`Self::line`]): kept as a range of the
    /// read while it is the event's only data line, buffered once a second line joins it or when the line was
    /// assembled from several reads.
    fn data_line(&mut self, input: &[u8], line: &[u8], value_start: usize, at: Option<usize>) {
        let value = &line[value_start..];
        match (self.data_state, at) {
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
        }
    }

    /// A line inside a bare JSON value: every line belongs to it, whatever it looks like. Dispatches the value once
    /// its brackets balance.
    fn continue_capture<E>(
        &mut self,
        line: &[u8],
        on: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
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
#[path = "sse_tests.rs"]
mod tests;
