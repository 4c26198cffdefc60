//! A step's events folded into the conversation the way the session-processor does it, for tests that send the
//! next step themselves.

use llm_proto::gateway as pb;
use pb::part::Kind;
use pb::stream_response::Event as E;

/// What one step's events become in the conversation.
pub struct Step {
    /// The assistant turn, parts in stream order.
    pub assistant: pb::Message,
    /// The tool calls, in order.
    pub calls: Vec<pb::ToolCall>,
}

/// Folds a step's events into its assistant turn the way the session-processor does: a part per text and reasoning
/// block (reasoning with the metadata of its end), a part per tool call with its metadata.
pub fn fold(events: &[pb::StreamResponse]) -> Step {
    let mut parts: Vec<pb::Part> = Vec::new();
    // Block id → index in `parts`.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut calls = Vec::new();
    let find = |open: &[(String, usize)], id: &str| {
        open.iter()
            .find(|(o, _)| o == id)
            .map(|(_, i)| *i)
            .unwrap_or_else(|| panic!("delta for unknown block {id}"))
    };
    for ev in events {
        match ev.event.as_ref().expect("event") {
            E::TextStart(t) => {
                open.push((t.id.clone(), parts.len()));
                parts.push(pb::Part {
                    kind: Some(Kind::Text(pb::TextPart::default())),
                });
            }
            E::TextDelta(d) => {
                if let Some(Kind::Text(t)) = &mut parts[find(&open, &d.id)].kind {
                    t.text.push_str(&d.delta);
                }
            }
            E::ReasoningStart(r) => {
                open.push((r.id.clone(), parts.len()));
                parts.push(pb::Part {
                    kind: Some(Kind::Reasoning(pb::ReasoningPart::default())),
                });
            }
            E::ReasoningDelta(d) => {
                if let Some(Kind::Reasoning(r)) = &mut parts[find(&open, &d.id)].kind {
                    r.text.push_str(&d.delta);
                }
            }
            E::ReasoningEnd(end) => {
                if let Some(Kind::Reasoning(r)) = &mut parts[find(&open, &end.id)].kind {
                    r.provider_metadata = end.provider_metadata.clone();
                }
            }
            E::ToolCall(c) => {
                parts.push(call_part(c));
                calls.push(c.clone());
            }
            _ => {}
        }
    }
    Step {
        assistant: pb::Message {
            role: pb::Role::Assistant as i32,
            parts,
        },
        calls,
    }
}

/// A tool call as the part of an assistant turn, with its metadata.
fn call_part(c: &pb::ToolCall) -> pb::Part {
    pb::Part {
        kind: Some(Kind::ToolCall(pb::ToolCallPart {
            call_id: c.call_id.clone(),
            tool_name: c.tool_name.clone(),
            input_json: c.input_json.clone(),
            provider_metadata: c.provider_metadata.clone(),
        })),
    }
}

/// The tool calls among a step's events, in order.
pub fn calls(events: &[pb::StreamResponse]) -> Vec<pb::ToolCall> {
    events
        .iter()
        .filter_map(|ev| match &ev.event {
            Some(E::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// The assistant turn of `calls` alone, each with its metadata: what a caller that keeps only the calls sends back.
pub fn calls_turn(calls: &[pb::ToolCall]) -> pb::Message {
    pb::Message {
        role: pb::Role::Assistant as i32,
        parts: calls.iter().map(call_part).collect(),
    }
}

/// The tool turn answering `calls` (each output `sunny at <arguments>`), as the processor sends it after running
/// the tools.
pub fn results(calls: &[pb::ToolCall]) -> pb::Message {
    pb::Message {
        role: pb::Role::Tool as i32,
        parts: calls
            .iter()
            .map(|c| pb::Part {
                kind: Some(Kind::ToolResult(pb::ToolResultPart {
                    call_id: c.call_id.clone(),
                    tool_name: c.tool_name.clone(),
                    output: format!("sunny at {}", c.input_json),
                    is_error: false,
                })),
            })
            .collect(),
    }
}
