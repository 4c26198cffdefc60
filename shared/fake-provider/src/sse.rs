//! Byte-preserving SSE event splitting and line-ending rewriting.

use bytes::{Bytes, BytesMut};

/// Splits an SSE body after each blank line, keeping every byte.
///
/// A blank line is a line terminator (CRLF, LF or lone CR, as the SSE spec
/// allows) that starts a line. Trailing bytes not closed by a blank line,
/// such as Gemini's bare error JSON after its last event, form a final
/// event. Concatenating the result yields the input exactly.
pub(crate) fn split_events(body: &Bytes) -> Vec<Bytes> {
    let mut events = Vec::new();
    let mut event_start = 0;
    let mut at_line_start = true;
    let mut i = 0;
    while i < body.len() {
        let terminator_len = match body[i] {
            b'\r' if body.get(i + 1) == Some(&b'\n') => 2,
            b'\r' | b'\n' => 1,
            _ => 0,
        };
        if terminator_len == 0 {
            at_line_start = false;
            i += 1;
            continue;
        }
        i += terminator_len;
        if at_line_start {
            events.push(body.slice(event_start..i));
            event_start = i;
        }
        at_line_start = true;
    }
    if event_start < body.len() {
        events.push(body.slice(event_start..));
    }
    events
}

/// Rewrites bare LF to CRLF; existing CRLF pairs are kept, so applying it
/// twice changes nothing.
pub(crate) fn lf_to_crlf(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(body.len() + body.len() / 16);
    let mut prev = 0u8;
    for &b in body {
        if b == b'\n' && prev != b'\r' {
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(&[b]);
        }
        prev = b;
    }
    out.freeze()
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
