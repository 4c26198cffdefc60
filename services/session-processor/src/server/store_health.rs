//! Health that tells the truth about storage: Redis is probed on an interval, and once it has been unreachable for
//! the configured grace, `SessionService`'s health says `NOT_SERVING`, so a load balancer or a readiness probe takes
//! this replica out while it cannot serve; the first answer after that brings it back. The server's own status
//! (`""`, what liveness probes ask) stays `SERVING`: an outage of Redis is no reason to restart the processor.
//!
//! [`StoreHealth`] is the decision, pure (fed probe results and times); [`watch_store`] is the loop that probes and
//! reports.

use std::time::{Duration, Instant};

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// What the probes have shown so far.
#[derive(Debug)]
pub struct StoreHealth {
    grace: Duration,
    /// When the current run of failed probes began.
    failing_since: Option<Instant>,
    serving: bool,
}

impl StoreHealth {
    /// Serving, until probes fail for `grace`.
    pub fn new(grace: Duration) -> StoreHealth {
        StoreHealth {
            grace,
            failing_since: None,
            serving: true,
        }
    }

    /// Takes one probe's result at `now`; the new status when it changes.
    pub fn observe(&mut self, reachable: bool, now: Instant) -> Option<bool> {
        let serving = if reachable {
            self.failing_since = None;
            true
        } else {
            let since = *self.failing_since.get_or_insert(now);
            now.duration_since(since) < self.grace
        };
        (serving != self.serving).then(|| {
            self.serving = serving;
            serving
        })
    }
}

/// How often Redis is probed: a quarter of the grace, at most every half second.
pub fn probe_interval(grace: Duration) -> Duration {
    (grace / 4).min(Duration::from_millis(500))
}

/// Probes with `ping` (each bounded by the interval) for as long as the server runs, reporting changes of
/// `service`'s status to `reporter`.
pub async fn watch_store<F, Fut>(
    reporter: HealthReporter,
    service: &'static str,
    grace: Duration,
    ping: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let interval = probe_interval(grace);
    let mut health = StoreHealth::new(grace);
    loop {
        let reachable = tokio::time::timeout(interval, ping())
            .await
            .unwrap_or(false);
        if let Some(serving) = health.observe(reachable, Instant::now()) {
            let status = if serving {
                tracing::info!(message = "storage reachable again; health SERVING");
                ServingStatus::Serving
            } else {
                tracing::warn!(
                    message = "storage unreachable past its grace; health NOT_SERVING",
                    grace_ms = grace.as_millis() as u64
                );
                ServingStatus::NotServing
            };
            reporter.set_service_status(service, status).await;
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
#[path = "store_health_tests.rs"]
mod tests;
