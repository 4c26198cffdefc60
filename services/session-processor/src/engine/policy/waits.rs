//! How long the loop waits: before retrying a failed step (the retry rule), and after a storage failure.

use std::time::Duration;

use super::{FailureSource, Rules, StepFailure};
use crate::retry;

/// First delay after a storage failure; doubled per consecutive failure up to [`STORAGE_MAX_DELAY`].
pub const STORAGE_BASE_DELAY: Duration = Duration::from_millis(50);
/// Longest delay between storage attempts.
pub const STORAGE_MAX_DELAY: Duration = Duration::from_millis(1000);

/// How long to wait before retrying a failed step that `retries` retries already ran again, or `None` to stop on its
/// error. `elapsed` is the time since the step's first attempt.
///
/// The gateway retries everything it can before output reaches the processor, so the loop retries only what it
/// could not:
/// - the gateway was unreachable (or its stream broke before any output): backoff, as often as the step's
///   deadline allows (a gateway restart must not fail the step);
/// - output had started: the agent's `step_retries`, with backoff and the provider's `retry_after`;
/// - the provider asked to wait longer than the gateway waits: that wait, within the agent's
///   `max_retry_after` and `step_retries`.
///
/// Every wait must end before the step's deadline.
pub(super) fn step_retry(
    rules: &Rules,
    retries: u32,
    f: &StepFailure,
    jitter: f64,
    elapsed: Duration,
) -> Option<Duration> {
    let policy = &rules.retry;
    let delay = if f.source == FailureSource::Transport && !f.output_started {
        Some(retry::backoff(policy, retries + 1, jitter))
    } else if f.output_started {
        let failure = crate::processor::Failure {
            kind: f.kind,
            retryable: f.retryable,
            retry_after: f.retry_after,
            retry_after_beyond_cap: f.beyond_gateway_cap,
        };
        match retry::decide(&failure, retries + 1, policy, jitter) {
            retry::Decision::RetryAfter(d) => Some(d),
            retry::Decision::Stop(_) => None,
        }
    } else if f.beyond_gateway_cap
        && f.retryable
        && retries < policy.max_retries
        && let Some(after) = f.retry_after
        && after <= policy.max_retry_after
    {
        Some(after)
    } else {
        None
    }?;
    (elapsed + delay < rules.step_deadline).then_some(delay)
}

/// The wait after the `failures`-th consecutive storage failure (1-based): doubled per failure, capped.
pub(super) fn storage(failures: u32) -> Duration {
    STORAGE_BASE_DELAY
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(STORAGE_MAX_DELAY)
}
