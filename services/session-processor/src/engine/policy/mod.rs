//! The runLoop's policy: every decision the loop makes, as a pure function of its state and of what the driver
//! just observed. No I/O, no clock, no Redis: the driver ([`super::driver`]) performs the [`Action`] it is given
//! and reports what happened as an [`Observation`] (with the time, read from its own clock), and
//! [`LoopState::next`] says what to do next. docs/architecture.md ("The loop as a policy") draws the states and
//! transitions; `policy_tests.rs` has a test per rule.
//!
//! The rules, in the order a loop meets them:
//! - every iteration starts by delivering the prompts queued while the loop was busy, then reads the history;
//! - the model comes from the priority rule ([`pick_model`]); none at any level stops the loop with an error;
//! - client tool calls that a stopped replica left open are waited for before anything else;
//! - nothing to do (the latest user message has its answer) ends the loop;
//! - the budget is checked at every step boundary, before any model call; spent stops the loop;
//! - a pending compaction runs before the next step; one that does not shrink the context stops the loop;
//! - the last step `max_steps` allows is marked final (the driver asks for text only);
//! - a failed step is retried only where the gateway could not retry it itself ([`LoopState::retry_delay`]);
//! - a doom loop or a denied permission stops the loop without an error; so do an abort and a spent budget;
//! - storage failures are retried while the lease is provably still this loop's, then the session is handed to
//!   recovery.

use std::time::Duration;

use llm_proto::sessions as pb;

use crate::config::RetryPolicy;
use crate::processor::Outcome;

mod action;
mod observation;
mod waits;

pub use crate::processor::Blocked;
pub use action::{Action, Answer, Compaction, WaitFor, budget_error, overflow_error};
use action::{api_error, reason_for_error};
pub use observation::{
    CompactionEnd, FailureSource, HistoryFacts, Observation, StepFailure, StepReport,
};
pub use pb::StopReason;
pub use waits::{STORAGE_BASE_DELAY, STORAGE_MAX_DELAY};

/// The limits a loop runs under, from its agent and the processor's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Model steps one loop may run; the last of them is text-only.
    pub max_steps: u32,
    /// Whether an overflow compacts the history (true) or stops the loop.
    pub auto_compact: bool,
    /// How a failed step is retried.
    pub retry: RetryPolicy,
    /// How long one step may take from its first attempt, retries and their waits included.
    pub step_deadline: Duration,
    /// The lease's time to live: how long after its last proof the lease may already belong to someone else.
    pub lease_ttl: Duration,
}

/// What follows a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterWait {
    /// The next iteration (a step retry runs from the queue check on, so prompts queued meanwhile join).
    Iterate,
    /// Prove the lease (after a storage failure).
    ProveLease,
}

/// The loop's state: everything the policy remembers between observations.
#[derive(Debug, Clone)]
pub struct LoopState {
    rules: Rules,
    /// Model steps run by this loop (a step that did not call the model because it was too large is not counted).
    steps: u32,
    /// Retries of the current step so far.
    retries: u32,
    /// When the current step's first attempt started (driver time): its retries are bounded by the deadline.
    step_began: Option<Duration>,
    /// A compaction to run before the next step: asked for by the caller, or by a step's closeout.
    pending: Option<Compaction>,
    /// True from an automatic compaction until a step fits: needing another one before that means compacting does
    /// not shrink the context, and the loop stops instead of compacting forever.
    compacted: bool,
    /// The last step answered the latest user message completely: unless the queue delivers a prompt, the loop
    /// ends without reading the history again.
    answered: bool,
    /// What the last history read said.
    facts: HistoryFacts,
    /// The answer `done` names.
    last: Option<Answer>,
    /// The stop reason the last step implies if the loop ends after it.
    last_reason: StopReason,
    /// Consecutive storage failures.
    storage_failures: u32,
    /// What follows the current wait.
    after_wait: AfterWait,
    /// A `Fail` or `Finish` under way: retried (not the iteration) after a storage failure.
    ending: Option<Action>,
    /// The reason a `Fail` in flight stops the loop with.
    failing: Option<StopReason>,
    /// The compaction under way.
    compacting: Option<Compaction>,
    /// The time of the observation being handled.
    now: Duration,
}

