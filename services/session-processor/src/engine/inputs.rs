//! What a run keeps in memory beside the history: the prompt-scoped inputs (client tools, system text) that are not
//! part of any stored message, and how a queued prompt's inputs join a running loop's.

use llm_proto::sessions as pb;

/// The prompt-scoped inputs of a run that are not part of the history.
#[derive(Debug, Clone, Default)]
pub struct RunInputs {
    /// The model the caller chose for this run itself (the `Compact` RPC's). A prompt's model is not kept here:
    /// it is stored, resolved, on its user message, which the model priority reads.
    pub model: Option<String>,
    /// Client tools declared by the prompt.
    pub client_tools: Vec<pb::ClientTool>,
    /// Extra system text of the prompt.
    pub system: String,
    /// The caller's W3C trace context (`traceparent`, `tracestate`), sent on every gateway call of this run.
    pub trace: Vec<(String, String)>,
    /// A manual compaction (the `Compact` RPC) runs first.
    pub compact: bool,
    /// When the prompt that started the run reached the engine (`None` for runs started otherwise): its first step
    /// reports how long the critical path's phases took (`Metrics::prompt_phase`).
    pub arrived: Option<std::time::Instant>,
}

impl RunInputs {
    /// The inputs a prompt brings to the run it starts.
    pub(super) fn from_prompt(req: &pb::PromptRequest, trace: Vec<(String, String)>) -> RunInputs {
        RunInputs {
            model: None,
            client_tools: req.client_tools.clone(),
            system: req.system.clone(),
            trace,
            compact: false,
            arrived: None,
        }
    }

    /// A prompt delivered to the running loop (queued while it was busy) brings its own system text and client
    /// tools from then on: a newer client tool replaces one of the same name. Returns whether anything changed.
    pub(super) fn absorb(&mut self, req: &pb::PromptRequest) -> bool {
        let mut changed = false;
        if !req.system.is_empty() && self.system != req.system {
            self.system = req.system.clone();
            changed = true;
        }
        for tool in &req.client_tools {
            self.client_tools.retain(|t| t.name != tool.name);
            self.client_tools.push(tool.clone());
            changed = true;
        }
        changed
    }

    /// What [`crate::store::Sessions::put_run_inputs`] keeps of these inputs.
    pub(super) fn stored(&self) -> pb::PromptRequest {
        pb::PromptRequest {
            client_tools: self.client_tools.clone(),
            system: self.system.clone(),
            ..Default::default()
        }
    }

    /// Whether `name` is one of this run's client tools.
    pub(super) fn is_client_tool(&self, name: &str) -> bool {
        self.client_tools.iter().any(|c| c.name == name)
    }
}

#[cfg(test)]
#[path = "inputs_tests.rs"]
mod tests;
