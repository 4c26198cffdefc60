//! Stream decoder: `streamGenerateContent?alt=sse` chunks → unified [`Event`]s (docs/providers.md §4 "Chunks").
//!
//! Gemini names no events: every `data:` frame is a whole `GenerateContentResponse`, and the stream simply ends
//! when the connection closes, the last chunk carrying `finishReason`. Chunks are parsed into small borrowed structs
//! (no `serde_json::Value` walk except for function arguments, which are re-serialised anyway).

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::ReplayMetadata;
use super::partial_args::PartialArg;
use crate::adapter::Decoder;
use crate::adapter::framing::json_scan::{
    Cursor, ResponseIdentity, decode_opt, frame_object, once, once_decode,
};
use crate::adapter::transport::classify::{MAX_PROVIDER_BODY, classify, truncate};
use crate::error::ProviderError;
use crate::event::{Event, Finish, FinishReason, Usage};

#[path = "decode_calls.rs"]
mod calls;
use calls::StreamedCall;

/// Decodes one Gemini stream.
///
/// Block ids are running counters per kind: text blocks `t0`, `t1`, … and reasoning blocks `r0`, `r1`, …. A block
/// closes when content of another kind arrives (a function call, text after thoughts, thoughts after text) or at
/// the end. A function call arrives whole in one part, so its four events (`ToolInputStart`, one `ToolInputDelta`
/// with the serialised arguments, `ToolInputEnd`, `ToolCall`) are pushed at once. Its id is Gemini's
/// `functionCall.id` when present, else `call_<responseId>_<n>` (`call_<n>` before any `responseId`), `n` counting
/// the calls of this stream: deterministic for a given stream, and unique across the steps of a conversation
/// because every response has its own id.
///
/// Where thought signatures go is described in the module docs of [`super`].
#[derive(Debug)]
pub struct GeminiDecoder {
    done: bool,
    /// The response id and model, from the first chunk that has them.
    response: ResponseIdentity,
    /// Id of the open text block.
    text: Option<String>,
    text_blocks: u32,
    /// The open reasoning block.
    reasoning: Option<Reasoning>,
    reasoning_blocks: u32,
    /// Function calls seen so far, for synthesized ids and the `STOP` → tool calls rule.
    calls: u32,
    /// Ids of the calls handed out, so a provider id used twice is refused instead of passed on.
    call_ids: Vec<String>,
    /// The Vertex call whose arguments are still streaming in (`partialArgs`).
    streamed: Option<Box<StreamedCall>>,
    /// The raw `finishReason` of the first candidate, once a chunk carried one.
    finish_reason: Option<String>,
    /// `promptFeedback.blockReason` of a chunk without candidates: the prompt itself was refused.
    block_reason: Option<String>,
    /// The latest `usageMetadata` (each chunk carries running totals), normalised.
    usage: Option<Usage>,
    /// Try [`TextChunk::recognise`] before the full parse (off only in tests that compare the two paths).
    fast: bool,
}

impl Default for GeminiDecoder {
    fn default() -> Self {
        GeminiDecoder {
            done: false,
            response: ResponseIdentity::default(),
            text: None,
            text_blocks: 0,
            reasoning: None,
            reasoning_blocks: 0,
            calls: 0,
            call_ids: Vec::new(),
            streamed: None,
            finish_reason: None,
            block_reason: None,
            usage: None,
            fast: true,
        }
    }
}

/// An open reasoning block.
#[derive(Debug)]
struct Reasoning {
    id: String,
    /// The signature of one of its parts, handed out on `ReasoningEnd`.
    signature: Option<String>,
}

