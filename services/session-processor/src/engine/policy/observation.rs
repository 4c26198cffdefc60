//! What the driver reports to the policy after each action ([`Observation`]), with what it learnt.

use std::time::Duration;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

use super::Answer;
use crate::processor::{Blocked, Outcome};

/// What the driver learnt from the history it read (after closing what a stopped replica left open).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFacts {
    /// The latest user message has no finished answer yet.
    pub needs_work: bool,
    /// The latest answer overflowed and the compaction it needs never ran (its replica stopped in between).
    pub overflowed: bool,
    /// Client tool calls still waiting for the caller's answer (left by a replica that stopped while waiting).
    pub open_client_calls: usize,
    /// The model by the priority rule; `None` when no level names one.
    pub model: Option<String>,
}

/// Where a step's failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureSource {
    /// The gateway answered with an `error` event (after its own retries when no output had started).
    Gateway,
    /// The gateway could not be reached, or its stream broke.
    Transport,
}

/// How a model step failed, as the retry rules need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepFailure {
    /// Where it came from.
    pub source: FailureSource,
    /// The unified error kind.
    pub kind: gw::ErrorKind,
    /// Whether the gateway said a retry may succeed.
    pub retryable: bool,
    /// How long the provider asked to wait, when it said.
    pub retry_after: Option<Duration>,
    /// A `step_start` reached the processor before the failure: the gateway can no longer retry the step.
    pub output_started: bool,
    /// The gateway did not wait out `retry_after`, which is longer than the gateway's own cap.
    pub beyond_gateway_cap: bool,
}

/// What one model step ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    /// The step's assistant message.
    pub answer: Answer,
    /// The Processor's closeout.
    pub outcome: Outcome,
    /// The error stored on the message, if any.
    pub error: Option<pb::message_error::Kind>,
    /// The provider said the context does not fit.
    pub overflowed: bool,
    /// How the step failed, when the gateway or the transport failed it.
    pub failure: Option<StepFailure>,
    /// A refused tool call.
    pub blocked: Option<Blocked>,
    /// The caller aborted during the step.
    pub aborted: bool,
    /// The history with this step needs no more work (no tool calls, no compaction due).
    pub answered: bool,
    /// The model returned nothing at all: no text, no reasoning, no tool call.
    pub empty: bool,
    /// A random number in `[0, 1)` for the retry jitter (the policy itself has no randomness).
    pub jitter: f64,
}

/// How a compaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionEnd {
    /// The summary is written; the loop goes on from it.
    Done(Answer),
    /// It failed; its error (of this kind) is stored and published.
    Failed(Answer, Option<pb::message_error::Kind>),
    /// The caller aborted it.
    Aborted(Answer),
}

/// What the driver observed after performing an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// The loop starts.
    Started,
    /// [`super::Action::DeliverQueue`] persisted this many queued prompts.
    Delivered(usize),
    /// [`super::Action::ReadHistory`] read the history.
    History(HistoryFacts),
    /// [`super::Action::AwaitClientCalls`] settled the open client calls (answered or timed out).
    ClientCallsSettled,
    /// [`super::Action::CheckBudget`]: why the next model call must not happen, when a budget is spent.
    Budget(Option<String>),
    /// [`super::Action::Compact`] ended.
    Compacted(CompactionEnd),
    /// [`super::Action::Step`] did not call the model: the request's estimated size does not fit the usable context.
    TooLarge {
        /// Estimated tokens of the request.
        estimate: u64,
        /// Usable context of the model.
        usable: u64,
    },
    /// [`super::Action::Step`] ran the step.
    Stepped(StepReport),
    /// [`super::Action::Wait`] waited.
    Waited,
    /// [`super::Action::Fail`] stored (on this answer, when it was asked to) and published the error.
    Failed(Option<Answer>),
    /// [`super::Action::ProveLease`]: the lease is still this loop's.
    LeaseProven,
    /// The lease belongs to someone else now (or no longer exists).
    LeaseLost,
    /// Storage failed during the action; the lease was last proven `lease_age` ago.
    StorageFailed {
        /// Time since the lease was last proven.
        lease_age: Duration,
    },
    /// The caller aborted the loop between steps.
    Cancelled,
    /// The session no longer exists.
    Gone,
}
