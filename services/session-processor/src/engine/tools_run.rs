//! The tool calls of a finished step, one after another: the structured-output tool (the answer, not an action),
//! the doom-loop check, client tools (the caller runs them and answers through the API), and the built-in workspace
//! tools under the agent's permission rules.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use llm_proto::sessions as pb;
use prost_types::Timestamp;
use tokio_util::sync::CancellationToken;

use super::effects::Effects;
use super::inputs::RunInputs;
use super::step_metrics::tool_outcome;
use super::{LoopError, now};
use crate::config::Agent;
use crate::events::Publisher;
use crate::metrics::{Metrics, ToolKind, ToolOutcome as CallOutcome};
use crate::processor::{Blocked, Processor};
use crate::store::{Asked, Fence, Mailboxes};
use crate::structured;
use crate::tools::{self, Decision, DoomLoopDetector, DoomPolicy, ToolOutcome, Workspace};

/// What a step's tools run with.
pub(super) struct ToolRun<'a> {
    /// The session's agent.
    pub agent: &'a Agent,
    /// The session's workspace, when it has one.
    pub workspace: Option<&'a Workspace>,
    /// The run's inputs (client tools).
    pub inputs: &'a RunInputs,
    /// The loop's lease.
    pub fence: &'a Fence,
    /// The caller's abort (or the lease's loss).
    pub cancel: &'a CancellationToken,
}

/// One call the model made.
struct Call {
    call_id: String,
    tool: String,
    input: String,
}

/// Runs a step's tool calls.
pub(super) struct ToolRunner {
    pub(super) publisher: Publisher,
    /// The caller's answers to client tool calls and permission requests.
    pub(super) mailboxes: Mailboxes,
    pub(super) metrics: Arc<Metrics>,
    pub(super) effects: Arc<Effects>,
}

impl ToolRunner {
    /// Runs the step's complete tool calls in order, recording each result on the processor. Stops early when the
    /// loop is cancelled (cleanup then closes the rest as aborted).
    pub(super) async fn run_tools(
        &self,
        processor: &mut Processor,
        run: &ToolRun<'_>,
        structured: &mut structured::Turn,
        mut detector: DoomLoopDetector,
    ) -> Result<(), LoopError> {
        let calls: Vec<Call> = processor
            .parts()
            .tool_calls()
            .filter(|t| {
                t.state
                    .as_ref()
                    .is_some_and(|s| s.status() == pb::tool_state::Status::Running)
            })
            .map(|t| Call {
                call_id: t.call_id.clone(),
                tool: t.tool.clone(),
                input: t
                    .state
                    .as_ref()
                    .map(|s| s.input_json.clone())
                    .unwrap_or_default(),
            })
            .collect();
        if !calls.is_empty() {
            // The step's parts (its tool calls among them) are in Redis before any tool runs: a replica dying
            // during a tool leaves a call the resumed loop sees, never one it would run again unknowingly.
            self.publisher
                .flush_parts(&processor.message().session_id)
                .await?;
        }
        for call in calls {
            if run.cancel.is_cancelled() {
                break;
            }
            let mut out = Vec::new();
            // The structured-output tool is the answer, not an action: no permission, no doom-loop check.
            if structured.intercept(
                processor,
                &call.call_id,
                &call.tool,
                &call.input,
                now(),
                &mut out,
            ) {
                self.effects.apply(&mut out, run.fence, processor).await?;
                continue;
            }
            if !self
                .doom_check(processor, run, &mut detector, &call)
                .await?
            {
                continue;
            }
            if let Some(client) = run.inputs.client_tools.iter().find(|c| c.name == call.tool) {
                if !self.run_client_tool(processor, run, client, &call).await? {
                    break;
                }
                continue;
            }
            self.run_builtin_tool(processor, run, &call).await?;
        }
        Ok(())
    }

    /// The doom-loop check of one call; false when the call was refused (and recorded as blocked).
    async fn doom_check(
        &self,
        processor: &mut Processor,
        run: &ToolRun<'_>,
        detector: &mut DoomLoopDetector,
        call: &Call,
    ) -> Result<bool, LoopError> {
        let Some(doom) = detector.record(&call.tool, &call.input) else {
            return Ok(true);
        };
        let allowed = match run.agent.doom_loop {
            DoomPolicy::Allow => true,
            DoomPolicy::Deny => false,
            DoomPolicy::Ask => self.ask(processor, run, call, "doom_loop").await?,
        };
        if allowed {
            detector.allow_pattern(&doom);
            return Ok(true);
        }
        let kind = if run.inputs.is_client_tool(&call.tool) {
            ToolKind::Client
        } else {
            ToolKind::Builtin
        };
        self.metrics.tool_call(kind, CallOutcome::Denied);
        let mut out = Vec::new();
        processor.parts_mut().block(
            &call.call_id,
            Blocked::DoomLoop,
            "refused: the same tool calls keep repeating (doom loop)",
            now(),
            &mut out,
        );
        self.effects.apply(&mut out, run.fence, processor).await?;
        Ok(false)
    }

