//! One model step: the request built, the pre-call overflow check, the assistant message created, the gateway's
//! stream turned into parts by the Processor (effects persisted and published as they come), the step's tools run,
//! the end snapshot, cleanup, and the totals settled. What happened goes back to the policy as a [`StepReport`].

use std::sync::Arc;
use std::time::Instant;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;
use tonic_types::StatusExt as _;
use tracing::Instrument;

use super::effects::Effects;
use super::gateway::{GatewayClient, with_session};
use super::inputs::RunInputs;
use super::policy::{Answer, FailureSource, Observation, StepFailure, StepReport};
use super::request::{LAST_STEP_SYSTEM, StepRequest, render};
use super::step_metrics::{record_step, record_step_metrics};
use super::tools_run::{ToolRun, ToolRunner};
use super::totals::Totals;
use super::{LoopError, now};
use crate::config::{Agent, Config};
use crate::context;
use crate::events::{DeltaSink, Publisher};
use crate::history;
use crate::ids;
use crate::metrics::{Metrics, PromptPhase};
use crate::processor::{Effect, Processor};
use crate::snapshot::StepSnapshots;
use crate::step_event::StepEvent;
use crate::store::{Fence, Messages, Sessions};
use crate::structured;
use crate::tools::{DoomLoopDetector, Workspace};

/// What one step runs with.
pub(super) struct StepInput<'a> {
    /// The session.
    pub session: &'a pb::Session,
    /// Its agent.
    pub agent: &'a Agent,
    /// The history from the last completed compaction on.
    pub history: &'a [pb::Message],
    /// The session's workspace.
    pub workspace: Option<&'a Workspace>,
    /// Its step snapshots, when on.
    pub snapshots: Option<&'a StepSnapshots>,
    /// The run's inputs.
    pub inputs: &'a RunInputs,
    /// The loop's lease.
    pub fence: &'a Fence,
    /// The caller's abort (or the lease's loss).
    pub cancel: &'a CancellationToken,
    /// The model.
    pub model: &'a str,
    /// The last step the agent allows.
    pub final_step: bool,
    /// The model's usable context, when the catalog knows it.
    pub usable: Option<u64>,
    /// The step's number in this loop (1-based), for its span.
    pub number: u32,
}

/// How a step's gateway stream ended.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StreamEnd {
    /// The caller aborted (or the lease was lost) while it streamed.
    pub aborted: bool,
    /// A `step_start` (or any output) arrived.
    output_started: bool,
    /// The gateway could not be reached or its stream broke.
    transport: bool,
}

/// Runs model steps: the gateway call, its stream through the Processor, the step's tools and its close.
pub(super) struct Steps {
    /// The step's deadline.
    pub(super) config: Arc<Config>,
    pub(super) gateway: GatewayClient,
    pub(super) publisher: Publisher,
    pub(super) metrics: Arc<Metrics>,
    /// The session summary a step's end snapshot updates.
    pub(super) sessions: Sessions,
    pub(super) messages: Messages,
    pub(super) effects: Arc<Effects>,
    pub(super) totals: Arc<Totals>,
    pub(super) tools: ToolRunner,
}

