//! The state of one generation in flight, polled by the caller's stream: forward decoded events, retry or fall
//! back before the first one, end with exactly one terminal event, record metrics once.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_proto::gateway as pb;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use crate::adapter::transport::classify;
use crate::adapter::transport::{Opening, ProviderStream, RequestSigner};
use crate::convert;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason, Usage};
use crate::metrics::{Ended, Metrics, Outcome};

use super::State;
use super::attempt::{Candidate, Prepared, falls_back, open_attempt, prepare};

/// Where a generation's time went, measured at the few awaits that matter. `Instant::now` is a vDSO read: no lock,
/// no allocation.
pub(super) struct Clock {
    pub(super) started: Instant,
    /// Time inside the gateway's own code paths (start-up, and every poll of the stream), waits included.
    pub(super) busy: Duration,
    /// Time of `busy` spent waiting on providers (open, body reads) or in retry delays.
    pub(super) waiting: Duration,
    /// When the poll in progress began: the end is recorded inside a poll, whose time must count too.
    pub(super) polled_at: Option<Instant>,
}

/// The state of one generation in flight.
pub(super) struct Run {
    pub(super) state: Arc<State>,
    pub(super) metrics: Arc<Metrics>,
    /// The in-flight slot, given back as soon as the terminal event is queued (or the stream is dropped).
    pub(super) permit: Option<OwnedSemaphorePermit>,
    /// The requested model, then its fallbacks, in order.
    pub(super) candidates: Vec<Candidate>,
    /// Index into `candidates` of the model being tried.
    pub(super) current: usize,
    /// The caller's request as sent, while a fallback may still need it.
    /// Boxed: most generations have no fallback, and the request type is large for a field every open stream holds.
    pub(super) pristine: Option<Box<pb::Generation>>,
    /// The current candidate's request; `None` until a fallback candidate has been prepared.
    pub(super) prepared: Option<Prepared>,
    /// The open provider response, if any.
    pub(super) stream: Option<ProviderStream>,
    /// The span of the provider request in progress; dropped (ended) when its response ends.
    pub(super) attempt_span: Option<tracing::Span>,
    /// 1-based number of provider requests made so far, across candidates.
    pub(super) attempt: u32,
    /// Provider requests made to the current candidate.
    pub(super) target_attempts: u32,
    /// One line per candidate that failed, for the final error message.
    pub(super) failures: Vec<String>,
    /// The last provider error and the candidate it came from, reported if every candidate fails.
    pub(super) last_error: Option<(usize, ProviderError)>,
    /// True once the first event went to the caller: from then on nothing is retried or fallen back.
    pub(super) started: bool,
    /// A tool call was emitted, so a `stop` finish is reported as `tool_calls`.
    pub(super) saw_tool_call: bool,
    /// The terminal event has been queued.
    pub(super) done: bool,
    /// Scratch buffer the decoder pushes into, reused across reads.
    pub(super) decoded: Vec<Event>,
    /// Events ready for the caller.
    pub(super) pending: VecDeque<pb::StreamResponse>,
    pub(super) clock: Clock,
    /// Set when the end has been recorded in the metrics.
    pub(super) outcome: Option<Outcome>,
    /// When the last keep-alive went to the caller: a provider that pings often is relayed at most every
    /// [`KEEP_ALIVE_EVERY`].
    pub(super) last_keep_alive: Option<Instant>,
}

/// The shortest time between two keep-alives relayed to the caller.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(5);