impl LoopState {
    /// A new loop; `manual_compaction` when it runs for the `Compact` RPC.
    pub fn new(rules: Rules, manual_compaction: bool) -> LoopState {
        LoopState {
            rules,
            steps: 0,
            retries: 0,
            step_began: None,
            pending: manual_compaction.then_some(Compaction {
                auto: false,
                overflow: false,
            }),
            compacted: false,
            answered: false,
            facts: HistoryFacts::default(),
            last: None,
            last_reason: StopReason::Completed,
            storage_failures: 0,
            after_wait: AfterWait::Iterate,
            ending: None,
            failing: None,
            compacting: None,
            now: Duration::ZERO,
        }
    }

    /// Model steps run so far.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// The next action after `observation`, observed at `now` (the driver's monotonic time since the loop began).
    pub fn next(&mut self, observation: Observation, now: Duration) -> Action {
        self.now = now;
        // Consecutive storage failures count until something succeeds (a wait between them is no success).
        if !matches!(
            observation,
            Observation::StorageFailed { .. } | Observation::Waited
        ) {
            self.storage_failures = 0;
        }
        match observation {
            Observation::Started => Action::DeliverQueue,
            Observation::Delivered(n) => self.delivered(n),
            Observation::History(facts) => self.history(facts),
            Observation::ClientCallsSettled => Action::ReadHistory,
            Observation::Budget(spent) => self.budget(spent),
            Observation::Compacted(end) => self.compacted(end),
            Observation::TooLarge { estimate, usable } => self.too_large(estimate, usable),
            Observation::Stepped(report) => self.stepped(report),
            Observation::Waited => match self.after_wait {
                AfterWait::Iterate => Action::DeliverQueue,
                AfterWait::ProveLease => Action::ProveLease,
            },
            Observation::Failed(answer) => {
                self.ending = None;
                if answer.is_some() {
                    self.last = answer;
                }
                let reason = self.failing.take().unwrap_or(StopReason::Error);
                self.finish(reason)
            }
            Observation::LeaseProven => match self.ending.clone() {
                // The loop was ending when storage failed: end it, do not run another iteration.
                Some(action) => action,
                None => Action::DeliverQueue,
            },
            Observation::LeaseLost => self.hand_off(),
            Observation::StorageFailed { lease_age } => self.storage_failed(lease_age),
            Observation::Cancelled => self.finish(StopReason::Aborted),
            Observation::Gone => Action::Abandon,
        }
    }

    fn delivered(&mut self, prompts: usize) -> Action {
        if std::mem::take(&mut self.answered) && prompts == 0 && self.pending.is_none() {
            let reason = self.last_reason;
            return self.finish(reason);
        }
        Action::ReadHistory
    }

    fn history(&mut self, facts: HistoryFacts) -> Action {
        self.facts = facts;
        if self.facts.open_client_calls > 0 {
            return Action::AwaitClientCalls;
        }
        if self.facts.model.is_none() {
            return self.fail(
                api_error("no model: set one on the prompt, the session, the agent or the processor's default"),
                StopReason::Error,
            );
        }
        if self.pending.is_none() && self.facts.needs_work && self.facts.overflowed {
            // An overflowed step whose compaction never ran (its replica stopped in between).
            self.pending = Some(Compaction {
                auto: true,
                overflow: true,
            });
        }
        if !self.facts.needs_work && self.pending.is_none() {
            let reason = if self.last.is_some() {
                self.last_reason
            } else {
                StopReason::Completed
            };
            return self.finish(reason);
        }
        Action::CheckBudget
    }

