//! Session titles (docs/architecture.md "Titles"): after the first real user message, one direct gateway `Generate` call
//! with the agent's small model and no tools; the reply is cleaned into a single short line.

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

/// Longest title kept, in characters.
pub const MAX_CHARS: usize = 100;

/// Most prompt characters sent to the title model: the start of a long prompt says what it is about, and the title
/// call should stay cheap.
pub const MAX_PROMPT_CHARS: usize = 4_000;

/// Output budget of the title call: room for a short line, and for a little reasoning on models that reason.
pub const MAX_OUTPUT_TOKENS: u32 = 1_024;

/// System prompt of the title call.
pub const SYSTEM: &str = "Write a title of at most 8 words for this conversation, in the language of the user's \
message. Reply with the title only: one line, no quotes, no final punctuation, no explanation.";

/// Reasoning some models write inline before their answer; never part of a title.
const REASONING_TAGS: [&str; 3] = ["think", "thinking", "reasoning"];

/// True when `history` holds a real user message (typed by the caller, not a replay or a reminder) and no answer
/// to anything yet: the session's first loop is about to start, the one moment a title is due. Checking "no
/// assistant message yet" rather than "one user message" still titles a session whose first prompts arrived
/// together, and never tries again later (a failed title is not worth a call on every prompt).
pub fn is_due(history: &[pb::Message]) -> bool {
    history.iter().any(is_real_user) && !history.iter().any(|m| m.role() == pb::Role::Assistant)
}

/// A user message with at least one text part the caller typed.
fn is_real_user(m: &pb::Message) -> bool {
    m.role() == pb::Role::User
        && m.parts
            .iter()
            .any(|p| matches!(&p.kind, Some(pb::part::Kind::Text(t)) if !t.synthetic && !t.text.trim().is_empty()))
}

/// The title request for the first real user message of `history`.
pub fn request(
    history: &[pb::Message],
    model: &str,
    session_id: &str,
    agent: &str,
) -> Option<gw::Generation> {
    let first = history.iter().find(|m| is_real_user(m))?;
    let text: String = first
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) if !t.synthetic => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text: String = text.chars().take(MAX_PROMPT_CHARS).collect();
    Some(gw::Generation {
        model: model.into(),
        system: vec![SYSTEM.into()],
        messages: vec![gw::Message {
            role: gw::Role::User as i32,
            parts: vec![gw::Part {
                kind: Some(gw::part::Kind::Text(gw::TextPart { text })),
            }],
        }],
        sampling: Some(gw::Sampling {
            max_output_tokens: Some(MAX_OUTPUT_TOKENS),
            ..Default::default()
        }),
        context: Some(gw::RequestContext {
            session_id: session_id.into(),
            request_id: crate::ids::new("req"),
            agent: agent.into(),
        }),
        ..Default::default()
    })
}

/// The title in a `Generate` reply: its text output (reasoning parts ignored), cleaned by [`clean`].
pub fn from_reply(reply: &gw::GenerateResponse) -> Option<String> {
    let text: String = reply
        .output
        .iter()
        .filter_map(|p| match &p.kind {
            Some(gw::output_part::Kind::Text(t)) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    clean(&text)
}

/// Strips inline reasoning (`<think>…</think>` and the like, also an unclosed one), takes the first non-empty line,
/// drops surrounding quotes, markdown heading marks and a `Title:` label, and cuts to [`MAX_CHARS`] characters.
/// `None` when nothing is left.
pub fn clean(raw: &str) -> Option<String> {
    let mut text = raw.to_string();
    for tag in REASONING_TAGS {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        while let Some(start) = text.find(&open) {
            match text[start..].find(&close) {
                Some(end) => text.replace_range(start..start + end + close.len(), ""),
                // Cut off mid-reasoning: nothing after the tag is an answer.
                None => text.truncate(start),
            }
        }
    }
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let marks = |c: char| matches!(c, '"' | '\'' | '`' | '*' | '_' | '“' | '”');
    let line = line.trim_start_matches('#').trim();
    let line = strip_label(line, marks);
    let line = line.trim_matches(marks).trim();
    if line.is_empty() {
        return None;
    }
    Some(
        line.chars()
            .take(MAX_CHARS)
            .collect::<String>()
            .trim_end()
            .to_string(),
    )
}

/// Drops a leading `Title:` label, in any case and with any emphasis around it (`**Title:**`, `_title_:`).
fn strip_label(line: &str, marks: impl Fn(char) -> bool + Copy) -> &str {
    let bare = line.trim_start_matches(marks);
    let labelled = bare
        .get(..5)
        .is_some_and(|w| w.eq_ignore_ascii_case("title"));
    if !labelled {
        return line;
    }
    match bare[5..].trim_start_matches(marks).strip_prefix(':') {
        Some(rest) => rest.trim_start_matches(marks).trim(),
        None => line,
    }
}

#[cfg(test)]
#[path = "title_tests.rs"]
mod tests;
