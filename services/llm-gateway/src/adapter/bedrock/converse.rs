//! The non-streaming `Converse` answer → unified events (docs/providers.md §4b, "Converse").
//!
//! Converse answers once, with the whole message: `{"output": {"message": {"role", "content": [block]}},
//! "stopReason", "usage": {…}, "metrics": {…}}`. Each content block is handed to the stream decoder as the deltas
//! ConverseStream would have sent for it (its position as the block id), then the stop and the usage, so both
//! operations give the same events, the same replay metadata and the same finish: one state machine, two framings.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::decode::{
    BedrockDecoder, WireDelta, WireReasoning, WireStart, WireToolDelta, WireToolStart, WireUsage,
};
use crate::adapter::Decoder;
use crate::event::Event;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    output: Option<Output>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Output {
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<Block>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Block {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<ToolUse>,
    #[serde(default)]
    reasoning_content: Option<Reasoning>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse {
    #[serde(default)]
    tool_use_id: String,
    #[serde(default)]
    name: String,
    /// A JSON document (an object for every tool we declare); missing means no arguments.
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reasoning {
    #[serde(default)]
    reasoning_text: Option<ReasoningText>,
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
struct ReasoningText {
    #[serde(default)]
    text: String,
    #[serde(default)]
    signature: Option<String>,
}

/// Decodes the whole Converse answer `json` into `decoder`'s events. A body that is not a Converse answer (no
/// `output.message`, no `stopReason`) is a malformed-response error, as a broken stream frame would be.
pub(super) fn decode(decoder: &mut BedrockDecoder, json: &str, out: &mut Vec<Event>) {
    let response: Response = match serde_json::from_str(json) {
        Ok(r) => r,
        Err(e) => return decoder.malformed(format!("Converse response: {e}"), json, out),
    };
    let Some(message) = response.output.and_then(|o| o.message) else {
        return decoder.malformed(
            "a Converse response without output.message".into(),
            json,
            out,
        );
    };
    let Some(stop_reason) = response.stop_reason else {
        return decoder.malformed("a Converse response without stopReason".into(), json, out);
    };
    for (index, block) in (0u64..).zip(message.content) {
        feed_block(decoder, index, block, json, out);
        if decoder.is_done() {
            return;
        }
        decoder.close(index, out);
    }
    decoder.stopped(stop_reason, out);
    decoder.finish(response.usage.unwrap_or_default(), out);
}

/// One content block as the stream's deltas. Blocks without anything to show (citations, images) open nothing.
fn feed_block(
    decoder: &mut BedrockDecoder,
    index: u64,
    block: Block,
    json: &str,
    out: &mut Vec<Event>,
) {
    let delta = |text, tool_use, reasoning_content| WireDelta {
        text,
        tool_use,
        reasoning_content,
    };
    if let Some(text) = block.text.filter(|t| !t.is_empty()) {
        decoder.delta(index, delta(Some(text), None, None), json, out);
    } else if let Some(tool) = block.tool_use {
        let start = WireStart {
            tool_use: Some(WireToolStart {
                tool_use_id: Cow::Owned(tool.tool_use_id),
                name: Cow::Owned(tool.name),
            }),
        };
        decoder.start(index, start, json, out);
        if decoder.is_done() {
            return;
        }
        let input = tool
            .input
            .map_or_else(|| "{}".to_string(), |v| v.to_string());
        let fragment = WireToolDelta { input };
        decoder.delta(index, delta(None, Some(fragment), None), json, out);
    } else if let Some(r) = block.reasoning_content {
        let (text, signature) = r
            .reasoning_text
            .map_or((None, None), |t| (Some(t.text), t.signature));
        let reasoning = WireReasoning {
            text,
            signature,
            redacted_content: r.redacted_content,
        };
        decoder.delta(index, delta(None, None, Some(reasoning)), json, out);
    }
}

#[cfg(test)]
#[path = "converse_tests.rs"]
mod tests;