impl Steps {
    /// Runs one step; returns what the policy observes and the step's message as finally written (`None` when the
    /// model was not called).
    pub(super) async fn run_step(
        &self,
        input: &StepInput<'_>,
    ) -> Result<(Observation, Option<pb::Message>), LoopError> {
        let history = input.history;
        // Borrowed only in this block: a local borrowed in an async fn keeps its room in the future until its
        // scope ends, and the request is moved into the gateway call, not needed while the step streams.
        let (generation, mut turn) = {
            let (generation, turn) = prepare(input);
            // The pre-call overflow check, on an estimate (see `context`); skipped when auto-compaction is off, so
            // that only the provider's own answer can fail the step.
            let estimate = context::estimate_generation(&generation);
            if let Some(usable) = input.usable
                && input.agent.auto_compact
                && estimate >= usable
            {
                return Ok((Observation::TooLarge { estimate, usable }, None));
            }
            (generation, turn)
        };
        let mut processor = new_processor(input, history);
        let span = step_span(input);
        let started = Instant::now();
        // The first step of a prompt's run: how long the prompt took to reach the gateway (and, below, to get its
        // first event back).
        let arrived = input.inputs.arrived.filter(|_| input.number == 1);
        if let Some(at) = arrived {
            self.metrics
                .prompt_phase(PromptPhase::GatewayCalled, at.elapsed());
        }
        // The gateway call starts at once; the step's message and start snapshot are written meanwhile (the
        // gateway answers with its first event, after the provider's first byte), and before any event is used.
        let (opened, called) = tokio::select! {
            // Boxed here and below: once per step, so the step's future (alive while it streams) keeps room only for
            // the streaming itself. The call is made inside the block, which then holds it once (moved in, it would
            // keep room for it twice: as captured and as joined).
            r = Box::pin(async {
                let call = self
                    .call_gateway(generation, &input.inputs.trace, &input.session.tenant)
                    .instrument(span.clone());
                tokio::join!(self.open_step(input, &mut processor), call)
            }) => r,
            // Aborted before the gateway answered: cleanup writes the message as aborted.
            _ = input.cancel.cancelled() => (Ok(()), Err(Box::new(tonic::Status::cancelled("aborted")))),
        };
        opened?;
        let end = match called {
            Ok(stream) => {
                self.consume(&mut processor, stream, input.fence, input.cancel, arrived)
                    .instrument(span.clone())
                    .await?
            }
            // Boxed: rare, and the streaming future keeps no room for it.
            Err(status) => {
                Box::pin(self.call_failed(&mut processor, &status, input.fence, input.cancel))
                    .await?
            }
        };
        let duration = started.elapsed();
        if !end.aborted {
            let run = tool_run(input);
            let detector = doom_detector(history);
            Box::pin(
                self.tools
                    .run_tools(&mut processor, &run, &mut turn, detector),
            )
            .await?;
        }
        let aborted = end.aborted || input.cancel.is_cancelled();
        Box::pin(self.close_step(input, &mut processor, &turn, aborted)).await?;
        record_step(&span, processor.message());
        record_step_metrics(&self.metrics, processor.message(), input.model, duration);
        let report = report(&processor, history, &end, aborted);
        Ok((
            Observation::Stepped(report),
            Some(processor.message().clone()),
        ))
    }

    /// Writes the step's assistant message, with its start snapshot taken first.
    async fn open_step(
        &self,
        input: &StepInput<'_>,
        processor: &mut Processor,
    ) -> Result<(), LoopError> {
        if let Some(s) = input.snapshots {
            processor.set_start_snapshot(s.start().await);
        }
        self.effects
            .apply(
                &mut vec![Effect::Message(Box::new(processor.message().clone()))],
                input.fence,
                processor,
            )
            .await
    }

    /// After the stream and the tools: the end snapshot and patch (covering the tools), cleanup, a missing
    /// structured output, and the step's accounting (session totals, tenant spend).
    async fn close_step(
        &self,
        input: &StepInput<'_>,
        processor: &mut Processor,
        turn: &structured::Turn,
        aborted: bool,
    ) -> Result<(), LoopError> {
        if let Some(s) = input.snapshots
            && let Some((after, changes)) = s.finish(processor.start_snapshot()).await
        {
            let mut out = Vec::new();
            processor.finish_snapshot(after.clone(), changes, &mut out);
            self.effects.apply(&mut out, input.fence, processor).await?;
            s.update_summary((&self.sessions, &self.messages), &after, input.fence)
                .await?;
        }
        let mut out = Vec::new();
        // Nothing at all came back (an empty stream): an empty answer, finished `other`, not an error.
        if !aborted {
            processor.finish_empty_answer();
        }
        processor.cleanup(now(), aborted, &mut out);
        if processor.outcome() == crate::processor::Outcome::Continue
            && let Some(error) = turn.missing(processor.message(), input.final_step)
        {
            processor.fail(error, &mut out);
        }
        self.effects
            .apply_later(&mut out, input.fence, processor)
            .await?;
        // Written with the step's last parts (the tenant charged once they are in): see `settle_session`.
        self.totals
            .settle_session(
                input.session,
                processor.message(),
                processor.parts(),
                input.fence,
                processor.message().cost_nano_usd,
            )
            .await?;
        Ok(())
    }

    /// Streams one step through the processor.
    pub(super) async fn stream_step(
        &self,
        processor: &mut Processor,
        generation: gw::Generation,
        (trace, tenant): (&[(String, String)], &str),
        fence: &Fence,
        cancel: &CancellationToken,
    ) -> Result<StreamEnd, LoopError> {
        let called = tokio::select! {
            _ = cancel.cancelled() => return Ok(StreamEnd { aborted: true, ..StreamEnd::default() }),
            c = self.call_gateway(generation, trace, tenant) => c,
        };
        match called {
            Ok(stream) => self.consume(processor, stream, fence, cancel, None).await,
            Err(status) => Box::pin(self.call_failed(processor, &status, fence, cancel)).await,
        }
    }