impl GeminiDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder that always takes the full parse, for tests comparing it with the fast path.
    #[cfg(test)]
    pub(super) fn without_fast_path() -> Self {
        GeminiDecoder {
            fast: false,
            ..Self::default()
        }
    }

    /// A chunk the fast path recognised: what [`chunk`](Self::chunk) does with the same chunk.
    fn text_chunk(&mut self, chunk: TextChunk<'_>, out: &mut Vec<Event>) {
        self.response.offer(chunk.response_id, chunk.model_version);
        for part in chunk.parts.iter().take(chunk.len) {
            let text = part.text.as_deref().unwrap_or_default();
            if part.thought == Some(true) {
                self.thought(text, None, out);
            } else {
                self.text(text, None, out);
            }
        }
        if let Some(u) = &chunk.usage {
            self.usage = Some(normalize_usage(u));
        }
    }

    fn fail(&mut self, err: ProviderError, out: &mut Vec<Event>) {
        self.done = true;
        out.push(Event::Error(err));
    }

    fn malformed(&mut self, err: &serde_json::Error, data: &str, out: &mut Vec<Event>) {
        let mut e = ProviderError::malformed(format!("malformed Gemini stream chunk: {err}"));
        e.provider_body = truncate(data, MAX_PROVIDER_BODY).to_string();
        self.fail(e, out);
    }

    fn close_text(&mut self, out: &mut Vec<Event>) {
        if let Some(id) = self.text.take() {
            out.push(Event::TextEnd { id });
        }
    }

    fn close_reasoning(&mut self, out: &mut Vec<Event>) {
        if let Some(r) = self.reasoning.take() {
            out.push(Event::ReasoningEnd {
                id: r.id,
                metadata: signature_metadata(r.signature),
            });
        }
    }

    fn next_reasoning_id(&mut self) -> String {
        let id = format!("r{}", self.reasoning_blocks);
        self.reasoning_blocks += 1;
        id
    }

    /// A thought part: text into the open reasoning block (opened after any text block), its signature kept for
    /// the block's end. A second signature starts a new block, so none is lost.
    fn thought(&mut self, text: &str, signature: Option<String>, out: &mut Vec<Event>) {
        if text.is_empty() && signature.is_none() {
            return;
        }
        self.close_text(out);
        if signature.is_some()
            && self
                .reasoning
                .as_ref()
                .is_some_and(|r| r.signature.is_some())
        {
            self.close_reasoning(out);
        }
        if self.reasoning.is_none() {
            let id = self.next_reasoning_id();
            out.push(Event::ReasoningStart { id: id.clone() });
            self.reasoning = Some(Reasoning {
                id,
                signature: None,
            });
        }
        let Some(r) = self.reasoning.as_mut() else {
            return;
        };
        if !text.is_empty() {
            out.push(Event::ReasoningDelta {
                id: r.id.clone(),
                delta: text.to_string(),
            });
        }
        if signature.is_some() {
            r.signature = signature;
        }
    }

    /// A visible text part (possibly empty), and the signature some text parts carry.
    fn text(&mut self, text: &str, signature: Option<String>, out: &mut Vec<Event>) {
        if !text.is_empty() {
            self.close_reasoning(out);
            let id = match &self.text {
                Some(id) => id.clone(),
                None => {
                    let id = format!("t{}", self.text_blocks);
                    self.text_blocks += 1;
                    out.push(Event::TextStart { id: id.clone() });
                    self.text = Some(id.clone());
                    id
                }
            };
            out.push(Event::TextDelta {
                id,
                delta: text.to_string(),
            });
        }
        let Some(signature) = signature else { return };
        match &mut self.reasoning {
            // The usual `{"text": "", "thoughtSignature": …}` right after the thoughts: it signs them.
            Some(r) if text.is_empty() && r.signature.is_none() => r.signature = Some(signature),
            _ => {
                // No block can take it: it becomes a reasoning block of its own, with no text, in stream order.
                self.close_text(out);
                self.close_reasoning(out);
                let id = self.next_reasoning_id();
                out.push(Event::ReasoningStart { id: id.clone() });
                out.push(Event::ReasoningEnd {
                    id,
                    metadata: signature_metadata(Some(signature)),
                });
            }
        }
    }

    fn chunk(&mut self, chunk: Chunk<'_>, data: &str, out: &mut Vec<Event>) {
        if chunk.error.is_some() {
            // Not seen from Google itself, but proxies re-frame the bare error object as a `data:` line.
            self.fail(classify(None, None, data), out);
            return;
        }
        self.response.offer(chunk.response_id, chunk.model_version);
        let candidates = chunk.candidates.unwrap_or_default();
        if candidates.is_empty()
            && let Some(reason) = chunk
                .prompt_feedback
                .and_then(|f| f.block_reason)
                .filter(|r| !r.is_empty())
        {
            self.block_reason = Some(reason.into_owned());
        }
        // Only the first candidate: the gateway never asks for `candidateCount > 1`.
        if let Some(candidate) = candidates.into_iter().find(|c| c.index.unwrap_or(0) == 0) {
            let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
            for part in parts {
                if self.done {
                    return;
                }
                let signature = part
                    .thought_signature
                    .filter(|s| !s.is_empty())
                    .map(Cow::into_owned);
                let text = part.text.unwrap_or_default();
                if let Some(call) = part.function_call {
                    self.function_call(call, signature, out);
                } else if self.streamed.is_some() && (!text.is_empty() || signature.is_some()) {
                    self.fail(
                        ProviderError::malformed(
                            "malformed Gemini function call: content inside a streamed call",
                        ),
                        out,
                    );
                } else if part.thought == Some(true) {
                    self.thought(&text, signature, out);
                } else {
                    // Text, or a part this stream cannot carry (inline images, code execution): its signature is
                    // still kept.
                    self.text(&text, signature, out);
                }
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        // A running total on every chunk: the last one wins.
        if let Some(u) = &chunk.usage_metadata {
            self.usage = Some(normalize_usage(u));
        }
    }

    /// Ends the stream successfully: closes the open blocks, then `Finish`. A streamed call still open means its
    /// arguments are incomplete: a typed error, never a call with half its arguments.
    fn finish(&mut self, out: &mut Vec<Event>) {
        if self.streamed.is_some() {
            self.fail(
                ProviderError::malformed(
                    "malformed Gemini function call: the stream finished inside a streamed call",
                ),
                out,
            );
            return;
        }
        self.close_reasoning(out);
        self.close_text(out);
        let (reason, raw_reason) = match (self.finish_reason.take(), self.block_reason.take()) {
            (Some(raw), _) => (map_finish_reason(&raw, self.calls > 0), raw),
            // A refused prompt is a finished step whose output the filter stopped, like a candidate-level
            // `SAFETY`: one path for every "filtered" outcome, and the prompt tokens are still reported.
            (None, Some(block)) => (FinishReason::ContentFilter, block),
            (None, None) => (FinishReason::Other, String::new()),
        };
        self.done = true;
        let response = self.response.take();
        out.push(Event::Finish(Finish {
            reason,
            raw_reason,
            usage: self.usage.unwrap_or_default(),
            response_id: response.id,
            response_model: response.model,
        }));
    }
}

/// `ReasoningEnd.metadata` for a block with this signature.
fn signature_metadata(signature: Option<String>) -> Option<String> {
    ReplayMetadata {
        thought_signature: signature,
        function_call_id: None,
    }
    .to_json()
}

/// docs/providers.md §5: Gemini's finish reasons. `STOP` with function calls is reported as `ToolCalls`.
/// `MALFORMED_FUNCTION_CALL` (the model produced a call Gemini could not parse, so the step has no usable output)
/// is `Error`, as in the unified model, and the raw string stays in `raw_reason`.
fn map_finish_reason(raw: &str, had_calls: bool) -> FinishReason {
    match raw {
        "STOP" if had_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        "MALFORMED_FUNCTION_CALL" => FinishReason::Error,
        // OTHER, LANGUAGE, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS, NO_IMAGE, FINISH_REASON_UNSPECIFIED, newer ones.
        _ => FinishReason::Other,
    }
}

/// docs/architecture.md "Usage and cost": `promptTokenCount` includes the cached tokens, so they are taken out of `input`; the prompt
/// Gemini built for tool use (`toolUsePromptTokenCount`, not in `promptTokenCount`) is input too. Candidates
/// exclude thoughts, so output and reasoning are disjoint already.
fn normalize_usage(u: &WireUsage) -> Usage {
    let cache_read = u.cached_content_token_count.unwrap_or(0);
    Usage {
        input: u
            .prompt_token_count
            .unwrap_or(0)
            .saturating_sub(cache_read)
            .saturating_add(u.tool_use_prompt_token_count.unwrap_or(0)),
        cache_read,
        cache_write: 0,
        output: u.candidates_token_count.unwrap_or(0),
        reasoning: u.thoughts_token_count.unwrap_or(0),
    }
}

/// `{"error": …}` or `[{"error": …}]` (the array shape of a non-SSE body, docs/providers.md §0).
fn is_error_body(value: &serde_json::Value) -> bool {
    let first = match value {
        serde_json::Value::Array(items) => items.first(),
        other => Some(other),
    };
    first.is_some_and(|v| v.get("error").is_some())
}

impl Decoder for GeminiDecoder {
    fn frame(&mut self, _event: &str, data: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        // Inside a streamed call every part goes through the full parse, which refuses content there.
        if self.fast
            && self.streamed.is_none()
            && let Some(fast) = TextChunk::recognise(data)
        {
            self.text_chunk(fast, out);
            return;
        }
        match serde_json::from_str::<Chunk<'_>>(data) {
            Ok(chunk) => self.chunk(chunk, data, out),
            Err(e) => self.malformed(&e, data, out),
        }
    }

    /// Google writes its mid-stream error as a bare pretty-printed object after the last event (§4 "Errors"); its
    /// `status` and numeric `code` (e.g. `UNAVAILABLE`/503) tell `classify` the kind even without an HTTP status.
    /// A body that is not SSE at all (a JSON array of chunks, as without `alt=sse`) is decoded chunk by chunk.
    fn bare_json(&mut self, json: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        let value: serde_json::Value = match serde_json::from_str(json) {
            Ok(v) => v,
            Err(e) => return self.malformed(&e, json, out),
        };
        if is_error_body(&value) {
            self.fail(classify(None, None, json), out);
            return;
        }
        if value.is_array() {
            match serde_json::from_str::<Vec<Chunk<'_>>>(json) {
                Ok(chunks) => {
                    for chunk in chunks {
                        if self.done {
                            break;
                        }
                        self.chunk(chunk, json, out);
                    }
                }
                Err(e) => self.malformed(&e, json, out),
            }
        } else {
            self.frame("", json, out);
        }
    }

    /// `generateContent`'s response is one chunk, and `streamGenerateContent` without `alt=sse` an array of them:
    /// both are what [`bare_json`](Decoder::bare_json) decodes.
    fn whole(&mut self, json: &str, out: &mut Vec<Event>) {
        self.bare_json(json, out);
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        if self.finish_reason.is_some() || self.block_reason.is_some() {
            self.finish(out);
        } else {
            // Gemini ends every stream by closing the connection, so only a missing `finishReason` tells a cut
            // stream from a complete one.
            self.fail(ProviderError::cut_before("the provider finished"), out);
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(GeminiDecoder::new())
    }
}

