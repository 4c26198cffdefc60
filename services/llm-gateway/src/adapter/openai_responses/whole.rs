//! A whole Responses API response (`object: "response"`), as a server that ignores `stream: true` answers, turned
//! into the stream events it is equivalent to: one `response.output_item.done` per output item (each completed item
//! carries its whole text, reasoning or arguments) and the terminal event its `status` names, carrying the response
//! (usage, incomplete details, error). The stream decoder is then the only reader of a Responses answer.

use serde_json::{Value, json};

use crate::adapter::Decoder;
use crate::event::Event;

/// Feeds the response `body` to `decoder` as its stream, then ends it; a body that is not a response goes in as an
/// `error` event, which the decoder classifies as the provider's error (or reports as malformed).
pub(super) fn decode(decoder: &mut dyn Decoder, body: &str, out: &mut Vec<Event>) {
    match frames(body) {
        Some(frames) => {
            for (event, data) in frames {
                decoder.frame(&event, &data, out);
            }
        }
        None => decoder.frame("error", body, out),
    }
    decoder.end(out);
}

/// The `(event, data)` frames equivalent to the response `body`; `None` when `body` is not a response (an error
/// object, or JSON the decoder will report as malformed), which is then fed to the decoder as it is.
fn frames(body: &str) -> Option<Vec<(String, String)>> {
    let Ok(Value::Object(response)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    if response.get("object").and_then(Value::as_str) != Some("response") {
        return None;
    }
    let items = response.get("output").and_then(Value::as_array);
    let mut out: Vec<(String, String)> = items
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(index, item)| {
            let kind = "response.output_item.done";
            let data = json!({"type": kind, "output_index": index, "item": item});
            (kind.to_string(), data.to_string())
        })
        .collect();
    // A status other than these three (a background response still queued or running) names no terminal event:
    // the decoder then reports the body as ending before the response completed.
    let status = response
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed");
    let terminal = format!("response.{status}");
    let data = json!({"type": terminal, "response": Value::Object(response)});
    out.push((terminal, data.to_string()));
    Some(out)
}