    /// The gateway's `Stream` call for one step (its deadline the step's, the run's trace context and the session's
    /// tenant on it).
    async fn call_gateway(
        &self,
        generation: gw::Generation,
        trace: &[(String, String)],
        tenant: &str,
    ) -> Result<Box<tonic::Streaming<StepEvent>>, Box<tonic::Status>> {
        let mut request = tonic::Request::new(gw::StreamRequest {
            generation: Some(generation),
        });
        request.set_timeout(self.config.step_timeout);
        with_session(&mut request, trace, tenant);
        let mut gateway = super::gateway::local_client().unwrap_or_else(|| self.gateway.clone());
        // Both sides boxed: the result is held by the step's future while it streams (and an async fn keeps its
        // argument twice), so inline it would cost the future a few hundred bytes per copy for the whole step.
        gateway
            .stream_step(request)
            .await
            .map(Box::new)
            .map_err(Box::new)
    }

    /// The failure to call the gateway, through the processor as the step's error.
    async fn call_failed(
        &self,
        processor: &mut Processor,
        status: &tonic::Status,
        fence: &Fence,
        cancel: &CancellationToken,
    ) -> Result<StreamEnd, LoopError> {
        let (error, transport) = call_error(status);
        let end = StreamEnd {
            transport,
            aborted: cancel.is_cancelled(),
            ..StreamEnd::default()
        };
        self.effects
            .feed(
                processor,
                error_event(error).into(),
                fence,
                &mut Vec::new(),
                &DeltaSink::LOOK_UP,
            )
            .await?;
        Ok(end)
    }

    /// Feeds a step's gateway stream through the processor until it ends. `arrived`: when the prompt whose first
    /// step this is reached the engine (its first event is then timed).
    async fn consume(
        &self,
        processor: &mut Processor,
        mut stream: Box<tonic::Streaming<StepEvent>>,
        fence: &Fence,
        cancel: &CancellationToken,
        mut arrived: Option<Instant>,
    ) -> Result<StreamEnd, LoopError> {
        // Grown on demand: an `Effect` is the size of a whole message, and most events make one.
        let mut out = Vec::new();
        let mut end = StreamEnd::default();
        // The session's channel, looked up once for the stream's deltas.
        let sink = self.publisher.delta_sink(&processor.message().session_id);
        // Registered with the token once for the whole stream, not once per event.
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        loop {
            // In a block of its own: what was read and the event made of it are gone before the feed is awaited,
            // so the stream's future keeps no room for them meanwhile.
            let fed = {
                let next = tokio::select! {
                    biased;
                    () = &mut cancelled => {
                        // Dropping the stream cancels the gateway call, which drops the provider request.
                        Box::pin(self.publisher.flush_parts(&processor.message().session_id)).await?;
                        end.aborted = true;
                        return Ok(end);
                    }
                    n = stream.message() => n,
                };
                let event = match next {
                    Ok(Some(ev)) => {
                        if let Some(at) = arrived.take() {
                            self.metrics
                                .prompt_phase(PromptPhase::FirstEvent, at.elapsed());
                        }
                        end.output_started |= ev.is_output();
                        ev
                    }
                    Ok(None) => break,
                    Err(status) => {
                        end.transport = true;
                        error_event(gw::Error {
                            kind: gw::ErrorKind::Network as i32,
                            message: format!("gateway stream broke: {}", status.message()),
                            retryable: true,
                            ..Default::default()
                        })
                        .into()
                    }
                };
                self.effects.feed(processor, event, fence, &mut out, &sink)
            };
            fed.await?;
            if end.transport {
                break;
            }
        }
        // The step's last parts wait for its end (`close_step`), or for its tools (`run_tools` writes them first).
        Ok(end)
    }
}

/// The step's span; its usage and finish are recorded when it ends (`record_step`).
fn step_span(input: &StepInput<'_>) -> tracing::Span {
    tracing::info_span!(
        target: llm_telemetry::TRACE_SPAN_TARGET,
        "session.step",
        "otel.name" = %format!("step {}", input.number),
        "session.id" = %input.session.id,
        "llm.step" = i64::from(input.number),
        "gen_ai.request.model" = %input.model,
        "gen_ai.usage.input_tokens" = tracing::field::Empty,
        "gen_ai.usage.output_tokens" = tracing::field::Empty,
        "llm.cost_nano_usd" = tracing::field::Empty,
        "llm.finish" = tracing::field::Empty,
    )
}

fn error_event(e: gw::Error) -> gw::StreamResponse {
    gw::StreamResponse {
        event: Some(gw::stream_response::Event::Error(e)),
    }
}

