//! Stored messages → the gateway's conversation, and the loop's exit rule.
//!
//! The loop sees the history *from the last completed compaction on* ([`since_compaction`]): the compaction
//! message's summary becomes the first (user) turn of the conversation and nothing before it is sent again.

use std::collections::HashSet;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

use crate::processor::{FINISH_OVERFLOW, metadata_from_json};

/// What replaces a pruned tool output in requests (storage keeps the output).
pub const PRUNED_OUTPUT: &str = "[output pruned]";

/// How [`to_gateway_with`] renders the history.
#[derive(Debug, Default, Clone)]
pub struct Render {
    /// Tool parts (by part id) whose output is replaced with [`PRUNED_OUTPUT`].
    pub pruned: HashSet<String>,
    /// Render for the compaction summary request: tool calls and results become plain text inside the assistant
    /// turn (the request offers no tools, and some providers refuse tool calls in a request without tool
    /// definitions), and reasoning is left out (the summary needs what was done, not how it was thought through).
    pub summary: bool,
}

/// True for an assistant message that carries a compaction part.
pub fn is_compaction(m: &pb::Message) -> bool {
    m.role() == pb::Role::Assistant
        && m.parts
            .iter()
            .any(|p| matches!(p.kind, Some(pb::part::Kind::Compaction(_))))
}

/// True for a compaction whose summary was written completely: the start of the conversation from then on.
pub fn is_completed_compaction(m: &pb::Message) -> bool {
    is_compaction(m)
        && m.completed_at.is_some()
        && m.error.is_none()
        && m.finish == "stop"
        && !summary_text(m).trim().is_empty()
}

/// The summary a compaction message wrote (its text parts).
pub fn summary_text(m: &pb::Message) -> String {
    m.parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The history the loop works on: from the last completed compaction (included) to the end; the whole history when
/// there was none.
pub fn since_compaction(mut history: Vec<pb::Message>) -> Vec<pb::Message> {
    if let Some(i) = history.iter().rposition(is_completed_compaction) {
        history.drain(..i);
    }
    history
}

/// The structured output the latest user message asks for, when it asks for one.
pub fn output_format(history: &[pb::Message]) -> Option<pb::OutputFormat> {
    history
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::User)
        .and_then(|m| m.format.clone())
        .filter(|f| f.r#type() == pb::output_format::Type::JsonSchema)
}

/// Converts the stored history (oldest first, with parts) into gateway messages. An assistant message becomes an
/// assistant turn (text, reasoning, tool calls) followed by a tool turn with every call's result, so each call is
/// paired with exactly one result (unfinished calls were closed as errors by cleanup).
#[cfg(test)]
pub fn to_gateway(history: &[pb::Message]) -> Vec<gw::Message> {
    to_gateway_with(history, &Render::default())
}

/// The stored history as gateway messages (as `to_gateway`), with pruning and tool flattening (see [`Render`]).
pub fn to_gateway_with(history: &[pb::Message], render: &Render) -> Vec<gw::Message> {
    let mut out = Vec::with_capacity(history.len() * 2);
    for m in history {
        if is_compaction(m) {
            // A completed summary restarts the conversation as a user turn (providers want a user turn first); a
            // failed or unfinished one is not replayed at all.
            if is_completed_compaction(m) {
                let summary = format!("{SUMMARY_PREAMBLE}\n\n{}", summary_text(m).trim());
                push_turn(&mut out, gw::Role::User, vec![gw_text(&summary)]);
            }
            continue;
        }
        match m.role() {
            pb::Role::User => push_turn(&mut out, gw::Role::User, user_parts(m)),
            // A retried attempt's partial output is superseded by the retry, and an overflowed one by the compaction;
            // both stay stored but are not replayed.
            pb::Role::Assistant if matches!(m.finish.as_str(), "retried" | FINISH_OVERFLOW) => {}
            pb::Role::Assistant => {
                let (parts, results) = assistant_parts(m, render);
                push_turn(&mut out, gw::Role::Assistant, parts);
                push_turn(&mut out, gw::Role::Tool, results);
            }
            pb::Role::Unspecified => {}
        }
    }
    out
}

/// Appends a turn unless it has no parts.
fn push_turn(out: &mut Vec<gw::Message>, role: gw::Role, parts: Vec<gw::Part>) {
    if !parts.is_empty() {
        out.push(gw::Message {
            role: role as i32,
            parts,
        });
    }
}

/// A user message's text and files.
fn user_parts(m: &pb::Message) -> Vec<gw::Part> {
    m.parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) if !t.text.is_empty() => Some(gw_text(&t.text)),
            Some(pb::part::Kind::File(f)) => Some(gw::Part {
                kind: Some(gw::part::Kind::File(gw::FilePart {
                    media_type: f.media_type.clone(),
                    filename: f.filename.clone(),
                    source: f.source.as_ref().map(|s| match s {
                        pb::file_part::Source::Data(d) => gw::file_part::Source::Data(d.clone()),
                        pb::file_part::Source::Url(u) => gw::file_part::Source::Url(u.clone()),
                    }),
                })),
            }),
            _ => None,
        })
        .collect()
}

