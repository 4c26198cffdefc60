//! Structured output (docs/architecture.md "Structured output"): when a prompt passes `format: {type: json_schema, schema}`, the model answers
//! by calling a dedicated tool whose arguments must match the schema.
//!
//! Why a tool and not the provider's own JSON mode: every provider with tools supports it the same way, the model
//! may still use other tools first, and a wrong answer becomes an ordinary tool error the model reads and corrects
//! (up to `retry_count` times) instead of a failed request.

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use serde_json::Value;

use crate::processor::{Effect, Processor};
use crate::tools::validate_input;

/// Name of the structured-output tool. Client tools may not use it while a format is requested.
pub const TOOL_NAME: &str = "structured_output";

/// Corrections allowed when the prompt does not say.
pub const DEFAULT_RETRY_COUNT: u32 = 2;

/// Most corrections a prompt may allow: every one is a model step.
pub const MAX_RETRY_COUNT: u32 = 10;

/// The tool's description for the model.
pub const TOOL_DESCRIPTION: &str = "Give your final answer by calling this tool exactly once, with the answer as \
the arguments. The arguments must match the input schema. Call it only when the answer is complete; it ends the \
conversation turn. Do not answer with plain text.";

/// System section added when a format is requested.
pub const SYSTEM: &str = "The user asked for a structured answer. When you have it, call the `structured_output` \
tool with the answer as its arguments, exactly matching its schema. Do not give the final answer as text.";

/// System section of the last step allowed by `max_steps` when a format is requested.
pub const FINAL_STEP_SYSTEM: &str = "This is the last step allowed: call the `structured_output` tool now with your best final answer.";

/// A requested format, checked: the schema parsed and compiled.
#[derive(Debug, Clone)]
pub struct Format {
    /// The answer's JSON Schema (an object schema).
    pub schema: Value,
    /// Invalid calls the model may correct.
    pub retry_count: u32,
}

impl Format {
    /// Checks a prompt's format. `Ok(None)` when it asks for no structured output; `Err` names what is wrong, for
    /// the caller.
    pub fn from_proto(f: &pb::OutputFormat) -> Result<Option<Format>, String> {
        match f.r#type() {
            pb::output_format::Type::Unspecified | pb::output_format::Type::Text => {
                return Ok(None);
            }
            pb::output_format::Type::JsonSchema => {}
        }
        let schema: Value = serde_json::from_str(&f.schema_json)
            .map_err(|e| format!("schema_json is not JSON ({e})"))?;
        // Tool inputs are objects on every provider, so the answer's root must be one too.
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err("schema_json must be an object schema (\"type\": \"object\")".into());
        }
        jsonschema::validator_for(&schema)
            .map_err(|e| format!("schema_json is not a valid JSON Schema ({e})"))?;
        let retry_count = f.retry_count.unwrap_or(DEFAULT_RETRY_COUNT);
        if retry_count > MAX_RETRY_COUNT {
            return Err(format!("retry_count must be at most {MAX_RETRY_COUNT}"));
        }
        Ok(Some(Format {
            schema,
            retry_count,
        }))
    }

    /// The tool offered to the model.
    pub fn tool(&self) -> gw::Tool {
        gw::Tool {
            name: TOOL_NAME.into(),
            description: TOOL_DESCRIPTION.into(),
            input_schema_json: self.schema.to_string(),
            ..Default::default()
        }
    }

    /// Validates a call's arguments: the answer as compact JSON, or the error the model sees.
    pub fn check(&self, input_json: &str) -> Result<String, String> {
        validate_input(&self.schema, input_json)
            .map(|v| v.to_string())
            .map_err(|e| {
                format!("{e}. Call `{TOOL_NAME}` again with arguments that match the schema.")
            })
    }
}

/// The structured-output state of one step: the requested format (if any) and the corrections used so far.
#[derive(Debug, Default)]
pub struct Turn {
    format: Option<Format>,
    failures: u32,
    /// A valid answer was stored, or the corrections ran out: the step's remaining calls are not run.
    settled: bool,
}

impl Turn {
    /// The state for a step of the latest user message: its format and the invalid calls made so far.
    pub fn new(format: Option<Format>, failures_so_far: u32) -> Turn {
        Turn {
            format,
            failures: failures_so_far,
            settled: false,
        }
    }