/// Whether a keep-alive may go to the caller now, the last one having gone at `last` (none within
/// [`KEEP_ALIVE_EVERY`]); if so, it counts as sent.
fn keep_alive_due(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|at| now.duration_since(at) < KEEP_ALIVE_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

impl Run {
    fn candidate(&self) -> &Candidate {
        // `current` only ever indexes `candidates` (it advances only while a next one exists).
        &self.candidates[self.current]
    }

    pub(super) async fn next(&mut self) -> Option<pb::StreamResponse> {
        let entered = Instant::now();
        self.clock.polled_at = Some(entered);
        let ev = self.step().await;
        self.clock.busy += entered.elapsed();
        self.clock.polled_at = None;
        ev
    }

    async fn step(&mut self) -> Option<pb::StreamResponse> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            // The rare paths (a fallback's hooks and request, a retry's back-off) are boxed: an async fn's state is
            // as large as its largest await, and this state lives as long as the stream (one allocation per open
            // stream), while those awaits happen at most a few times per generation.
            if self.prepared.is_none() {
                Box::pin(self.prepare_fallback()).await;
                continue;
            }
            if self.stream.is_none() {
                // Boxed like the other rare paths: the request future is large and done once the headers arrive.
                Box::pin(self.open_current()).await;
                continue;
            }
            let (Some(stream), Some(prepared)) = (self.stream.as_mut(), self.prepared.as_mut())
            else {
                continue;
            };
            let waited = Instant::now();
            let pumped = stream
                .pump(prepared.decoder.as_mut(), &mut self.decoded)
                .await;
            self.clock.waiting += waited.elapsed();
            match pumped {
                Ok(_) => self.forward_decoded().await,
                Err(e) => Box::pin(self.fail_or_retry(e)).await,
            }
        }
    }

    /// Opens the provider stream for the current candidate's prepared request, as a new attempt.
    async fn open_current(&mut self) {
        self.attempt += 1;
        self.target_attempts += 1;
        let (opened, span) = {
            let candidate = &self.candidates[self.current];
            let Some(prepared) = self.prepared.as_mut() else {
                return;
            };
            // One span per provider request, so retries and fallbacks show as separate attempts; the
            // provider sees that span as its parent (W3C `traceparent`).
            let span = crate::tracing_spans::attempt_span(
                &candidate.provider.id,
                &candidate.provider.base_url,
                &prepared.request.path,
                self.attempt,
            );
            llm_telemetry::inject_headers(&span, &mut prepared.request.headers);
            let waited = Instant::now();
            let opening = Opening {
                framing: prepared.framing,
                signer: candidate
                    .provider
                    .signer
                    .as_deref()
                    .map(|s| s as &dyn RequestSigner),
            };
            let opened = open_attempt(
                &self.state.transport,
                &candidate.provider,
                prepared.adapter,
                &prepared.request,
                opening,
            )
            .instrument(span.clone())
            .await;
            self.clock.waiting += waited.elapsed();
            (opened, span)
        };
        match opened {
            Ok(s) => {
                self.stream = Some(s);
                self.attempt_span = Some(span);
            }
            Err(e) => {
                crate::tracing_spans::attempt_failed(&span, &e);
                self.fail_or_retry(e).await;
            }
        }
    }

    /// Runs the hooks for the current (fallback) candidate and builds its request. A candidate that cannot be
    /// prepared (its hook refused, its adapter cannot translate the request) is skipped like a failed one.
    async fn prepare_fallback(&mut self) {
        let Some(generation) = self.pristine.as_deref().cloned() else {
            self.finish_failed();
            return;
        };
        let candidate = &self.candidates[self.current];
        match prepare(&self.state, &self.metrics, candidate, generation).await {
            Ok(p) => self.prepared = Some(p),
            Err(e) => {
                tracing::warn!(
                    message = "fallback model skipped",
                    model = %candidate.model.id,
                    error = %e,
                );
                self.failures
                    .push(format!("{}: not attempted: {e}", candidate.model.id));
                if self.current + 1 < self.candidates.len() {
                    self.advance();
                } else {
                    self.finish_failed();
                }
            }
        }
    }

    /// Moves to the next candidate.
    fn advance(&mut self) {
        self.current += 1;
        self.prepared = None;
        self.target_attempts = 0;
        self.metrics.fallback(&self.candidate().labels);
    }

    /// Moves decoded events to the caller's queue; a failure before the first forwarded event may be retried.
    async fn forward_decoded(&mut self) {
        if !self.started {
            // A keep-alive is not output: before the first real event it must not start the stream (which would end
            // the chance to retry), and there is no caller's connection yet to keep open.
            self.decoded.retain(|ev| !matches!(ev, Event::KeepAlive));
        }
        if self.decoded.is_empty() {
            return;
        }
        if !self.started {
            if let Some(Event::Error(e)) = self.decoded.first() {
                let e = e.clone();
                self.decoded.clear();
                Box::pin(self.fail_or_retry(e)).await;
                return;
            }
            self.started = true;
            // Nothing can fall back or retry any more: let the caller's request and the provider request body go,
            // rather than hold a copy of the whole conversation for the length of the stream.
            self.pristine = None;
            if let Some(p) = self.prepared.as_mut() {
                p.request.body = bytes::Bytes::new();
            }
            let headers = self
                .stream
                .as_mut()
                .map(ProviderStream::take_headers)
                .unwrap_or_default();
            let c = self.candidate();
            let start = convert::stream_start(&c.provider.id, &c.model, self.attempt, headers);
            self.metrics
                .first_event(&c.labels, self.clock.started.elapsed());
            self.pending.push_back(start);
            self.pending.push_back(convert::step_start());
        }
        let mut end: Option<(Outcome, Option<&'static str>, Option<Usage>)> = None;
        for mut ev in self.decoded.drain(..) {
            match &mut ev {
                Event::KeepAlive if !keep_alive_due(&mut self.last_keep_alive) => continue,
                Event::ToolCall { .. } => self.saw_tool_call = true,
                Event::Finish(f) => {
                    if self.saw_tool_call && f.reason == FinishReason::Stop {
                        f.reason = FinishReason::ToolCalls;
                    }
                    end = Some((Outcome::Ok, None, Some(f.usage)));
                }
                Event::Error(e) => {
                    if let Some(stream) = &self.stream {
                        stream.scrub(e);
                    }
                    scrub(e, &self.state.secrets);
                    self.metrics
                        .provider_error(&self.candidates[self.current].labels, e.kind.as_str());
                    end = Some((Outcome::Error, Some(e.kind.as_str()), None));
                }
                _ => {}
            }
            let model = &self.candidates[self.current].model;
            let pending = &mut self.pending;
            crate::limits::split_event(ev, self.state.config.limits.max_delta_bytes, |piece| {
                pending.push_back(convert::event_to_pb(piece, model));
            });
            if end.is_some() {
                break;
            }
        }
        self.decoded.clear();
        if let Some((outcome, kind, usage)) = end {
            self.done = true;
            self.stream = None;
            if let (Some(span), Outcome::Error) = (self.attempt_span.take(), &outcome) {
                span.record("error.type", kind.unwrap_or("provider_error"));
                span.record("otel.status_code", "ERROR");
            }
            self.record_end(outcome, kind, usage);
        }
    }

    /// Retries `err` when nothing reached the caller yet and the policy allows, else falls back to the next model
    /// when the error kind allows, else ends with it.
    async fn fail_or_retry(&mut self, mut err: ProviderError) {
        // Before anything records it (span, logs, the caller): a decoded error frame may echo a key or a token.
        if let Some(stream) = self.stream.take() {
            stream.scrub(&mut err);
        }
        scrub(&mut err, &self.state.secrets);
        if let Some(span) = self.attempt_span.take() {
            crate::tracing_spans::attempt_failed(&span, &err);
        }
        self.metrics
            .provider_error(&self.candidate().labels, err.kind.as_str());
        if self.started {
            let kind = err.kind.as_str();
            self.pending.push_back(convert::event_to_pb(
                Event::Error(err),
                &self.candidate().model,
            ));
            self.done = true;
            self.record_end(Outcome::Error, Some(kind), None);
            return;
        }
        if let Some(delay) = self.state.config.retry.delay(self.target_attempts, &err) {
            let c = self.candidate();
            tracing::warn!(
                message = "provider attempt failed; retrying",
                provider = %c.provider.id,
                model = %c.model.id,
                attempt = self.attempt,
                kind = err.kind.as_str(),
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            );
            if let Some(p) = self.prepared.as_mut() {
                p.decoder = p.decoder.restart();
            }
            let slept = Instant::now();
            tokio::time::sleep(delay).await;
            self.clock.waiting += slept.elapsed();
            return;
        }
        // Said so the caller knows a longer wait may still work (and that, otherwise, retrying is pointless).
        err.retry_after_beyond_cap = err.retryable
            && err
                .retry_after
                .is_some_and(|asked| asked > self.state.config.retry.max_retry_after);
        scrub(&mut err, &self.state.secrets);
        let model = &self.candidates[self.current].model.id;
        let summary = summarize(model, &err, self.target_attempts);
        let fall_back = falls_back(err.kind) && self.current + 1 < self.candidates.len();
        if fall_back {
            tracing::warn!(
                message = "model failed before any output; falling back",
                model = %model,
                kind = err.kind.as_str(),
                attempts = self.target_attempts,
                next = %self.candidates[self.current + 1].model.id,
            );
        }
        self.failures.push(summary);
        self.last_error = Some((self.current, err));
        if fall_back {
            self.advance();
        } else {
            self.finish_failed();
        }
    }

    /// Ends a generation that failed before any output: `stream_start` (naming the model that failed last and the
    /// attempt count) and the error, but no `step_start`, because no model step happened.
    fn finish_failed(&mut self) {
        let Some((index, mut err)) = self.last_error.take() else {
            // Unreachable in practice: the first candidate is always attempted before any fallback is prepared.
            let kind = ErrorKind::ProviderError;
            self.last_error = Some((
                self.current,
                ProviderError::new(kind, "no model could be attempted"),
            ));
            return self.finish_failed();
        };
        if self.failures.len() > 1 {
            err.message = self.failures.join("; ");
        } else if self.attempt > 1 {
            err.message = format!("{} (after {} attempts)", err.message, self.attempt);
        }
        self.current = index;
        let c = &self.candidates[index];
        self.started = true;
        self.pristine = None;
        self.pending.push_back(convert::stream_start(
            &c.provider.id,
            &c.model,
            self.attempt,
            Vec::new(),
        ));
        let kind = err.kind.as_str();
        self.pending
            .push_back(convert::event_to_pb(Event::Error(err), &c.model));
        self.done = true;
        self.record_end(Outcome::Error, Some(kind), None);
    }

    fn record_end(
        &mut self,
        outcome: Outcome,
        error_kind: Option<&'static str>,
        usage: Option<Usage>,
    ) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = Some(outcome);
        self.permit = None;
        let c = &self.candidates[self.current];
        let cost_nano_usd =
            usage.and_then(|u| c.model.pricing.as_ref().map(|p| p.cost_nano_usd(&u)));
        // A cancel drops the poll mid-await, whose partial wait never reached `waiting`: count only whole polls then.
        let in_poll = match (outcome, self.clock.polled_at) {
            (Outcome::Cancelled, _) | (_, None) => Duration::ZERO,
            (_, Some(t)) => t.elapsed(),
        };
        self.metrics.generation_ended(&Ended {
            labels: &c.labels,
            outcome,
            duration: self.clock.started.elapsed(),
            overhead: (self.clock.busy + in_poll).saturating_sub(self.clock.waiting),
            error_kind,
            usage,
            cost_nano_usd,
        });
    }
}

impl Drop for Run {
    /// A stream dropped before its terminal event was cancelled by the caller (or the server shut down).
    fn drop(&mut self) {
        if self.outcome.is_none() {
            self.record_end(Outcome::Cancelled, None, None);
        }
    }
}

/// `"openai/gpt-4o: rate_limited (429) after 3 attempts: <message>"`: one candidate's failure in the final message.
pub(super) fn summarize(model: &str, err: &ProviderError, attempts: u32) -> String {
    let mut line = format!("{model}: {}", err.kind.as_str());
    if let Some(status) = err.http_status {
        line.push_str(&format!(" ({status})"));
    }
    if attempts > 1 {
        line.push_str(&format!(" after {attempts} attempts"));
    }
    if !err.message.is_empty() {
        line.push_str(": ");
        line.push_str(&err.message);
    }
    line
}

/// Removes provider keys from anything a provider echoed back.
pub(crate) fn scrub(e: &mut ProviderError, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    e.message = classify::redact(&e.message, &refs);
    e.provider_body = classify::redact(&e.provider_body, &refs);
}