    fn budget(&mut self, spent: Option<String>) -> Action {
        if let Some(why) = spent {
            if self.facts.needs_work {
                return self.fail(budget_error(why), StopReason::Budget);
            }
            if self.pending.is_some_and(|c| !c.auto) {
                // A manual compaction is refused: there is no answer to put the error on.
                return self.fail_with(budget_error(why), false, StopReason::Budget);
            }
            // An automatic compaction after a complete answer is simply skipped.
            let reason = self.last_reason;
            return self.finish(reason);
        }
        let model = self.facts.model.clone().unwrap_or_default();
        if let Some(cause) = self.pending.take() {
            self.compacting = Some(cause);
            return Action::Compact { cause, model };
        }
        if !self.facts.needs_work {
            let reason = self.last_reason;
            return self.finish(reason);
        }
        self.step_began.get_or_insert(self.now);
        Action::Step {
            model,
            final_step: self.steps + 1 >= self.rules.max_steps,
        }
    }

    fn compacted(&mut self, end: CompactionEnd) -> Action {
        let auto = self.compacting.take().is_some_and(|c| c.auto);
        match end {
            CompactionEnd::Done(answer) => {
                self.compacted = auto;
                // `done` names the answer, not housekeeping: only a manual compaction is the loop's result.
                if !auto {
                    self.last = Some(answer);
                    self.last_reason = StopReason::Compacted;
                }
                Action::DeliverQueue
            }
            CompactionEnd::Failed(answer, kind) => {
                self.last = Some(answer);
                self.finish(reason_for_error(kind))
            }
            CompactionEnd::Aborted(answer) => {
                self.last = Some(answer);
                self.finish(StopReason::Aborted)
            }
        }
    }

    fn too_large(&mut self, estimate: u64, usable: u64) -> Action {
        if self.compacted {
            return self.fail(
                overflow_error(format!(
                    "the context still does not fit after compacting (about {estimate} tokens, {usable} usable): \
                     start a new session or send less at once"
                )),
                StopReason::ContextOverflow,
            );
        }
        self.pending = Some(Compaction {
            auto: true,
            overflow: true,
        });
        Action::DeliverQueue
    }

    fn stepped(&mut self, report: StepReport) -> Action {
        self.steps += 1;
        let began = *self.step_began.get_or_insert(self.now);
        let final_step = self.steps >= self.rules.max_steps;
        self.last = Some(report.answer.clone());
        if report.aborted {
            return self.finish(StopReason::Aborted);
        }
        if let Some(blocked) = report.blocked {
            return self.finish(match blocked {
                Blocked::DoomLoop => StopReason::DoomLoop,
                Blocked::PermissionDenied => StopReason::PermissionDenied,
            });
        }
        // A step that reached the usable limit but failed otherwise (the output limit cut it) stops on its error.
        let outcome = match report.outcome {
            Outcome::Compact if report.error.is_some() && !report.overflowed => Outcome::Stop,
            o => o,
        };
        match outcome {
            Outcome::Continue => {
                self.step_done();
                self.compacted = false;
                self.answered = report.answered;
                self.last_reason = if final_step {
                    StopReason::MaxSteps
                } else if report.empty {
                    StopReason::EmptyResponse
                } else {
                    StopReason::Completed
                };
                // An answer ends the run without a look at the queue: the run's last write looks (atomically with
                // the lease's release), and a prompt queued meanwhile runs in the run that follows at once, whose
                // `done` ends that prompt's stream.
                if final_step || (report.answered && self.pending.is_none()) {
                    let reason = self.last_reason;
                    self.answered = false;
                    return self.finish(reason);
                }
                Action::DeliverQueue
            }
            Outcome::Compact => self.near_the_limit(&report, final_step),
            Outcome::Stop => self.failed_step(&report, began),
        }
    }