/// A failed `Stream` call as a unified error, and whether it is a transport failure (the gateway unreachable or
/// overloaded: worth retrying within the step's deadline) rather than the gateway refusing the request.
fn call_error(status: &tonic::Status) -> (gw::Error, bool) {
    use tonic::Code;
    let retry_after = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .and_then(|d| prost_types::Duration::try_from(d).ok());
    let (kind, transport) = match status.code() {
        Code::Unavailable | Code::Unknown | Code::Aborted => (gw::ErrorKind::Network, true),
        Code::ResourceExhausted if retry_after.is_some() => (gw::ErrorKind::Overloaded, true),
        Code::ResourceExhausted => (gw::ErrorKind::RateLimited, false),
        Code::DeadlineExceeded => (gw::ErrorKind::Timeout, false),
        Code::Unauthenticated | Code::PermissionDenied => (gw::ErrorKind::Auth, false),
        Code::Cancelled => (gw::ErrorKind::Cancelled, false),
        _ => (gw::ErrorKind::InvalidRequest, false),
    };
    let error = gw::Error {
        kind: kind as i32,
        message: format!("gateway: {}", status.message()),
        retryable: transport,
        retry_after,
        ..Default::default()
    };
    (error, transport)
}

/// A Processor for the step's new assistant message (answering the latest user message).
fn new_processor(input: &StepInput<'_>, history: &[pb::Message]) -> Processor {
    let parent = history
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::User)
        .map(|m| m.id.clone())
        .unwrap_or_default();
    let message = pb::Message {
        id: ids::new("msg"),
        session_id: input.session.id.clone(),
        role: pb::Role::Assistant as i32,
        parent_id: parent,
        model: input.model.into(),
        agent: input.agent.name.clone(),
        created_at: Some(now()),
        ..Default::default()
    };
    Processor::new(message, input.usable)
}

/// The step's request and its structured-output turn (the format the latest prompt asks for, the corrections so
/// far).
fn prepare(input: &StepInput<'_>) -> (gw::Generation, structured::Turn) {
    let history = input.history;
    let format = history::output_format(history).and_then(|f| {
        structured::Format::from_proto(&f)
            .inspect_err(
                |e| tracing::warn!(message = "ignoring a stored output format", session_id = %input.session.id, error = %e),
            )
            .ok()
            .flatten()
    });
    let turn = structured::Turn::new(format, structured::failures_so_far(history));
    let render = render(history, input.agent, input.usable, false);
    let mut generation = StepRequest {
        session: input.session,
        agent: input.agent,
        history,
        render: &render,
        model: input.model,
        inputs: input.inputs,
        has_workspace: input.workspace.is_some(),
        final_step: input.final_step,
    }
    .generation();
    turn.decorate(&mut generation, input.final_step, LAST_STEP_SYSTEM);
    (generation, turn)
}

/// What the policy learns from a finished step.
fn report(
    processor: &Processor,
    history: &[pb::Message],
    end: &StreamEnd,
    aborted: bool,
) -> StepReport {
    let message = processor.message();
    StepReport {
        answer: Answer {
            message_id: message.id.clone(),
            finish: message.finish.clone(),
        },
        outcome: processor.outcome(),
        error: message.error.as_ref().map(|e| e.kind()),
        overflowed: processor.overflowed(),
        failure: processor.failure().map(|f| StepFailure {
            source: if end.transport {
                FailureSource::Transport
            } else {
                FailureSource::Gateway
            },
            kind: f.kind,
            retryable: f.retryable,
            retry_after: f.retry_after,
            output_started: end.output_started,
            beyond_gateway_cap: f.retry_after_beyond_cap,
        }),
        blocked: processor.parts().blocked(),
        aborted,
        answered: !history::needs_work_after(history, message),
        empty: processor.is_empty_answer(),
        jitter: rand::random::<f64>(),
    }
}

/// What the step's tools run with.
fn tool_run<'a>(input: &StepInput<'a>) -> ToolRun<'a> {
    ToolRun {
        agent: input.agent,
        workspace: input.workspace,
        inputs: input.inputs,
        fence: input.fence,
        cancel: input.cancel,
    }
}

/// Rebuilds the doom-loop detector from every tool call in the session, so repeats are caught across turns and
/// replicas without storing the detector itself.
fn doom_detector(history: &[pb::Message]) -> DoomLoopDetector {
    let mut d = DoomLoopDetector::new();
    for m in history {
        for p in &m.parts {
            if let Some(pb::part::Kind::Tool(t)) = &p.kind {
                let input = t
                    .state
                    .as_ref()
                    .map(|s| s.input_json.as_str())
                    .unwrap_or("{}");
                let _ = d.record(&t.tool, input);
            }
        }
    }
    d
}
