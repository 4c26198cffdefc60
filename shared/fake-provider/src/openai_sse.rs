//! Builds OpenAI Chat Completions SSE bodies programmatically.
//!
//! Recorded fixtures cover exact provider quirks; the demo and benchmarks
//! instead need streams of arbitrary length and content, shaped like
//! OpenAI's (see `docs/providers.md` §1): an envelope of
//! `id, object, created, model, system_fingerprint, choices, usage`, a first
//! delta `{"role":"assistant","content":"","refusal":null}`, content or
//! tool-call deltas, a finish chunk with `delta:{}`, a usage chunk with
//! `"choices":[]`, then `data: [DONE]`. Every event is `data: <json>\n\n`.

use serde_json::{Value, json};

/// The `system_fingerprint` every generated chunk carries.
pub const SYSTEM_FINGERPRINT: &str = "fp_fakeprov01";

/// Incremental builder for one OpenAI Chat streaming response.
#[derive(Debug, Clone)]
pub struct ChatStream {
    model: String,
    id: String,
    created: u64,
    out: String,
    started: bool,
    tool_calls: u64,
}

impl ChatStream {
    /// Starts a stream for `model` with chunk id `id` (e.g. `chatcmpl-…`);
    /// `created` defaults to the current Unix time.
    pub fn new(model: &str, id: &str) -> ChatStream {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        ChatStream {
            model: model.to_owned(),
            id: id.to_owned(),
            created,
            out: String::new(),
            started: false,
            tool_calls: 0,
        }
    }

    /// Overrides `created`, for byte-stable output in tests.
    pub fn created(mut self, created: u64) -> ChatStream {
        self.created = created;
        self
    }

    /// Appends one content delta per piece, each piece sent exactly as given
    /// (include the spaces; see [`split_words`]).
    pub fn text(mut self, pieces: &[&str]) -> ChatStream {
        self.start();
        for piece in pieces {
            self.delta(json!({ "content": piece }), Value::Null);
        }
        self
    }

    /// Appends a tool call: a first fragment with `id`, `type`, `name` and
    /// empty `arguments`, then one fragment per argument piece. Successive
    /// calls get successive `index` values, as parallel calls do.
    pub fn tool_call(mut self, call_id: &str, name: &str, args_fragments: &[&str]) -> ChatStream {
        self.start();
        let index = self.tool_calls;
        self.tool_calls += 1;
        self.delta(
            json!({"tool_calls": [{
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""}
            }]}),
            Value::Null,
        );
        for fragment in args_fragments {
            self.delta(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                Value::Null,
            );
        }
        self
    }

    /// Ends the stream: the finish chunk with `finish_reason`, the usage
    /// chunk when `usage` is `Some((prompt_tokens, completion_tokens))`,
    /// then `data: [DONE]`.
    pub fn finish(mut self, finish_reason: &str, usage: Option<(u64, u64)>) -> String {
        self.start();
        self.delta(json!({}), json!(finish_reason));
        if let Some((prompt, completion)) = usage {
            let chunk = self.envelope(json!([]), usage_json(prompt, completion));
            self.push(&chunk);
        }
        self.out.push_str("data: [DONE]\n\n");
        self.out
    }

    fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.delta(
                json!({"role": "assistant", "content": "", "refusal": null}),
                Value::Null,
            );
        }
    }

    fn delta(&mut self, delta: Value, finish_reason: Value) {
        let choices = json!([{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason
        }]);
        let chunk = self.envelope(choices, Value::Null);
        self.push(&chunk);
    }

    fn envelope(&self, choices: Value, usage: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
            "usage": usage
        })
    }

    fn push(&mut self, chunk: &Value) {
        self.out.push_str("data: ");
        self.out.push_str(&chunk.to_string());
        self.out.push_str("\n\n");
    }
}

/// OpenAI's full usage object for the given counts (no cache, no reasoning).
pub fn usage_json(prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    })
}

/// A text answer streamed one content delta per piece, finishing with
/// `stop`; `usage` is `(prompt_tokens, completion_tokens)`.
pub fn text_stream(model: &str, id: &str, words: &[&str], usage: (u64, u64)) -> String {
    ChatStream::new(model, id)
        .text(words)
        .finish("stop", Some(usage))
}

/// A single tool call whose arguments arrive in `args_fragments`, finishing
/// with `tool_calls`; `usage` is `(prompt_tokens, completion_tokens)`.
pub fn tool_call_stream(
    model: &str,
    id: &str,
    call_id: &str,
    name: &str,
    args_fragments: &[&str],
    usage: (u64, u64),
) -> String {
    ChatStream::new(model, id)
        .tool_call(call_id, name, args_fragments)
        .finish("tool_calls", Some(usage))
}

/// Splits text into word pieces that keep their leading whitespace, so the
/// pieces concatenate back to the input: `"a b"` → `["a", " b"]`.
pub fn split_words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut prev_space = true;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        // A new piece begins where a run of whitespace begins.
        if space && !prev_space && i > start {
            pieces.push(&text[start..i]);
            start = i;
        }
        prev_space = space;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[cfg(test)]
#[path = "openai_sse_tests.rs"]
mod tests;