    /// A step reached the usable context (or the provider said it overflowed): compact, unless compacting is off or
    /// did not help.
    fn near_the_limit(&mut self, report: &StepReport, final_step: bool) -> Action {
        self.step_done();
        if !self.rules.auto_compact {
            if report.overflowed {
                return self.fail(
                    overflow_error(
                        "the context does not fit and automatic compaction is off for this agent"
                            .into(),
                    ),
                    StopReason::ContextOverflow,
                );
            }
            // Merely near the limit: go on until the provider refuses.
            self.answered = report.answered;
            self.last_reason = StopReason::Completed;
            return if final_step {
                self.finish(StopReason::MaxSteps)
            } else {
                Action::DeliverQueue
            };
        }
        if self.compacted {
            return self.fail(
                overflow_error(
                    "compacting did not shrink the context enough: start a new session or send less at once".into(),
                ),
                StopReason::ContextOverflow,
            );
        }
        self.pending = Some(Compaction {
            auto: true,
            overflow: report.overflowed,
        });
        Action::DeliverQueue
    }

    /// A step failed (or a closeout stopped it): retried by the retry rule, or the loop ends on its error.
    fn failed_step(&mut self, report: &StepReport, began: Duration) -> Action {
        if let Some(delay) = report
            .failure
            .and_then(|f| self.retry_delay(&f, report.jitter, self.now - began))
        {
            self.retries += 1;
            self.steps -= 1;
            self.after_wait = AfterWait::Iterate;
            return Action::Wait {
                delay,
                why: WaitFor::StepRetry {
                    attempt: self.retries,
                },
            };
        }
        self.step_done();
        let reported = report.error.is_some();
        self.finish_reporting(reason_for_error(report.error), reported)
    }

    /// A step is over (not retried): the next one starts its own deadline and retry count.
    fn step_done(&mut self) {
        self.retries = 0;
        self.step_began = None;
    }

    /// How long to wait before retrying a failed step, or `None` to stop on its error (see
    /// [`waits::step_retry`]). `elapsed` is the time since the step's first attempt.
    pub fn retry_delay(&self, f: &StepFailure, jitter: f64, elapsed: Duration) -> Option<Duration> {
        waits::step_retry(&self.rules, self.retries, f, jitter, elapsed)
    }

    fn storage_failed(&mut self, lease_age: Duration) -> Action {
        self.storage_failures += 1;
        let delay = waits::storage(self.storage_failures);
        // The lease must still be provable after the wait: a renewal sent then is only good if the lease had not
        // expired by the time it lands.
        if lease_age + delay >= self.rules.lease_ttl {
            return self.hand_off();
        }
        self.after_wait = AfterWait::ProveLease;
        Action::Wait {
            delay,
            why: WaitFor::Storage {
                attempt: self.storage_failures,
            },
        }
    }

    fn hand_off(&mut self) -> Action {
        Action::HandOff {
            answer: self.last.clone(),
        }
    }

    fn fail(&mut self, error: pb::MessageError, reason: StopReason) -> Action {
        self.fail_with(error, true, reason)
    }

    fn fail_with(&mut self, error: pb::MessageError, store: bool, reason: StopReason) -> Action {
        self.failing = Some(reason);
        let action = Action::Fail {
            error,
            store,
            reason,
        };
        self.ending = Some(action.clone());
        action
    }

    fn finish(&mut self, reason: StopReason) -> Action {
        self.finish_reporting(reason, false)
    }

    fn finish_reporting(&mut self, reason: StopReason, report_error: bool) -> Action {
        let action = Action::Finish {
            answer: self.last.clone(),
            reason,
            report_error,
        };
        self.ending = Some(action.clone());
        action
    }
}

/// The model for the next step, by priority: the caller's explicit choice on this run (the `Compact` RPC's
/// model), the model stored on the session's latest user message (resolved when it was stored), the session's
/// default, the agent's default, the processor's default. Empty strings do not count.
pub fn pick_model(levels: [&str; 5]) -> Option<&str> {
    levels.into_iter().find(|m| !m.is_empty())
}
