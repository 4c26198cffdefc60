//! Stored messages → the gateway's conversation, and the loop's exit rule.

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

use crate::processor::metadata_from_json;

/// Converts the stored history (oldest first, with parts) into gateway messages. An assistant message becomes an
/// assistant turn (text, reasoning, tool calls) followed by a tool turn with every call's result, so each call is
/// paired with exactly one result (unfinished calls were closed as errors by cleanup).
pub fn to_gateway(history: &[pb::Message]) -> Vec<gw::Message> {
    let mut out = Vec::with_capacity(history.len() * 2);
    for m in history {
        match m.role() {
            pb::Role::User => {
                let parts: Vec<gw::Part> = m
                    .parts
                    .iter()
                    .filter_map(|p| match &p.kind {
                        Some(pb::part::Kind::Text(t)) if !t.text.is_empty() => {
                            Some(gw_text(&t.text))
                        }
                        Some(pb::part::Kind::File(f)) => Some(gw::Part {
                            kind: Some(gw::part::Kind::File(gw::FilePart {
                                media_type: f.media_type.clone(),
                                filename: f.filename.clone(),
                                source: f.source.as_ref().map(|s| match s {
                                    pb::file_part::Source::Data(d) => {
                                        gw::file_part::Source::Data(d.clone())
                                    }
                                    pb::file_part::Source::Url(u) => {
                                        gw::file_part::Source::Url(u.clone())
                                    }
                                }),
                            })),
                        }),
                        _ => None,
                    })
                    .collect();
                if !parts.is_empty() {
                    out.push(gw::Message {
                        role: gw::Role::User as i32,
                        parts,
                    });
                }
            }
            // A retried attempt's partial output is superseded by the retry; it stays stored but is not replayed.
            pb::Role::Assistant if m.finish == "retried" => {}
            pb::Role::Assistant => {
                let mut parts = Vec::new();
                let mut results = Vec::new();
                for p in &m.parts {
                    match &p.kind {
                        Some(pb::part::Kind::Text(t)) if !t.text.is_empty() => {
                            parts.push(gw_text(&t.text))
                        }
                        Some(pb::part::Kind::Reasoning(r)) => parts.push(gw::Part {
                            kind: Some(gw::part::Kind::Reasoning(gw::ReasoningPart {
                                text: r.text.clone(),
                                provider_metadata: metadata_from_json(&r.provider_metadata_json),
                            })),
                        }),
                        Some(pb::part::Kind::Tool(t)) => {
                            let state = t.state.clone().unwrap_or_default();
                            let input = if state.input_json.trim().is_empty() {
                                "{}".to_string()
                            } else {
                                state.input_json.clone()
                            };
                            parts.push(gw::Part {
                                kind: Some(gw::part::Kind::ToolCall(gw::ToolCallPart {
                                    call_id: t.call_id.clone(),
                                    tool_name: t.tool.clone(),
                                    input_json: input,
                                    provider_metadata: metadata_from_json(
                                        &t.provider_metadata_json,
                                    ),
                                })),
                            });
                            let (output, is_error) = match state.status() {
                                pb::tool_state::Status::Completed => (state.output.clone(), false),
                                pb::tool_state::Status::Error => (state.error.clone(), true),
                                _ => ("the tool did not finish".to_string(), true),
                            };
                            results.push(gw::Part {
                                kind: Some(gw::part::Kind::ToolResult(gw::ToolResultPart {
                                    call_id: t.call_id.clone(),
                                    tool_name: t.tool.clone(),
                                    output,
                                    is_error,
                                })),
                            });
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    out.push(gw::Message {
                        role: gw::Role::Assistant as i32,
                        parts,
                    });
                }
                if !results.is_empty() {
                    out.push(gw::Message {
                        role: gw::Role::Tool as i32,
                        parts: results,
                    });
                }
            }
            pb::Role::Unspecified => {}
        }
    }
    out
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
    let Some(last) = history[last_user..]
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::Assistant)
    else {
        return true;
    };
    // A retried or interrupted attempt is not an answer: the step runs again.
    if matches!(last.finish.as_str(), "retried" | "interrupted") {
        return true;
    }
    if last.error.is_some() {
        return false;
    }
    last.finish == "tool_calls" || last.completed_at.is_none()
}

/// The model for the next step: the prompt's, else the latest user message's, else the agent's, else the session's.
pub fn pick_model<'a>(
    prompt_model: Option<&'a str>,
    history: &'a [pb::Message],
    agent_model: &'a str,
    session_model: &'a str,
) -> Option<&'a str> {
    let from_user = history
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::User)
        .map(|m| m.model.as_str())
        .filter(|m| !m.is_empty());
    prompt_model
        .filter(|m| !m.is_empty())
        .or(from_user)
        .or(Some(agent_model).filter(|m| !m.is_empty()))
        .or(Some(session_model).filter(|m| !m.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str, model: &str) -> pb::Message {
        pb::Message {
            id: crate::ids::new("msg"),
            role: pb::Role::User as i32,
            model: model.into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart {
                    text: text.into(),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn assistant(finish: &str, completed: bool, tools: Vec<pb::ToolPart>) -> pb::Message {
        pb::Message {
            id: crate::ids::new("msg"),
            role: pb::Role::Assistant as i32,
            finish: finish.into(),
            completed_at: completed.then_some(prost_types::Timestamp {
                seconds: 1,
                nanos: 0,
            }),
            parts: tools
                .into_iter()
                .map(|t| pb::Part {
                    kind: Some(pb::part::Kind::Tool(t)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn tool(call: &str, status: pb::tool_state::Status, out: &str) -> pb::ToolPart {
        pb::ToolPart {
            call_id: call.into(),
            tool: "read".into(),
            state: Some(pb::ToolState {
                status: status as i32,
                input_json: "{\"path\":\"a\"}".into(),
                output: out.into(),
                error: out.into(),
                ..Default::default()
            }),
            provider_metadata_json: String::new(),
        }
    }

    #[test]
    fn exit_rule() {
        assert!(needs_work(&[user("hi", "")]));
        assert!(needs_work(&[
            user("hi", ""),
            assistant("tool_calls", true, vec![])
        ]));
        assert!(!needs_work(&[
            user("hi", ""),
            assistant("stop", true, vec![])
        ]));
        assert!(needs_work(&[
            user("hi", ""),
            assistant("stop", true, vec![]),
            user("more", "")
        ]));
        assert!(
            needs_work(&[user("hi", ""), assistant("", false, vec![])]),
            "an orphaned step is resumed"
        );
        let mut failed = assistant("", true, vec![]);
        failed.error = Some(pb::MessageError::default());
        assert!(!needs_work(&[user("hi", ""), failed]));
    }

    #[test]
    fn every_call_is_paired_with_one_result() {
        let history = vec![
            user("read a", ""),
            assistant(
                "tool_calls",
                true,
                vec![
                    tool("c1", pb::tool_state::Status::Completed, "A"),
                    tool("c2", pb::tool_state::Status::Error, "denied"),
                ],
            ),
        ];
        let msgs = to_gateway(&history);
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1].role(), gw::Role::Assistant);
        assert_eq!(msgs[2].role(), gw::Role::Tool);
        let results: Vec<(String, bool)> = msgs[2]
            .parts
            .iter()
            .map(|p| match &p.kind {
                Some(gw::part::Kind::ToolResult(r)) => (r.call_id.clone(), r.is_error),
                _ => panic!(),
            })
            .collect();
        assert_eq!(
            results,
            [("c1".to_string(), false), ("c2".to_string(), true)]
        );
    }

    #[test]
    fn model_priority() {
        let h = vec![user("x", "anthropic/u")];
        assert_eq!(
            pick_model(Some("openai/p"), &h, "a/agent", "s/sess"),
            Some("openai/p")
        );
        assert_eq!(
            pick_model(None, &h, "a/agent", "s/sess"),
            Some("anthropic/u")
        );
        assert_eq!(
            pick_model(None, &[user("x", "")], "a/agent", "s/sess"),
            Some("a/agent")
        );
        assert_eq!(pick_model(None, &[], "", "s/sess"), Some("s/sess"));
        assert_eq!(pick_model(None, &[], "", ""), None);
    }
}