    /// Asks the caller to run a client tool and waits for the answer (or the agent's timeout). False when the loop
    /// was cancelled while waiting.
    async fn run_client_tool(
        &self,
        processor: &mut Processor,
        run: &ToolRun<'_>,
        client: &pb::ClientTool,
        call: &Call,
    ) -> Result<bool, LoopError> {
        let mut out = Vec::new();
        let schema: serde_json::Value =
            serde_json::from_str(&client.input_schema_json).unwrap_or(serde_json::json!({}));
        if let Err(e) = tools::validate_input(&schema, &call.input) {
            self.metrics.tool_call(ToolKind::Client, CallOutcome::Error);
            processor
                .parts_mut()
                .tool_finished(&call.call_id, Err(e), now(), &mut out);
            self.effects.apply(&mut out, run.fence, processor).await?;
            return Ok(true);
        }
        processor.parts_mut().mark_client_tool(&call.call_id);
        let part = processor
            .parts()
            .iter()
            .find(|p| matches!(&p.kind, Some(pb::part::Kind::Tool(t)) if t.call_id == call.call_id))
            .cloned();
        let session_id = processor.message().session_id.clone();
        // Written before the caller is asked: the call's `client` mark must survive a replica that dies while the
        // caller runs the tool, so the loop that resumes the session waits for the same answer.
        if let Some(part) = &part {
            self.publisher
                .put_part(Box::new(part.clone()), run.fence)
                .await?;
        }
        let timeout = run.agent.client_tool_timeout;
        // Only a call the loop asks about can be answered (see `Mailboxes::expect_answer`).
        self.mailboxes
            .expect_answer(&session_id, Asked::ToolResult(&call.call_id))
            .await?;
        self.publisher
            .publish(
                &session_id,
                pb::session_event::Event::ToolCallAwaiting(pb::ToolCallAwaiting {
                    part_id: part.map(|p| p.id).unwrap_or_default(),
                    message_id: processor.message().id.clone(),
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    input_json: call.input.clone(),
                    deadline: Some(Timestamp::from(SystemTime::now() + timeout)),
                }),
            )
            .await?;
        let answer = tokio::select! {
            _ = run.cancel.cancelled() => return Ok(false),
            a = self.mailboxes.wait_tool_result(&session_id, &call.call_id, timeout) => a?,
        };
        let result = match answer {
            Some((output, false)) => Ok(output),
            Some((output, true)) => Err(output),
            None => Err(format!("the client did not answer within {timeout:?}")),
        };
        self.metrics
            .tool_call(ToolKind::Client, tool_outcome(&result));
        processor
            .parts_mut()
            .tool_finished(&call.call_id, result, now(), &mut out);
        self.effects.apply(&mut out, run.fence, processor).await?;
        Ok(true)
    }

    /// Runs a built-in workspace tool the agent allows (asking the caller when a rule says so).
    async fn run_builtin_tool(
        &self,
        processor: &mut Processor,
        run: &ToolRun<'_>,
        call: &Call,
    ) -> Result<(), LoopError> {
        let mut out = Vec::new();
        let (Some(ws), true) = (run.workspace, run.agent.tools.contains(&call.tool)) else {
            self.metrics
                .tool_call(ToolKind::Builtin, CallOutcome::Error);
            processor.parts_mut().tool_finished(
                &call.call_id,
                Err(format!("unknown tool `{}`", call.tool)),
                now(),
                &mut out,
            );
            return self.effects.apply(&mut out, run.fence, processor).await;
        };
        let parsed: serde_json::Value =
            serde_json::from_str(&call.input).unwrap_or(serde_json::Value::Null);
        let allowed = match run.agent.permissions.decide(&call.tool, &parsed) {
            Decision::Allow => true,
            Decision::Deny => false,
            Decision::Ask => self.ask(processor, run, call, "rule").await?,
        };
        if !allowed {
            self.metrics
                .tool_call(ToolKind::Builtin, CallOutcome::Denied);
            processor.parts_mut().block(
                &call.call_id,
                Blocked::PermissionDenied,
                &format!("permission denied for `{}`", call.tool),
                now(),
                &mut out,
            );
            return self.effects.apply(&mut out, run.fence, processor).await;
        }
        // Aborting drops the call, which kills a running command's processes.
        let outcome = tokio::select! {
            _ = run.cancel.cancelled() => return Ok(()),
            o = tools::run_builtin(ws, &call.tool, &call.input, &run.agent.tool_limits) => o,
        };
        let result = match outcome {
            ToolOutcome::Ok(s) => Ok(s),
            ToolOutcome::Err(s) => Err(s),
        };
        self.metrics
            .tool_call(ToolKind::Builtin, tool_outcome(&result));
        processor
            .parts_mut()
            .tool_finished(&call.call_id, result, now(), &mut out);
        self.effects.apply(&mut out, run.fence, processor).await
    }

    /// Publishes a permission request and waits for the reply; no reply within the agent's permission timeout is a
    /// denial. The request is recorded for Diagnose while it waits.
    async fn ask(
        &self,
        processor: &Processor,
        run: &ToolRun<'_>,
        call: &Call,
        reason: &str,
    ) -> Result<bool, LoopError> {
        let session_id = processor.message().session_id.clone();
        let timeout: Duration = run.agent.permission_timeout;
        let asked = pb::PermissionAsked {
            permission_id: crate::ids::new("per"),
            tool: call.tool.clone(),
            input_json: call.input.clone(),
            reason: reason.into(),
            deadline: Some(Timestamp::from(SystemTime::now() + timeout)),
        };
        if let Err(e) = self
            .mailboxes
            .set_asking(&session_id, &asked, timeout)
            .await
        {
            tracing::warn!(message = "cannot record the permission request for Diagnose", session_id = %session_id, error = %e);
        }
        let permission_id = asked.permission_id.clone();
        self.mailboxes
            .expect_answer(&session_id, Asked::Permission(&permission_id))
            .await?;
        self.publisher
            .publish(
                &session_id,
                pb::session_event::Event::PermissionAsked(asked),
            )
            .await?;
        let reply = tokio::select! {
            _ = run.cancel.cancelled() => None,
            r = self.mailboxes.wait_permission(&session_id, &permission_id, timeout) => r?,
        };
        if let Err(e) = self.mailboxes.clear_asking(&session_id).await {
            tracing::warn!(message = "cannot clear the recorded permission request", session_id = %session_id, error = %e);
        }
        Ok(reply.unwrap_or(false))
    }
}