// ---- Fast path -------------------------------------------------------------------------------------------------------

/// Most parts a chunk may have for the fast path (Gemini sends one).
const FAST_PARTS: usize = 4;

/// The chunk almost every event of a stream is: one candidate whose parts are text or thought text without
/// signatures, no finish reason, optional running usage
/// (`{"candidates":[{"content":{"parts":[{"text":"…"}],"role":"model"},"index":0}],"usageMetadata":{…},…}`).
///
/// [`TextChunk::recognise`] reads it in one pass over the frame with the validating [`Cursor`], borrowing the
/// strings; any other shape (function calls, thought signatures, a finish reason, prompt feedback, an error, a second
/// candidate, a duplicate or escaped key, malformed JSON) is left to the full parse, which is what decides those
/// cases. Fields the full parse ignores are skipped here too, after the same validation.
#[derive(Debug, PartialEq)]
struct TextChunk<'a> {
    response_id: Option<Cow<'a, str>>,
    model_version: Option<Cow<'a, str>>,
    usage: Option<WireUsage>,
    /// The first candidate's parts, `len` of them.
    parts: [FastPart<'a>; FAST_PARTS],
    len: usize,
}

#[derive(Debug, PartialEq)]
struct FastPart<'a> {
    text: Option<Cow<'a, str>>,
    thought: Option<bool>,
}

