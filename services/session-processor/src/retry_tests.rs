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
