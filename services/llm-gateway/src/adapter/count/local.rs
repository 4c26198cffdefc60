//! Counting an OpenAI model's input tokens locally, with OpenAI's own tokenizers and the per-message overhead OpenAI
//! documents in its cookbook ("How to count tokens with tiktoken"):
//!
//! - every message costs 3 tokens besides its role and its content, and the reply is primed with 3 more;
//! - a function tool costs the tokens of `name:description` and, per property, of `name:type:description` (and each
//!   enum value), with fixed overheads per function, per property list and per property (the cookbook's constants
//!   for GPT-4o; GPT-4 and GPT-3.5 start each function at 10 instead of 7).
//!
//! Text messages are exact (the cookbook checks its formula against the API's `usage`); tools are the cookbook's
//! estimate, since OpenAI does not publish how it renders them, and so are tool calls and tool results in the history
//! (counted as their name, arguments and output). Files (images, PDFs) are refused: their tokens depend on their
//! pixels and pages, which only the provider reads. Reasoning parts are not counted: the Chat Completions and
//! Responses adapters send OpenAI no earlier reasoning text.
//!
//! The tokenizers are `bpe-openai`'s: OpenAI's `o200k_base` and `cl100k_base` ranks, built into the binary, with the
//! same output as OpenAI's `tiktoken`, and linear in the text whatever it holds. `tiktoken-rs`, the port of
//! `tiktoken`, pre-tokenizes with a backtracking regex: a megabyte of spaces overflows its stack (a panic) and a
//! megabyte without spaces takes seconds, either of which a caller's text could ask for.

use bpe_openai::Tokenizer;
use llm_proto::gateway as pb;
use serde_json::Value;

use crate::adapter::BuildError;
use crate::catalog::TokenizerName;

/// Tokens every message costs besides its role and content.
const PER_MESSAGE: u64 = 3;
/// Tokens that prime the reply (`<|start|>assistant<|message|>`).
const REPLY_PRIMING: u64 = 3;

/// The tokenizer, loaded once per process (its ranks are deserialised on first use).
fn bpe(t: TokenizerName) -> &'static Tokenizer {
    match t {
        TokenizerName::O200kBase => bpe_openai::o200k_base(),
        TokenizerName::Cl100kBase => bpe_openai::cl100k_base(),
    }
}

/// The tokens of `text`, its special-token strings counted as text (as the API counts a caller's text).
fn tokens(bpe: &Tokenizer, text: &str) -> u64 {
    bpe.count(text) as u64
}

/// The input tokens `g` would use on an OpenAI model with tokenizer `t`.
pub fn count(g: &pb::Generation, t: TokenizerName) -> Result<u64, BuildError> {
    let bpe = bpe(t);
    let mut total = REPLY_PRIMING;
    for s in &g.system {
        total += PER_MESSAGE + tokens(bpe, "system") + tokens(bpe, s);
    }
    for (i, m) in g.messages.iter().enumerate() {
        total += message(bpe, i, m)?;
    }
    total += tools(bpe, t, &g.tools);
    Ok(total)
}

fn message(bpe: &Tokenizer, i: usize, m: &pb::Message) -> Result<u64, BuildError> {
    use pb::part::Kind;
    let role = match m.role() {
        pb::Role::Assistant => "assistant",
        pb::Role::Tool => "tool",
        pb::Role::User | pb::Role::Unspecified => "user",
    };
    let mut total = PER_MESSAGE + tokens(bpe, role);
    for (j, p) in m.parts.iter().enumerate() {
        total += match &p.kind {
            Some(Kind::Text(t)) => tokens(bpe, &t.text),
            Some(Kind::ToolCall(c)) => tokens(bpe, &c.tool_name) + tokens(bpe, &c.input_json),
            Some(Kind::ToolResult(r)) => tokens(bpe, &r.output),
            Some(Kind::Reasoning(_)) | None => 0,
            Some(Kind::File(_)) => {
                return Err(BuildError::new(
                    format!("generation.messages[{i}].parts[{j}]"),
                    "files cannot be counted locally: their tokens depend on what only the provider reads; \
                     count a model whose provider has a counting endpoint",
                ));
            }
        };
    }
    Ok(total)
}

/// The cookbook's estimate of the tools' tokens.
fn tools(bpe: &Tokenizer, t: TokenizerName, tools: &[pb::Tool]) -> u64 {
    if tools.is_empty() {
        return 0;
    }
    let function_start: i64 = match t {
        TokenizerName::O200kBase => 7,
        TokenizerName::Cl100kBase => 10,
    };
    let count = |s: &str| i64::try_from(tokens(bpe, s)).unwrap_or(i64::MAX);
    let mut total: i64 = 12; // the tool list's end
    for tool in tools {
        total += function_start;
        total += count(&format!("{}:{}", tool.name, trim_period(&tool.description)));
        let schema: Value = serde_json::from_str(&tool.input_schema_json).unwrap_or(Value::Null);
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        if properties.is_empty() {
            continue;
        }
        total += 3; // the property list's start
        for (name, property) in properties {
            total += 3; // each property
            if let Some(values) = property.get("enum").and_then(Value::as_array) {
                total -= 3;
                for v in values {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    total += 3 + count(&text);
                }
            }
            let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
            let description = property
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            total += count(&format!("{name}:{kind}:{}", trim_period(description)));
        }
    }
    u64::try_from(total).unwrap_or(0)
}

fn trim_period(s: &str) -> &str {
    s.strip_suffix('.').unwrap_or(s)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "local_tests.rs"]
mod tests;