impl<'a> TextChunk<'a> {
    fn recognise(data: &'a str) -> Option<Self> {
        let mut chunk = TextChunk {
            response_id: None,
            model_version: None,
            usage: None,
            parts: [const {
                FastPart {
                    text: None,
                    thought: None,
                }
            }; FAST_PARTS],
            len: 0,
        };
        let mut seen = [false; 4];
        frame_object(data, |c, key| match key.plain()? {
            "candidates" => {
                once(&mut seen[0])?;
                if c.take_null() {
                    return Some(());
                }
                let mut n = 0;
                c.array(|c| {
                    n += 1;
                    if n > 1 {
                        return None;
                    }
                    text_candidate(c, &mut chunk)
                })
            }
            "usageMetadata" => {
                once(&mut seen[1])?;
                if !c.take_null() {
                    chunk.usage = Some(usage(c)?);
                }
                Some(())
            }
            "modelVersion" => {
                chunk.model_version = once_decode(&mut seen[2], c)?;
                Some(())
            }
            "responseId" => {
                chunk.response_id = once_decode(&mut seen[3], c)?;
                Some(())
            }
            "promptFeedback" | "error" => None,
            _ => c.skip(),
        })?;
        Some(chunk)
    }
}

/// True if the fast path recognises `data` (for the tests that check it is really taken).
#[cfg(test)]
pub(super) fn fast_path_takes(data: &str) -> bool {
    TextChunk::recognise(data.trim()).is_some()
}

