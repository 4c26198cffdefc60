//! The fast path for the chunk almost every event of a stream is: one choice whose delta is only text.

use crate::adapter::framing::json_scan::{Cursor, decode_opt, frame_object, once, once_decode};
use std::borrow::Cow;

/// The chunk almost every event of a stream is: one choice whose delta is only text, no finish reason, no usage
/// (`{"id":…,"model":…,"choices":[{"index":0,"delta":{"content":"…"},"finish_reason":null}],"usage":null,…}`).
///
/// [`TextChunk::recognise`] reads it in one pass over the frame with the validating [`Cursor`], borrowing the
/// strings; any other shape (reasoning, tool calls, a refusal, a finish reason, usage, an error, a second choice, a
/// duplicate or escaped key, malformed JSON) is left to the full parse, which is what decides those cases. Fields the
/// full parse ignores are skipped here too, after the same validation.
#[derive(Debug, PartialEq)]
pub(super) struct TextChunk<'a> {
    pub(super) id: Option<Cow<'a, str>>,
    pub(super) model: Option<Cow<'a, str>>,
    /// The delta's text, if it had a `content` string.
    pub(super) content: Option<Cow<'a, str>>,
}

impl<'a> TextChunk<'a> {
    pub(super) fn recognise(data: &'a str) -> Option<Self> {
        let mut chunk = TextChunk {
            id: None,
            model: None,
            content: None,
        };
        let (mut id, mut model, mut choices, mut usage) = (false, false, false, false);
        frame_object(data, |c, key| {
            match key.plain()? {
                "id" => chunk.id = once_decode(&mut id, c)?,
                "model" => chunk.model = once_decode(&mut model, c)?,
                "choices" => {
                    once(&mut choices)?;
                    let mut n = 0;
                    c.array(|c| {
                        n += 1;
                        if n > 1 {
                            return None;
                        }
                        chunk.content = text_choice(c)?;
                        Some(())
                    })?;
                }
                "usage" => {
                    once(&mut usage)?;
                    c.null()?;
                }
                "error" => return None,
                _ => c.skip()?,
            }
            Some(())
        })?;
        Some(chunk)
    }
}

/// True if the fast path recognises `data` (for the tests that check it is really taken).
#[cfg(test)]
pub(super) fn fast_path_takes(data: &str) -> bool {
    TextChunk::recognise(data.trim()).is_some()
}

/// The single choice of a text chunk: index 0 (or none), a delta with only `content` (and fields the full parse
/// ignores, or nulls), no finish reason. Returns the content.
pub(super) fn text_choice<'a>(c: &mut Cursor<'a>) -> Option<Option<Cow<'a, str>>> {
    let mut content = None;
    let (mut index, mut delta, mut finish) = (false, false, false);
    c.object(|c, key| {
        match key.plain()? {
            "index" => {
                once(&mut index)?;
                // Another index makes the full parse skip the choice; rare enough to leave to it.
                if c.opt_u64()?.unwrap_or(0) != 0 {
                    return None;
                }
            }
            "delta" => {
                once(&mut delta)?;
                if !c.take_null() {
                    content = text_delta(c)?;
                }
            }
            "finish_reason" => {
                once(&mut finish)?;
                c.null()?;
            }
            _ => c.skip()?,
        }
        Some(())
    })?;
    Some(content)
}

/// A delta object whose only meaningful field is `content` (a string or null); the other fields the full parse
/// reads must be absent or null.
pub(super) fn text_delta<'a>(c: &mut Cursor<'a>) -> Option<Option<Cow<'a, str>>> {
    let mut content = None;
    let mut seen = [false; 6];
    c.object(|c, key| {
        let slot = match key.plain()? {
            "content" => 0,
            "reasoning_content" => 1,
            "reasoning" => 2,
            "reasoning_details" => 3,
            "refusal" => 4,
            "tool_calls" => 5,
            _ => return c.skip(),
        };
        once(&mut seen[slot])?;
        if slot == 0 {
            content = decode_opt(c)?;
            Some(())
        } else {
            c.null()
        }
    })?;
    Some(content)
}
