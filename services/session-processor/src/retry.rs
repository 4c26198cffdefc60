//! Whether and when a failed step runs again (docs/architecture.md "The loop as a policy", the retry rule).
//!
//! The gateway already retried everything it could before output reached the processor; what arrives here failed
//! after output started (or after the gateway's own attempts were spent). The decision is pure so it is tested rule
//! by rule; the loop only sleeps.

use std::time::Duration;

use llm_proto::gateway as gw;

use crate::config::RetryPolicy;
use crate::processor::Failure;

/// What to do about a failed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run the step again after this delay.
    RetryAfter(Duration),
    /// Stop the loop with the error.
    Stop(StopReason),
}

/// Why a failed step is not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The error cannot go away by retrying (auth, quota, invalid request, content filter, or the gateway said so).
    NotRetryable,
    /// Every allowed retry was used.
    Exhausted,
    /// The provider asked to wait longer than the agent's `max_retry_after_ms`.
    RetryAfterTooLong(Duration),
}

/// Kinds that no retry can fix, whatever the `retryable` flag says: credentials and billing (quota is classified
/// as auth by the gateway), a request the provider refuses, a content filter, and a caller's cancellation.
fn never_retried(kind: gw::ErrorKind) -> bool {
    matches!(
        kind,
        gw::ErrorKind::Auth
            | gw::ErrorKind::InvalidRequest
            | gw::ErrorKind::ContentFilter
            | gw::ErrorKind::Cancelled
    )
}

/// Decides about the `attempt`-th retry (1-based) of a step that failed with `failure`.
///
/// The delay is exponential backoff (`base · 2^(attempt-1)`, capped at `max_delay`) with up to 20 % jitter
/// subtracted (so replicas that failed together do not retry together, and the cap still holds), raised to the
/// provider's `retry_after` when that is longer: waiting less than the provider asked only earns another 429.
pub fn decide(failure: &Failure, attempt: u32, policy: &RetryPolicy, jitter: f64) -> Decision {
    if !failure.retryable || never_retried(failure.kind) {
        return Decision::Stop(StopReason::NotRetryable);
    }
    if attempt == 0 || attempt > policy.max_retries {
        return Decision::Stop(StopReason::Exhausted);
    }
    if let Some(after) = failure.retry_after
        && after > policy.max_retry_after
    {
        return Decision::Stop(StopReason::RetryAfterTooLong(after));
    }
    let backoff = backoff(policy, attempt, jitter);
    Decision::RetryAfter(backoff.max(failure.retry_after.unwrap_or_default()))
}

/// Exponential backoff for the `attempt`-th try (1-based): `base · 2^(attempt-1)`, capped, minus up to 20 % jitter.
pub fn backoff(policy: &RetryPolicy, attempt: u32, jitter: f64) -> Duration {
    policy
        .base_delay
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
        .min(policy.max_delay)
        .mul_f64(1.0 - 0.2 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
