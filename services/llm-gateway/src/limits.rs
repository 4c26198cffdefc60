//! `[limits]`: how much one request and one provider stream may hold. Each limit is checked in one pass over the
//! input (linear time) and before any provider work, or mid-stream for the provider's side.

use serde::Deserialize;

use crate::event::Event;
use crate::settings::ConfigError;

/// `[limits]`, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsFile {
    /// Largest SSE line, event (its joined `data:` lines) or bare JSON value a provider may send.
    pub max_sse_event_bytes: usize,
    /// Largest text, reasoning or tool-argument delta sent to the caller in one message; larger ones are split.
    pub max_delta_bytes: usize,
    /// Tools per request.
    pub max_tools: usize,
    /// Bytes of all tool input schemas of a request together.
    pub max_tool_schema_bytes: usize,
    /// Messages per request.
    pub max_messages: usize,
    /// Parts per request, over all messages.
    pub max_parts: usize,
}

impl Default for LimitsFile {
    fn default() -> Self {
        let l = Limits::default();
        LimitsFile {
            max_sse_event_bytes: l.max_sse_event_bytes,
            max_delta_bytes: l.max_delta_bytes,
            max_tools: l.max_tools,
            max_tool_schema_bytes: l.max_tool_schema_bytes,
            max_messages: l.max_messages,
            max_parts: l.max_parts,
        }
    }
}

/// The validated limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// See [`LimitsFile::max_sse_event_bytes`].
    pub max_sse_event_bytes: usize,
    /// See [`LimitsFile::max_delta_bytes`].
    pub max_delta_bytes: usize,
    /// See [`LimitsFile::max_tools`].
    pub max_tools: usize,
    /// See [`LimitsFile::max_tool_schema_bytes`].
    pub max_tool_schema_bytes: usize,
    /// See [`LimitsFile::max_messages`].
    pub max_messages: usize,
    /// See [`LimitsFile::max_parts`].
    pub max_parts: usize,
}

impl Default for Limits {
    /// 4 MiB per SSE event, 16 KiB per delta, 1024 tools with 4 MiB of schemas, 10 000 messages, 100 000 parts.
    fn default() -> Self {
        Limits {
            max_sse_event_bytes: 4 * 1024 * 1024,
            max_delta_bytes: 16 * 1024,
            max_tools: 1024,
            max_tool_schema_bytes: 4 * 1024 * 1024,
            max_messages: 10_000,
            max_parts: 100_000,
        }
    }
}

impl LimitsFile {
    /// Checks every limit is positive (a delta limit of at least 64 bytes, so a split never cuts inside one UTF-8
    /// character more than once per piece).
    pub fn validate(&self) -> Result<Limits, ConfigError> {
        let positive = |key: &str, v: usize, min: usize| {
            if v < min {
                Err(ConfigError::new(
                    format!("limits.{key}"),
                    format!("must be at least {min}"),
                ))
            } else {
                Ok(v)
            }
        };
        Ok(Limits {
            max_sse_event_bytes: positive("max_sse_event_bytes", self.max_sse_event_bytes, 1024)?,
            max_delta_bytes: positive("max_delta_bytes", self.max_delta_bytes, 64)?,
            max_tools: positive("max_tools", self.max_tools, 1)?,
            max_tool_schema_bytes: positive(
                "max_tool_schema_bytes",
                self.max_tool_schema_bytes,
                1,
            )?,
            max_messages: positive("max_messages", self.max_messages, 1)?,
            max_parts: positive("max_parts", self.max_parts, 1)?,
        })
    }
}

/// Longest caller-supplied value echoed back in an error (message, `BadRequest` field, `ErrorInfo` metadata), in
/// bytes. gRPC clients read at most 8–16 KiB of metadata; an error naming a 100 000-character id must stay readable.
pub const MAX_ECHO_BYTES: usize = 256;

/// `value` cut to [`MAX_ECHO_BYTES`] at a character boundary, with `…` and the full length when cut.
pub fn echo(value: &str) -> std::borrow::Cow<'_, str> {
    if value.len() <= MAX_ECHO_BYTES {
        return std::borrow::Cow::Borrowed(value);
    }
    let kept = crate::error::truncate(value, MAX_ECHO_BYTES);
    std::borrow::Cow::Owned(format!("{kept}…({} bytes)", value.len()))
}

/// Splits `delta` into pieces of at most `max` bytes, cut at character boundaries. A `max` below 4 is treated as 4
/// so every character fits.
pub fn split_delta(delta: &str, max: usize) -> Vec<&str> {
    let max = max.max(4);
    let mut pieces = Vec::with_capacity(delta.len() / max + 1);
    let mut rest = delta;
    while rest.len() > max {
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        pieces.push(head);
        rest = tail;
    }
    pieces.push(rest);
    pieces
}

/// `ev`, with a text, reasoning or tool-argument delta over `max` bytes split into several deltas of the same block,
/// each passed to `out` in order. Every other event (and every small delta) is passed on as is.
pub fn split_event(ev: Event, max: usize, mut out: impl FnMut(Event)) {
    let (id, delta, make): (String, String, fn(String, String) -> Event) = match ev {
        Event::TextDelta { id, delta } if delta.len() > max => {
            (id, delta, |id, delta| Event::TextDelta { id, delta })
        }
        Event::ReasoningDelta { id, delta } if delta.len() > max => {
            (id, delta, |id, delta| Event::ReasoningDelta { id, delta })
        }
        Event::ToolInputDelta { call_id, delta } if delta.len() > max => {
            (call_id, delta, |call_id, delta| Event::ToolInputDelta {
                call_id,
                delta,
            })
        }
        other => return out(other),
    };
    for piece in split_delta(&delta, max) {
        out(make(id.clone(), piece.to_string()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
#[path = "limits_tests.rs"]
mod tests;
