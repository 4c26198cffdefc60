//! Prompt assembly: the gateway request of one step, from the agent, the history and the run's inputs.
//!
//! The system sections go stable first (role prompt, skills), then what changes (the environment, the caller's
//! text), so provider prompt caches keep hitting. The last step an agent allows keeps its tool definitions but
//! forbids calling them (`tool_choice: none`): earlier tool calls and results are still in the conversation, and
//! some providers (Anthropic) refuse a request that carries them without any tool definition.

use std::time::SystemTime;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

use super::inputs::RunInputs;
use crate::config::Agent;
use crate::history;
use crate::ids;
use crate::tools;

/// The system section of the last step `max_steps` allows.
pub(super) const LAST_STEP_SYSTEM: &str =
    "This is the last step allowed: answer with text only, without calling tools.";

/// What one step's request is built from.
pub(super) struct StepRequest<'a> {
    /// The session.
    pub session: &'a pb::Session,
    /// Its agent.
    pub agent: &'a Agent,
    /// The history from the last completed compaction on.
    pub history: &'a [pb::Message],
    /// Pruning of old tool outputs.
    pub render: &'a history::Render,
    /// The model.
    pub model: &'a str,
    /// The run's inputs.
    pub inputs: &'a RunInputs,
    /// Whether the session has a workspace (the built-in tools need one).
    pub has_workspace: bool,
    /// The last step the agent allows.
    pub final_step: bool,
}

impl StepRequest<'_> {
    /// The generation the gateway runs for this step.
    pub(super) fn generation(&self) -> gw::Generation {
        let mut system = vec![self.agent.role_prompt.clone()];
        for (name, text) in &self.agent.skills {
            system.push(format!("<skill name=\"{name}\">\n{text}\n</skill>"));
        }
        system.push(self.environment());
        if !self.inputs.system.is_empty() {
            system.push(self.inputs.system.clone());
        }
        if self.final_step {
            system.push(LAST_STEP_SYSTEM.into());
        }
        let tools = self.tools();
        let tool_choice = (self.final_step && !tools.is_empty()).then_some(gw::ToolChoice {
            mode: gw::tool_choice::Mode::None as i32,
            tool_name: String::new(),
            ..Default::default()
        });
        gw::Generation {
            model: self.model.into(),
            system: system.into_iter().filter(|s| !s.is_empty()).collect(),
            messages: history::to_gateway_with(self.history, self.render),
            tools,
            tool_choice,
            reasoning: reasoning(self.history, self.agent),
            context: Some(gw::RequestContext {
                session_id: self.session.id.clone(),
                request_id: ids::new("req"),
                agent: self.agent.name.clone(),
            }),
            ..Default::default()
        }
    }

    /// The environment section: the day (not the time, so the system stays stable all day), the platform and the
    /// workspace.
    fn environment(&self) -> String {
        let date = utc_day(SystemTime::now());
        let mut env = format!("<env>\ndate: {date}\nplatform: {}\n", std::env::consts::OS);
        if self.has_workspace {
            env.push_str(&format!("workspace: {}\n", self.session.workspace));
        }
        env.push_str("</env>");
        env
    }

    /// The built-in tools the agent enables (with a workspace), then the run's client tools.
    fn tools(&self) -> Vec<gw::Tool> {
        let mut tools = Vec::new();
        if self.has_workspace {
            for spec in tools::builtin_specs() {
                if self.agent.tools.contains(&spec.name)
                    && self.agent.permissions.tool_enabled(&spec.name)
                {
                    tools.push(gw::Tool {
                        name: spec.name,
                        description: spec.description,
                        input_schema_json: spec.input_schema.to_string(),
                        ..Default::default()
                    });
                }
            }
        }
        for c in &self.inputs.client_tools {
            tools.push(gw::Tool {
                name: c.name.clone(),
                description: c.description.clone(),
                input_schema_json: c.input_schema_json.clone(),
                ..Default::default()
            });
        }
        tools
    }
}

/// How the history is rendered for a request: old tool outputs beyond the protected window pruned (the window is at
/// most half the usable context), and for the compaction summary, tool calls flattened into text.
pub(super) fn render(
    history: &[pb::Message],
    agent: &Agent,
    usable: Option<u64>,
    summary: bool,
) -> history::Render {
    let protect = usable.map_or(agent.prune_protect, |u| agent.prune_protect.min(u / 2));
    history::Render {
        pruned: history::prunable(history, protect, agent.prune_minimum.min(protect)),
        summary,
    }
}

/// `YYYY-MM-DD` (UTC).
fn utc_day(t: SystemTime) -> String {
    let mut text = humantime::format_rfc3339_seconds(t).to_string();
    text.truncate(10);
    text
}

/// The reasoning the step asks for: the latest user message's (its prompt's), else the agent's.
fn reasoning(history: &[pb::Message], agent: &Agent) -> Option<gw::Reasoning> {
    let asked = history
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::User)
        .and_then(|m| m.reasoning)
        .or(agent.reasoning)?;
    let effort = match asked.effort() {
        pb::reasoning::Effort::Unspecified => gw::reasoning::Effort::Unspecified,
        pb::reasoning::Effort::None => gw::reasoning::Effort::None,
        pb::reasoning::Effort::Minimal => gw::reasoning::Effort::Minimal,
        pb::reasoning::Effort::Low => gw::reasoning::Effort::Low,
        pb::reasoning::Effort::Medium => gw::reasoning::Effort::Medium,
        pb::reasoning::Effort::High => gw::reasoning::Effort::High,
    };
    Some(gw::Reasoning {
        effort: effort as i32,
        budget_tokens: asked.budget_tokens,
    })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
