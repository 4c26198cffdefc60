//! A whole Messages API response (`type: "message"`), as a server that ignores `stream: true` answers, turned into
//! the stream events it is equivalent to, so the stream decoder is the only reader of an Anthropic answer.
//!
//! Each content block becomes its `content_block_start` (which carries a text or thinking block's whole text) and
//! `content_block_stop`, with a `signature_delta` for a thinking block's signature and one `input_json_delta` for a
//! tool call's input; the message's usage and stop reason go on `message_start` and `message_delta`.

use serde_json::{Value, json};

use crate::adapter::Decoder;
use crate::event::Event;

/// Feeds the message `body` to `decoder` as its stream, then ends it; a body that is not a message goes in as one
/// frame, which the decoder classifies as the provider's error (or reports as malformed).
pub(super) fn decode(decoder: &mut dyn Decoder, body: &str, out: &mut Vec<Event>) {
    match frames(body) {
        Some(frames) => {
            for (event, data) in frames {
                decoder.frame(event, &data, out);
            }
        }
        None => decoder.frame("", body, out),
    }
    decoder.end(out);
}

/// The `(event, data)` frames equivalent to the message `body`; `None` when `body` is not a message (an error
/// object, or JSON the decoder will report as malformed), which is then fed to the decoder as it is.
fn frames(body: &str) -> Option<Vec<(&'static str, String)>> {
    let Ok(Value::Object(message)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    if message.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let usage = message.get("usage").cloned().unwrap_or(Value::Null);
    let mut out = vec![(
        "message_start",
        json!({
            "type": "message_start",
            "message": {
                "id": message.get("id"),
                "type": "message",
                "role": "assistant",
                "model": message.get("model"),
                "content": [],
                "usage": usage,
            },
        }),
    )];
    let blocks = message.get("content").and_then(Value::as_array);
    for (index, block) in blocks.into_iter().flatten().enumerate() {
        out.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        let delta = match block.get("type").and_then(Value::as_str) {
            Some("thinking") => block
                .get("signature")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| json!({"type": "signature_delta", "signature": s})),
            Some("tool_use") => block.get("input").map(
                |input| json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            ),
            _ => None,
        };
        if let Some(delta) = delta {
            out.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    out.push((
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {
                "stop_reason": message.get("stop_reason"),
                "stop_sequence": message.get("stop_sequence"),
            },
            "usage": usage,
        }),
    ));
    out.push(("message_stop", json!({"type": "message_stop"})));
    Some(
        out.into_iter()
            .map(|(event, data)| (event, data.to_string()))
            .collect(),
    )
}
