//! Context accounting for compaction (docs/architecture.md "Compaction"): how much of a model's context a request may use, how big a
//! request is before it is sent, and the texts of the summary step.
//!
//! Sizes before a call are *estimates*: the processor has no tokenizer for every provider, and a wrong guess is
//! cheap because the provider's own answer corrects it (a step's reported usage is checked at step-finish, and a
//! provider's context-overflow error becomes a compaction too). The estimate is one token per four characters, the
//! usual rule of thumb for English text and code, plus a flat amount per file.

use llm_proto::gateway as gw;

/// Characters per estimated token.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Estimated tokens of one attached file or image, whatever its size: providers bill images by resolution and
/// documents by pages, neither of which the processor knows.
pub const FILE_TOKENS: u64 = 1_000;

/// Largest answer reserve taken by default: models with a huge maximum output would otherwise leave little room
/// for the history.
pub const DEFAULT_MAX_RESERVE: u64 = 20_000;

/// Estimated tokens of a text: characters / 4, rounded up.
pub fn estimate_text(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(CHARS_PER_TOKEN)
}

/// Estimated prompt tokens of a whole request: its system sections, every message part and the tool table.
pub fn estimate_generation(g: &gw::Generation) -> u64 {
    let mut tokens: u64 = g.system.iter().map(|s| estimate_text(s)).sum();
    for m in &g.messages {
        for p in &m.parts {
            tokens += match &p.kind {
                Some(gw::part::Kind::Text(t)) => estimate_text(&t.text),
                Some(gw::part::Kind::Reasoning(r)) => estimate_text(&r.text),
                Some(gw::part::Kind::File(_)) => FILE_TOKENS,
                Some(gw::part::Kind::ToolCall(c)) => {
                    estimate_text(&c.tool_name) + estimate_text(&c.input_json)
                }
                Some(gw::part::Kind::ToolResult(r)) => estimate_text(&r.output),
                None => 0,
            };
        }
    }
    for t in &g.tools {
        tokens += estimate_text(&t.name)
            + estimate_text(&t.description)
            + estimate_text(&t.input_schema_json);
    }
    tokens
}

/// The model limits compaction works with, from the gateway's catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Prompt tokens the model accepts: its input limit, or its context window when it has none.
    pub input: u64,
    /// The model's maximum output.
    pub max_output: u64,
}

impl Limits {
    /// Limits from a catalog entry.
    pub fn of(model: &gw::Model) -> Limits {
        Limits {
            input: if model.max_input_tokens > 0 {
                model.max_input_tokens
            } else {
                model.context_window
            },
            max_output: model.max_output_tokens,
        }
    }

    /// Usable context: the input limit minus a reserve for the answer, `min(20000, max output)` unless configured.
    /// A context at or above it needs compaction.
    pub fn usable(&self, reserve: Option<u64>) -> u64 {
        let reserve = reserve.unwrap_or(self.max_output.min(DEFAULT_MAX_RESERVE));
        self.input.saturating_sub(reserve)
    }
}

/// System prompt of the summary step.
pub const SUMMARY_SYSTEM: &str = "You are summarising a conversation between a user and an AI assistant so that the \
assistant can continue the work with only your summary: the conversation itself will be dropped. Write a \
continuation summary with these sections:\n\
## Goal\nWhat the user wants to achieve, in their terms.\n\
## Instructions\nEvery instruction, preference and constraint the user gave that still applies.\n\
## Discoveries\nWhat was learned along the way: facts, decisions and their reasons, errors and how they were solved.\n\
## Accomplished\nWhat is done, what is in progress, and what remains, in order.\n\
## Relevant files\nFiles and directories that matter, with what each one is for and what was changed.\n\
Be specific and complete: names, paths, values and exact error messages. Do not address the user; do not call tools.";

/// The user turn that asks for the summary, after the history.
pub const SUMMARY_REQUEST: &str = "Summarise the conversation above as instructed, so the work can continue from your summary alone.";

/// The synthetic user message after an automatic compaction that interrupted unfinished work.
pub const CONTINUE_TEXT: &str =
    "Continue the task from where the summary leaves off. If it is complete, say so briefly.";

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;