/// An assistant message's turn (text, reasoning, tool calls) and the tool turn with each call's result. When
/// `render.summary` is set, reasoning is left out and each call is flattened into text with its result.
fn assistant_parts(m: &pb::Message, render: &Render) -> (Vec<gw::Part>, Vec<gw::Part>) {
    let mut parts = Vec::new();
    let mut results = Vec::new();
    for p in &m.parts {
        match &p.kind {
            Some(pb::part::Kind::Text(t)) if !t.text.is_empty() => parts.push(gw_text(&t.text)),
            Some(pb::part::Kind::Reasoning(_)) if render.summary => {}
            Some(pb::part::Kind::Reasoning(r)) => parts.push(gw::Part {
                kind: Some(gw::part::Kind::Reasoning(gw::ReasoningPart {
                    text: r.text.clone(),
                    provider_metadata: metadata_from_json(&r.provider_metadata_json),
                })),
            }),
            Some(pb::part::Kind::Tool(t)) if render.summary => {
                parts.push(gw_text(&flattened_call(&p.id, t, render)));
            }
            Some(pb::part::Kind::Tool(t)) => {
                let (call, result) = call_and_result(&p.id, t, render);
                parts.push(call);
                results.push(result);
            }
            _ => {}
        }
    }
    (parts, results)
}

/// A tool call and its result as text, for a summary request (which offers no tools).
fn flattened_call(part_id: &str, t: &pb::ToolPart, render: &Render) -> String {
    let state = t.state.clone().unwrap_or_default();
    let result = match state.status() {
        _ if render.pruned.contains(part_id) => PRUNED_OUTPUT.to_string(),
        pb::tool_state::Status::Completed => state.output.clone(),
        pb::tool_state::Status::Error => format!("error: {}", state.error),
        _ => "the tool did not finish".to_string(),
    };
    format!(
        "[called tool `{}` with {}]\n[result: {result}]",
        t.tool, state.input_json
    )
}

/// A tool call part and its paired result part; an unfinished call is answered as an error.
fn call_and_result(part_id: &str, t: &pb::ToolPart, render: &Render) -> (gw::Part, gw::Part) {
    let state = t.state.clone().unwrap_or_default();
    let input = if state.input_json.trim().is_empty() {
        "{}".to_string()
    } else {
        state.input_json.clone()
    };
    let call = gw::Part {
        kind: Some(gw::part::Kind::ToolCall(gw::ToolCallPart {
            call_id: t.call_id.clone(),
            tool_name: t.tool.clone(),
            input_json: input,
            provider_metadata: metadata_from_json(&t.provider_metadata_json),
        })),
    };
    let (output, is_error) = match state.status() {
        pb::tool_state::Status::Completed if render.pruned.contains(part_id) => {
            (PRUNED_OUTPUT.to_string(), false)
        }
        pb::tool_state::Status::Completed => (state.output.clone(), false),
        pb::tool_state::Status::Error => (state.error.clone(), true),
        _ => ("the tool did not finish".to_string(), true),
    };
    let result = gw::Part {
        kind: Some(gw::part::Kind::ToolResult(gw::ToolResultPart {
            call_id: t.call_id.clone(),
            tool_name: t.tool.clone(),
            output,
            is_error,
        })),
    };
    (call, result)
}

/// Opens the user turn that carries a compaction's summary.
pub const SUMMARY_PREAMBLE: &str =
    "The conversation so far was summarised to fit the context window. Summary:";

/// Tool outputs to prune from requests: every completed output older than the newest `protect` estimated tokens
/// of tool output, but only when that frees at least `minimum` tokens (pruning changes the request prefix, which
/// costs the provider's prompt cache, so it is not worth doing for a little). The latest assistant message's
/// outputs are always kept: the model is working with them right now.
pub fn prunable(history: &[pb::Message], protect: u64, minimum: u64) -> HashSet<String> {
    let latest = history
        .iter()
        .rposition(|m| m.role() == pb::Role::Assistant && !is_compaction(m));
    let mut seen = 0u64;
    let mut candidates = Vec::new();
    let mut freed = 0u64;
    for (i, m) in history.iter().enumerate().rev() {
        if m.role() != pb::Role::Assistant {
            continue;
        }
        for p in m.parts.iter().rev() {
            let Some(pb::part::Kind::Tool(t)) = &p.kind else {
                continue;
            };
            let Some(state) = &t.state else { continue };
            if state.status() != pb::tool_state::Status::Completed {
                continue;
            }
            let tokens = crate::context::estimate_text(&state.output);
            if Some(i) == latest || seen < protect {
                seen += tokens;
                continue;
            }
            freed += tokens;
            candidates.push(p.id.clone());
        }
    }
    if freed >= minimum && !candidates.is_empty() {
        candidates.into_iter().collect()
    } else {
        HashSet::new()
    }
}

fn gw_text(text: &str) -> gw::Part {
    gw::Part {
        kind: Some(gw::part::Kind::Text(gw::TextPart {
            text: text.to_string(),
        })),
    }
}

/// The exit rule: the loop has work while the latest user message has no finished answer. An answer is finished when
/// the last assistant message after it completed with anything but tool calls (or with an error).
pub fn needs_work(history: &[pb::Message]) -> bool {
    let Some(last_user) = history.iter().rposition(|m| m.role() == pb::Role::User) else {
        return false;
    };
    history[last_user..]
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::Assistant)
        .is_none_or(unfinished)
}

/// [`needs_work`] of `history` followed by `answer`, an assistant message (a step's, as it ended), without copying
/// the history.
pub fn needs_work_after(history: &[pb::Message], answer: &pb::Message) -> bool {
    history.iter().any(|m| m.role() == pb::Role::User) && unfinished(answer)
}

/// Whether an assistant message, the last after the latest user message, leaves that message without a finished
/// answer.
fn unfinished(last: &pb::Message) -> bool {
    // A retried or interrupted attempt is not an answer: the step runs again.
    if matches!(last.finish.as_str(), "retried" | "interrupted") {
        return true;
    }
    if last.error.is_some() {
        return false;
    }
    // An overflowed step is not an answer either: it waits for its compaction.
    if last.finish == FINISH_OVERFLOW {
        return true;
    }
    last.finish == "tool_calls" || last.completed_at.is_none()
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