    /// Adds the tool (and the instruction to use it) to a step's request. The model must call a tool on every step
    /// (tool choice REQUIRED), so it cannot drift into a text answer; on the last step allowed it must call this one.
    /// `text_only_final` is the run loop's "answer with text only" section, replaced on the last step.
    pub fn decorate(&self, g: &mut gw::Generation, final_step: bool, text_only_final: &str) {
        let Some(f) = &self.format else { return };
        if final_step {
            g.system.retain(|s| s != text_only_final);
            g.system.push(FINAL_STEP_SYSTEM.into());
            g.tools = vec![f.tool()];
            g.tool_choice = Some(gw::ToolChoice {
                mode: gw::tool_choice::Mode::Tool as i32,
                tool_name: TOOL_NAME.into(),
                ..Default::default()
            });
        } else {
            g.system.push(SYSTEM.into());
            g.tools.retain(|t| t.name != TOOL_NAME);
            g.tools.push(f.tool());
            g.tool_choice = Some(gw::ToolChoice {
                mode: gw::tool_choice::Mode::Required as i32,
                tool_name: String::new(),
                ..Default::default()
            });
        }
    }

    /// Handles a tool call when it concerns structured output: a `structured_output` call is validated (valid →
    /// stored on the message, invalid → a tool error the model sees, and a structured_output failure once the
    /// corrections are spent), and once the answer is settled the step's later calls are not run. Returns false
    /// for calls the run loop executes itself.
    pub fn intercept(
        &mut self,
        p: &mut Processor,
        call_id: &str,
        tool: &str,
        input_json: &str,
        now: prost_types::Timestamp,
        out: &mut Vec<Effect>,
    ) -> bool {
        let Some(f) = &self.format else { return false };
        if self.settled {
            p.parts_mut().tool_finished(
                call_id,
                Err("not run: the final structured answer was already given".into()),
                now,
                out,
            );
            return true;
        }
        if tool != TOOL_NAME {
            return false;
        }
        match f.check(input_json) {
            Ok(json) => {
                p.parts_mut().tool_finished(
                    call_id,
                    Ok("Structured output accepted.".into()),
                    now,
                    out,
                );
                p.set_structured_output(json, out);
                self.settled = true;
            }
            Err(e) => {
                self.failures += 1;
                p.parts_mut()
                    .tool_finished(call_id, Err(e.clone()), now, out);
                if self.failures > f.retry_count {
                    p.fail(
                        error(format!(
                            "the structured output was still invalid after {} correction(s): {e}",
                            f.retry_count
                        )),
                        out,
                    );
                    self.settled = true;
                }
            }
        }
        true
    }

    /// The failure of a step that ended without the structured answer (it finished with text, or it was the last
    /// step allowed), or `None` when nothing was requested or the answer is there.
    pub fn missing(&self, message: &pb::Message, final_step: bool) -> Option<pb::MessageError> {
        self.format.as_ref()?;
        let answered = !message.structured_output_json.is_empty();
        let more_steps = message.finish == "tool_calls" && !final_step;
        if answered || more_steps || message.error.is_some() {
            return None;
        }
        Some(error(format!(
            "the model finished (`{}`) without a valid `{TOOL_NAME}` call",
            message.finish
        )))
    }
}

/// Invalid structured-output calls already made for the latest user message (the corrections used so far).
pub fn failures_so_far(history: &[pb::Message]) -> u32 {
    let start = history
        .iter()
        .rposition(|m| m.role() == pb::Role::User)
        .map_or(0, |i| i + 1);
    history[start..]
        .iter()
        .filter(|m| m.finish != "retried")
        .flat_map(|m| m.parts.iter())
        .filter(|p| match &p.kind {
            Some(pb::part::Kind::Tool(t)) => {
                t.tool == TOOL_NAME
                    && t.state.as_ref().is_some_and(|s| {
                        s.status() == pb::tool_state::Status::Error && !s.interrupted
                    })
            }
            _ => false,
        })
        .count() as u32
}

/// The error of an answer that ended without a valid structured output.
pub fn error(message: impl Into<String>) -> pb::MessageError {
    pb::MessageError {
        kind: pb::message_error::Kind::StructuredOutput as i32,
        message: message.into(),
        http_status: 0,
        retryable: false,
    }
}

#[cfg(test)]
#[path = "structured_tests.rs"]
mod tests;
