//! What the policy asks the driver to do ([`Action`]), and the errors a loop stores when it stops.

use std::time::Duration;

use llm_proto::sessions as pb;

use super::StopReason;

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// The loop decided (not the caller's `Compact`).
    pub auto: bool,
    /// The context did not fit (a provider overflow error or the pre-call estimate), as opposed to a step that
    /// merely reached the usable limit.
    pub overflow: bool,
}

/// An assistant message `done` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// Its id.
    pub message_id: String,
    /// Its finish.
    pub finish: String,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Persist the prompts queued while the loop was busy.
    DeliverQueue,
    /// Read the history from the last completed compaction on, closing what a stopped replica left open.
    ReadHistory,
    /// Wait for the open client calls a stopped replica left (their remaining time), then read again.
    AwaitClientCalls,
    /// Check the session's and its tenant's budget.
    CheckBudget,
    /// Compact the history with `model`.
    Compact {
        /// Why.
        cause: Compaction,
        /// The model that writes the summary.
        model: String,
    },
    /// Run one model step.
    Step {
        /// The model.
        model: String,
        /// The last step the agent allows: text only.
        final_step: bool,
    },
    /// Wait before going on, showing why.
    Wait {
        /// How long.
        delay: Duration,
        /// Why.
        why: WaitFor,
    },
    /// Prove the lease is still this loop's (a fenced renewal) after storage failed.
    ProveLease,
    /// Publish `error`; with `store`, also store it on the current answer (or on a new empty one when there is
    /// none), so the user message has an answer that says why.
    Fail {
        /// The error.
        error: pb::MessageError,
        /// Whether it goes on an answer (false: a refused request, such as a manual compaction over budget).
        store: bool,
        /// The stop it causes.
        reason: StopReason,
    },
    /// End the loop: status idle, the stop reason on the answer, `done`.
    Finish {
        /// The answer `done` names, when the loop produced one.
        answer: Option<Answer>,
        /// Why the loop stopped.
        reason: StopReason,
        /// Publish the answer's stored error first: a step failed and is not retried (an error the loop decided,
        /// through `Fail`, is published there).
        report_error: bool,
    },
    /// The lease cannot be proven: end this replica's streams and leave the session to recovery, which closes or
    /// resumes it.
    HandOff {
        /// The answer in progress, when there is one.
        answer: Option<Answer>,
    },
    /// The session is gone: end this replica's streams, release the lease, write nothing more.
    Abandon,
}

/// Why the loop waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// A failed step runs again (its `attempt`-th retry): shown with a retry part and the retry status.
    StepRetry {
        /// 1-based.
        attempt: u32,
    },
    /// Storage failed; the loop tries again (its `attempt`-th time) while the lease holds.
    Storage {
        /// 1-based.
        attempt: u32,
    },
}

/// An error of the loop's own (not the provider's).
pub(super) fn api_error(message: &str) -> pb::MessageError {
    pb::MessageError {
        kind: pb::message_error::Kind::Api as i32,
        message: message.into(),
        http_status: 0,
        retryable: false,
    }
}

/// The error of a spent budget.
pub fn budget_error(message: String) -> pb::MessageError {
    pb::MessageError {
        kind: pb::message_error::Kind::BudgetExceeded as i32,
        message,
        http_status: 0,
        retryable: false,
    }
}

/// The error of a context that cannot be made to fit.
pub fn overflow_error(message: String) -> pb::MessageError {
    pb::MessageError {
        kind: pb::message_error::Kind::ContextOverflow as i32,
        message,
        http_status: 0,
        retryable: false,
    }
}

/// The stop an answer's error causes.
pub(super) fn reason_for_error(kind: Option<pb::message_error::Kind>) -> StopReason {
    use pb::message_error::Kind;
    match kind {
        Some(Kind::BudgetExceeded) => StopReason::Budget,
        Some(Kind::ContextOverflow) => StopReason::ContextOverflow,
        Some(Kind::StructuredOutput) => StopReason::StructuredOutput,
        Some(Kind::Aborted) => StopReason::Aborted,
        _ => StopReason::Error,
    }
}