/// The single candidate: index 0 (or none), no finish reason, its parts into `chunk`.
fn text_candidate<'a>(c: &mut Cursor<'a>, chunk: &mut TextChunk<'a>) -> Option<()> {
    let mut seen = [false; 3];
    c.object(|c, key| match key.plain()? {
        "content" => {
            once(&mut seen[0])?;
            if c.take_null() {
                return Some(());
            }
            let mut parts = false;
            c.object(|c, key| match key.plain()? {
                "parts" => {
                    once(&mut parts)?;
                    if c.take_null() {
                        return Some(());
                    }
                    c.array(|c| {
                        let slot = chunk.parts.get_mut(chunk.len)?;
                        chunk.len += 1;
                        text_part(c, slot)
                    })
                }
                _ => c.skip(),
            })
        }
        "finishReason" => {
            once(&mut seen[1])?;
            c.null()
        }
        "index" => {
            once(&mut seen[2])?;
            // Another index makes the full parse skip the candidate; rare enough to leave to it.
            (c.opt_u64()?.unwrap_or(0) == 0).then_some(())
        }
        _ => c.skip(),
    })
}

/// A text or thought part without a signature or a function call.
fn text_part<'a>(c: &mut Cursor<'a>, part: &mut FastPart<'a>) -> Option<()> {
    let (mut text, mut thought) = (false, false);
    c.object(|c, key| match key.plain()? {
        "text" => {
            once(&mut text)?;
            part.text = decode_opt(c)?;
            Some(())
        }
        "thought" => {
            once(&mut thought)?;
            part.thought = c.opt_bool()?;
            Some(())
        }
        "thoughtSignature" | "functionCall" => None,
        _ => c.skip(),
    })
}

/// `usageMetadata`: the counts the decoder reads, each a plain integer or null.
fn usage(c: &mut Cursor<'_>) -> Option<WireUsage> {
    let mut u = WireUsage {
        prompt_token_count: None,
        cached_content_token_count: None,
        candidates_token_count: None,
        thoughts_token_count: None,
        tool_use_prompt_token_count: None,
    };
    let mut seen = [false; 5];
    c.object(|c, key| {
        let (slot, field) = match key.plain()? {
            "promptTokenCount" => (0, &mut u.prompt_token_count),
            "cachedContentTokenCount" => (1, &mut u.cached_content_token_count),
            "candidatesTokenCount" => (2, &mut u.candidates_token_count),
            "thoughtsTokenCount" => (3, &mut u.thoughts_token_count),
            "toolUsePromptTokenCount" => (4, &mut u.tool_use_prompt_token_count),
            _ => return c.skip(),
        };
        once(&mut seen[slot])?;
        *field = c.opt_u64()?;
        Some(())
    })?;
    Some(u)
}

// ---- Wire types ----------------------------------------------------------------------------------------------------
// Every field is optional: Gemini omits empty fields, and a new field or part type must not cost the whole stream.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(borrow, default)]
    candidates: Option<Vec<Candidate<'a>>>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
    #[serde(borrow, default)]
    model_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    prompt_feedback: Option<PromptFeedback<'a>>,
    /// Only its presence matters; `classify` reads the frame itself.
    #[serde(default)]
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    index: Option<u64>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Option<Vec<Part<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(borrow, default)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function_call: Option<FunctionCall<'a>>,
}

#[derive(Deserialize)]
struct FunctionCall<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    args: Option<serde_json::Value>,
    /// Vertex only: argument fragments of a streamed call.
    #[serde(default, rename = "partialArgs")]
    partial_args: Option<Vec<PartialArg>>,
    /// Vertex only: more parts of this call follow.
    #[serde(default, rename = "willContinue")]
    will_continue: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(borrow, default)]
    block_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    tool_use_prompt_token_count: Option<u64>,
}
