//! ConverseStream eventstream messages → unified events (docs/providers.md "Bedrock").
//!
//! Each message is an event (`:message-type: event`, named by `:event-type`, JSON payload), an exception
//! (`:message-type: exception`, named by `:exception-type`, payload `{"message": …}`) or an error (`:error-code`,
//! `:error-message` headers). Block ids are the API's `contentBlockIndex`; text and reasoning blocks have no
//! `contentBlockStart` and open with their first delta; tool blocks open at `contentBlockStart.start.toolUse`. The
//! stream ends with `messageStop` (the stop reason) then `metadata` (usage), where the `Finish` goes out.

use std::borrow::Cow;

use serde::Deserialize;

use crate::adapter::Decoder;
use crate::adapter::common::blocks::{Block, OpenBlocks};
use crate::adapter::framing::eventstream::Message;
use crate::adapter::transport::classify::classify;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Finish, FinishReason, Usage};

/// Decoder state for one ConverseStream response.
#[derive(Debug)]
pub struct BedrockDecoder {
    pub(super) blocks: OpenBlocks,
    stop_reason: Option<String>,
    done: bool,
}

impl Default for BedrockDecoder {
    fn default() -> Self {
        BedrockDecoder {
            // What the request builder reads back from a redacted block's metadata.
            blocks: OpenBlocks::new("redacted"),
            stop_reason: None,
            done: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEvent<'a> {
    #[serde(default)]
    content_block_index: Option<u64>,
    #[serde(borrow, default)]
    start: Option<WireStart<'a>>,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireStart<'a> {
    #[serde(borrow, default)]
    pub(super) tool_use: Option<WireToolStart<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireToolStart<'a> {
    #[serde(borrow, default)]
    pub(super) tool_use_id: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) name: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireDelta {
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) tool_use: Option<WireToolDelta>,
    #[serde(default)]
    pub(super) reasoning_content: Option<WireReasoning>,
}

#[derive(Deserialize)]
pub(super) struct WireToolDelta {
    #[serde(default)]
    pub(super) input: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireReasoning {
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) signature: Option<String>,
    #[serde(default)]
    pub(super) redacted_content: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: u64,
    #[serde(default)]
    pub(super) output_tokens: u64,
    #[serde(default)]
    pub(super) cache_read_input_tokens: u64,
    #[serde(default)]
    pub(super) cache_write_input_tokens: u64,
}

/// Maps `stopReason` to the unified reason.
fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// An exception message as a unified error. The kind comes from the exception type, except that a context
/// overflow is recognised from the message whatever the type (Bedrock reports it as a `validationException`).
pub fn exception(kind: &str, payload: &str) -> ProviderError {
    let mut err = classify(None, None, payload);
    if err.kind == ErrorKind::ContextOverflow {
        return err;
    }
    let lower = kind.to_ascii_lowercase();
    let (kind, retryable) = match lower.trim_end_matches("exception") {
        "throttling" | "toomanyrequests" => (ErrorKind::RateLimited, true),
        "servicequotaexceeded" => (ErrorKind::RateLimited, false),
        "serviceunavailable" | "modelnotready" => (ErrorKind::Overloaded, true),
        "modeltimeout" => (ErrorKind::Timeout, true),
        "internalserver" | "modelstreamerror" => (ErrorKind::ProviderError, true),
        "validation" | "resourcenotfound" | "modelerror" => (ErrorKind::InvalidRequest, false),
        "accessdenied" | "unrecognizedclient" | "expiredtoken" => (ErrorKind::Auth, false),
        _ => (ErrorKind::ProviderError, true),
    };
    err.kind = kind;
    err.retryable = retryable;
    if err.message.starts_with("HTTP") || err.message.is_empty() {
        err.message = format!("Bedrock {lower}");
    }
    err
}

impl BedrockDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn fail(&mut self, err: ProviderError, out: &mut Vec<Event>) {
        self.done = true;
        out.push(Event::Error(err));
    }

    pub(super) fn malformed(&mut self, what: String, data: &str, out: &mut Vec<Event>) {
        let mut err = ProviderError::malformed(format!("malformed Bedrock stream: {what}"));
        err.provider_body = data.to_string();
        self.fail(err, out);
    }

    pub(super) fn start(
        &mut self,
        index: u64,
        start: WireStart<'_>,
        data: &str,
        out: &mut Vec<Event>,
    ) {
        let Some(tool) = start.tool_use else {
            return;
        };
        if tool.tool_use_id.is_empty() || tool.name.is_empty() {
            return self.malformed("a toolUse start without id or name".into(), data, out);
        }
        if self.blocks.contains(index) || self.blocks.stopped(index) {
            return self.malformed(format!("content block {index} started twice"), data, out);
        }
        out.push(Event::ToolInputStart {
            call_id: tool.tool_use_id.to_string(),
            tool: tool.name.to_string(),
        });
        self.blocks.insert(
            index,
            Block::Tool {
                id: tool.tool_use_id.into_owned(),
                name: tool.name.into_owned(),
                input: String::new(),
            },
        );
    }

    pub(super) fn delta(&mut self, index: u64, d: WireDelta, data: &str, out: &mut Vec<Event>) {
        let id = || index.to_string();
        if self.blocks.stopped(index) {
            return self.malformed(
                format!("delta for content block {index} after its stop"),
                data,
                out,
            );
        }
        if let Some(text) = d.text {
            let block = self.blocks.get_or_open(index, || {
                out.push(Event::TextStart { id: id() });
                Block::Text
            });
            if !matches!(block, Block::Text) {
                return self.malformed(format!("text delta in non-text block {index}"), data, out);
            }
            if !text.is_empty() {
                out.push(Event::TextDelta {
                    id: id(),
                    delta: text,
                });
            }
        } else if let Some(r) = d.reasoning_content {
            let block = self.blocks.get_or_open(index, || {
                out.push(Event::ReasoningStart { id: id() });
                Block::reasoning()
            });
            let Block::Reasoning {
                signature,
                redacted,
            } = block
            else {
                return self.malformed(format!("reasoning delta in block {index}"), data, out);
            };
            signature.push_str(r.signature.as_deref().unwrap_or(""));
            redacted.push_str(r.redacted_content.as_deref().unwrap_or(""));
            if let Some(text) = r.text.filter(|t| !t.is_empty()) {
                out.push(Event::ReasoningDelta {
                    id: id(),
                    delta: text,
                });
            }
        } else if let Some(t) = d.tool_use {
            let Some(Block::Tool { id, input, .. }) = self.blocks.get_mut(index) else {
                return self.malformed(
                    format!("toolUse delta for block {index}, which is not an open tool block"),
                    data,
                    out,
                );
            };
            if !t.input.is_empty() {
                input.push_str(&t.input);
                out.push(Event::ToolInputDelta {
                    call_id: id.clone(),
                    delta: t.input,
                });
            }
        }
    }

    /// The message stopped for `reason` (`messageStop`); the finish follows with the usage.
    pub(super) fn stopped(&mut self, reason: String, out: &mut Vec<Event>) {
        self.blocks.close_all(out);
        self.stop_reason = Some(reason);
    }

    pub(super) fn finish(&mut self, usage: WireUsage, out: &mut Vec<Event>) {
        self.blocks.close_all(out);
        let raw_reason = self.stop_reason.take().unwrap_or_default();
        let mut reason = finish_reason(&raw_reason);
        if reason == FinishReason::Stop && self.blocks.saw_tool_call() {
            reason = FinishReason::ToolCalls;
        }
        self.done = true;
        out.push(Event::Finish(Finish {
            reason,
            raw_reason,
            // `inputTokens` excludes the cached prompt tokens, which are reported apart; reasoning tokens are not
            // reported apart (they are inside `outputTokens`).
            usage: Usage {
                input: usage.input_tokens,
                cache_read: usage.cache_read_input_tokens,
                cache_write: usage.cache_write_input_tokens,
                output: usage.output_tokens,
                reasoning: 0,
            },
            response_id: String::new(),
            response_model: String::new(),
        }));
    }
}

impl Decoder for BedrockDecoder {
    fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        let ev: WireEvent<'_> = match serde_json::from_str(data) {
            Ok(ev) => ev,
            Err(e) if is_known(event) => {
                return self.malformed(format!("`{event}` event: {e}"), data, out);
            }
            Err(_) => return,
        };
        let index = ev.content_block_index;
        match (event, index) {
            ("messageStart", _) => {}
            ("contentBlockStart", Some(i)) => {
                if let Some(start) = ev.start {
                    self.start(i, start, data, out);
                }
            }
            ("contentBlockDelta", Some(i)) => {
                if let Some(d) = ev.delta {
                    self.delta(i, d, data, out);
                }
            }
            ("contentBlockStop", Some(i)) => self.blocks.close(i, out),
            ("contentBlockStart" | "contentBlockDelta" | "contentBlockStop", None) => {
                self.malformed(format!("`{event}` without contentBlockIndex"), data, out);
            }
            ("messageStop", _) => self.stopped(ev.stop_reason.unwrap_or_default(), out),
            ("metadata", _) => self.finish(ev.usage.unwrap_or_default(), out),
            // Event types newer than this adapter.
            _ => {}
        }
    }

    /// The one JSON answer of the non-streaming `Converse`.
    /// `Converse`'s response (the non-streaming call made for structured output, or a `ConverseStream` a proxy
    /// answered whole).
    fn whole(&mut self, json: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        super::converse::decode(self, json, out);
    }

    fn message(&mut self, message: &Message<'_>, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        let Ok(payload) = std::str::from_utf8(message.payload) else {
            return self.malformed("a payload is not UTF-8".into(), "", out);
        };
        match message.header_str(":message-type") {
            Some("event") | None => {
                let kind = message.header_str(":event-type").unwrap_or("");
                self.frame(kind, payload, out);
            }
            Some("exception") => {
                let kind = message.header_str(":exception-type").unwrap_or("");
                self.fail(exception(kind, payload), out);
            }
            Some(other) => {
                let code = message.header_str(":error-code").unwrap_or(other);
                let text = message.header_str(":error-message").unwrap_or("");
                let body = serde_json::json!({ "message": text }).to_string();
                self.fail(exception(code, &body), out);
            }
        }
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        if self.stop_reason.is_some() {
            // `metadata` (usage) is missing but the message did stop: a complete answer without usage.
            return self.finish(WireUsage::default(), out);
        }
        self.fail(ProviderError::cut_before("messageStop"), out);
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(BedrockDecoder::new())
    }
}

fn is_known(kind: &str) -> bool {
    matches!(
        kind,
        "messageStart"
            | "contentBlockStart"
            | "contentBlockDelta"
            | "contentBlockStop"
            | "messageStop"
            | "metadata"
    )
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
