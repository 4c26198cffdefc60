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
    let exp = policy
        .base_delay
        .saturating_mul(1u32 << (attempt - 1).min(16))
        .min(policy.max_delay);
    let backoff = exp.mul_f64(1.0 - 0.2 * jitter.clamp(0.0, 1.0));
    Decision::RetryAfter(backoff.max(failure.retry_after.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(2),
            max_retry_after: Duration::from_secs(60),
        }
    }

    fn failure(kind: gw::ErrorKind, retryable: bool, after: Option<u64>) -> Failure {
        Failure {
            kind,
            retryable,
            retry_after: after.map(Duration::from_millis),
            retry_after_beyond_cap: false,
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_only_shortens_it() {
        let f = failure(gw::ErrorKind::ProviderError, true, None);
        let delays: Vec<_> = (1..=3).map(|a| decide(&f, a, &policy(), 0.0)).collect();
        assert_eq!(
            delays,
            [500, 1000, 2000].map(|ms| Decision::RetryAfter(Duration::from_millis(ms)))
        );
        assert_eq!(
            decide(&f, 1, &policy(), 1.0),
            Decision::RetryAfter(Duration::from_millis(400))
        );
    }

    #[test]
    fn the_providers_retry_after_is_honoured() {
        let f = failure(gw::ErrorKind::RateLimited, true, Some(1_500));
        assert_eq!(
            decide(&f, 1, &policy(), 0.5),
            Decision::RetryAfter(Duration::from_millis(1_500))
        );
        let long = failure(gw::ErrorKind::RateLimited, true, Some(120_000));
        assert_eq!(
            decide(&long, 1, &policy(), 0.0),
            Decision::Stop(StopReason::RetryAfterTooLong(Duration::from_secs(120)))
        );
    }

    #[test]
    fn attempts_are_bounded() {
        let f = failure(gw::ErrorKind::Overloaded, true, None);
        assert!(matches!(
            decide(&f, 3, &policy(), 0.0),
            Decision::RetryAfter(_)
        ));
        assert_eq!(
            decide(&f, 4, &policy(), 0.0),
            Decision::Stop(StopReason::Exhausted)
        );
    }

    #[test]
    fn auth_quota_invalid_requests_and_filters_stop_at_once() {
        for kind in [
            gw::ErrorKind::Auth,
            gw::ErrorKind::InvalidRequest,
            gw::ErrorKind::ContentFilter,
            gw::ErrorKind::Cancelled,
        ] {
            // Even when something upstream marked them retryable.
            assert_eq!(
                decide(&failure(kind, true, None), 1, &policy(), 0.0),
                Decision::Stop(StopReason::NotRetryable),
                "{kind:?}"
            );
        }
        assert_eq!(
            decide(
                &failure(gw::ErrorKind::ProviderError, false, None),
                1,
                &policy(),
                0.0
            ),
            Decision::Stop(StopReason::NotRetryable)
        );
    }
}
