//! The loop policy, rule by rule: each test drives [`LoopState`] through the observations a driver would report and
//! checks the actions it gets back. No Redis, no network, no clock.

use std::time::Duration;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

use super::policy::*;
use crate::config::RetryPolicy;
use crate::processor::Outcome;

const MS: Duration = Duration::from_millis(1);

fn rules() -> Rules {
    Rules {
        max_steps: 5,
        auto_compact: true,
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(4),
            max_retry_after: Duration::from_secs(60),
        },
        step_deadline: Duration::from_secs(20),
        lease_ttl: Duration::from_millis(1500),
    }
}

fn facts(needs_work: bool) -> HistoryFacts {
    HistoryFacts {
        needs_work,
        overflowed: false,
        open_client_calls: 0,
        model: Some("openai/gpt-4o".into()),
    }
}

fn answer(id: &str, finish: &str) -> Answer {
    Answer {
        message_id: id.into(),
        finish: finish.into(),
    }
}

fn report(id: &str, finish: &str, outcome: Outcome, answered: bool) -> StepReport {
    StepReport {
        answer: answer(id, finish),
        outcome,
        error: None,
        overflowed: false,
        failure: None,
        blocked: None,
        aborted: false,
        answered,
        empty: false,
        jitter: 0.0,
    }
}

/// Drives a policy: each call feeds one observation at `now` and returns the action.
struct Drive {
    state: LoopState,
    now: Duration,
}

impl Drive {
    fn new(rules: Rules) -> Drive {
        Drive {
            state: LoopState::new(rules, false),
            now: Duration::ZERO,
        }
    }

    fn manual_compaction(rules: Rules) -> Drive {
        Drive {
            state: LoopState::new(rules, true),
            now: Duration::ZERO,
        }
    }

    fn see(&mut self, o: Observation) -> Action {
        self.state.next(o, self.now)
    }

    /// Start → queue → history (with `f`) → budget ok: returns the action after the budget check.
    fn start_to_boundary(&mut self, f: HistoryFacts) -> Action {
        assert_eq!(self.see(Observation::Started), Action::DeliverQueue);
        self.boundary(f)
    }

    /// Queue (nothing) → history → budget ok.
    fn boundary(&mut self, f: HistoryFacts) -> Action {
        assert_eq!(self.see(Observation::Delivered(0)), Action::ReadHistory);
        assert_eq!(self.see(Observation::History(f)), Action::CheckBudget);
        self.see(Observation::Budget(None))
    }
}

fn step(final_step: bool) -> Action {
    Action::Step {
        model: "openai/gpt-4o".into(),
        final_step,
    }
}

fn finish(id: &str, finish: &str, reason: StopReason) -> Action {
    Action::Finish {
        answer: Some(answer(id, finish)),
        reason,
        report_error: false,
    }
}

/// The end after a step that failed: its stored error is published first.
fn finish_failed(id: &str, finish: &str, reason: StopReason) -> Action {
    Action::Finish {
        answer: Some(answer(id, finish)),
        reason,
        report_error: true,
    }
}

#[test]
fn a_prompt_runs_a_step_and_an_answer_ends_the_loop_without_reading_again() {
    let mut d = Drive::new(rules());
    assert_eq!(d.start_to_boundary(facts(true)), step(false));
    assert_eq!(
        d.see(Observation::Stepped(report(
            "m1",
            "stop",
            Outcome::Continue,
            true,
        ))),
        finish("m1", "stop", StopReason::Completed),
        "an answer ends the run without a look at the queue: the run's last write looks, and a prompt queued \
         meanwhile runs in the run that follows"
    );
}

#[test]
fn a_prompt_queued_during_a_tool_step_is_delivered_at_the_boundary_and_answered_in_the_same_loop() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    assert_eq!(
        d.see(Observation::Stepped(report(
            "m1",
            "tool_calls",
            Outcome::Continue,
            false,
        ))),
        Action::DeliverQueue,
        "the queue is checked after every step that goes on"
    );
    assert_eq!(d.see(Observation::Delivered(1)), Action::ReadHistory);
    assert_eq!(
        d.see(Observation::History(facts(true))),
        Action::CheckBudget
    );
    assert_eq!(d.see(Observation::Budget(None)), step(false));
}

#[test]
fn tool_calls_continue_with_the_next_step() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    assert_eq!(
        d.see(Observation::Stepped(report(
            "m1",
            "tool_calls",
            Outcome::Continue,
            false
        ))),
        Action::DeliverQueue
    );
    assert_eq!(d.boundary(facts(true)), step(false));
}

#[test]
fn nothing_to_do_ends_the_loop_as_completed() {
    let mut d = Drive::new(rules());
    assert_eq!(d.see(Observation::Started), Action::DeliverQueue);
    assert_eq!(d.see(Observation::Delivered(0)), Action::ReadHistory);
    assert_eq!(
        d.see(Observation::History(facts(false))),
        Action::Finish {
            answer: None,
            reason: StopReason::Completed,
            report_error: false,
        }
    );
}

#[test]
fn no_model_at_any_level_stops_with_an_error_on_an_answer() {
    let mut d = Drive::new(rules());
    d.see(Observation::Started);
    d.see(Observation::Delivered(0));
    let a = d.see(Observation::History(HistoryFacts {
        model: None,
        ..facts(true)
    }));
    let Action::Fail {
        error,
        store,
        reason,
    } = a
    else {
        panic!("{a:?}")
    };
    assert!(store && reason == StopReason::Error, "{error:?}");
    assert!(error.message.contains("no model"));
    assert_eq!(
        d.see(Observation::Failed(Some(answer("m0", "error")))),
        finish("m0", "error", StopReason::Error)
    );
}

#[test]
fn model_priority_takes_the_first_level_that_names_one() {
    let levels =
        |run, user, session, agent, config| pick_model([run, user, session, agent, config]);
    assert_eq!(levels("r/x", "u/x", "s/x", "a/x", "c/x"), Some("r/x"));
    assert_eq!(levels("", "u/x", "s/x", "a/x", "c/x"), Some("u/x"));
    assert_eq!(levels("", "", "s/x", "a/x", "c/x"), Some("s/x"));
    assert_eq!(levels("", "", "", "a/x", "c/x"), Some("a/x"));
    assert_eq!(levels("", "", "", "", "c/x"), Some("c/x"));
    assert_eq!(levels("", "", "", "", ""), None);
}

#[test]
fn open_client_calls_are_awaited_before_anything_else() {
    let mut d = Drive::new(rules());
    d.see(Observation::Started);
    d.see(Observation::Delivered(0));
    assert_eq!(
        d.see(Observation::History(HistoryFacts {
            open_client_calls: 1,
            ..facts(true)
        })),
        Action::AwaitClientCalls
    );
    assert_eq!(d.see(Observation::ClientCallsSettled), Action::ReadHistory);
}

#[test]
fn the_last_allowed_step_is_final_and_ends_the_loop() {
    let mut d = Drive::new(Rules {
        max_steps: 2,
        ..rules()
    });
    assert_eq!(d.start_to_boundary(facts(true)), step(false));
    d.see(Observation::Stepped(report(
        "m1",
        "tool_calls",
        Outcome::Continue,
        false,
    )));
    assert_eq!(
        d.boundary(facts(true)),
        step(true),
        "the second of two steps is final"
    );
    assert_eq!(
        d.see(Observation::Stepped(report(
            "m2",
            "stop",
            Outcome::Continue,
            true
        ))),
        finish("m2", "stop", StopReason::MaxSteps)
    );
}

#[test]
fn a_spent_budget_stops_before_the_model_call() {
    let mut d = Drive::new(rules());
    d.see(Observation::Started);
    d.see(Observation::Delivered(0));
    d.see(Observation::History(facts(true)));
    let a = d.see(Observation::Budget(Some("spent".into())));
    assert!(
        matches!(&a, Action::Fail { error, store: true, reason: StopReason::Budget }
            if error.kind() == pb::message_error::Kind::BudgetExceeded),
        "{a:?}"
    );
}

#[test]
fn a_manual_compaction_over_budget_is_refused_without_an_answer() {
    let mut d = Drive::manual_compaction(rules());
    d.see(Observation::Started);
    d.see(Observation::Delivered(0));
    d.see(Observation::History(facts(false)));
    let a = d.see(Observation::Budget(Some("spent".into())));
    assert!(
        matches!(
            a,
            Action::Fail {
                store: false,
                reason: StopReason::Budget,
                ..
            }
        ),
        "{a:?}"
    );
    assert_eq!(
        d.see(Observation::Failed(None)),
        Action::Finish {
            answer: None,
            reason: StopReason::Budget,
            report_error: false,
        }
    );
}

#[test]
fn a_manual_compaction_runs_first_and_is_the_result() {
    let mut d = Drive::manual_compaction(rules());
    d.see(Observation::Started);
    d.see(Observation::Delivered(0));
    d.see(Observation::History(facts(false)));
    let a = d.see(Observation::Budget(None));
    assert_eq!(
        a,
        Action::Compact {
            cause: Compaction {
                auto: false,
                overflow: false
            },
            model: "openai/gpt-4o".into()
        }
    );
    assert_eq!(
        d.see(Observation::Compacted(CompactionEnd::Done(answer(
            "c1", "stop"
        )))),
        Action::DeliverQueue
    );
    d.see(Observation::Delivered(0));
    assert_eq!(
        d.see(Observation::History(facts(false))),
        finish("c1", "stop", StopReason::Compacted)
    );
}

#[test]
fn an_overflow_compacts_then_continues_and_a_second_overflow_before_a_fit_stops() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let overflowed = StepReport {
        overflowed: true,
        ..report("m1", "overflow", Outcome::Compact, false)
    };
    assert_eq!(
        d.see(Observation::Stepped(overflowed.clone())),
        Action::DeliverQueue
    );
    d.see(Observation::Delivered(0));
    d.see(Observation::History(facts(true)));
    assert_eq!(
        d.see(Observation::Budget(None)),
        Action::Compact {
            cause: Compaction {
                auto: true,
                overflow: true
            },
            model: "openai/gpt-4o".into()
        }
    );
    d.see(Observation::Compacted(CompactionEnd::Done(answer(
        "c1", "stop",
    ))));
    assert_eq!(d.boundary(facts(true)), step(false));
    let a = d.see(Observation::Stepped(overflowed));
    assert!(
        matches!(
            &a,
            Action::Fail {
                reason: StopReason::ContextOverflow,
                ..
            }
        ),
        "compacting did not shrink the context: {a:?}"
    );
}

#[test]
fn an_overflow_left_by_a_stopped_replica_is_compacted_first() {
    let mut d = Drive::new(rules());
    d.see(Observation::Started);
    d.see(Observation::Delivered(0));
    d.see(Observation::History(HistoryFacts {
        overflowed: true,
        ..facts(true)
    }));
    assert!(matches!(
        d.see(Observation::Budget(None)),
        Action::Compact {
            cause: Compaction {
                auto: true,
                overflow: true
            },
            ..
        }
    ));
}

#[test]
fn an_estimate_over_the_limit_compacts_without_counting_a_step() {
    let mut d = Drive::new(Rules {
        max_steps: 1,
        ..rules()
    });
    assert_eq!(d.start_to_boundary(facts(true)), step(true));
    assert_eq!(
        d.see(Observation::TooLarge {
            estimate: 10,
            usable: 5
        }),
        Action::DeliverQueue
    );
    d.see(Observation::Delivered(0));
    d.see(Observation::History(facts(true)));
    assert!(matches!(
        d.see(Observation::Budget(None)),
        Action::Compact { .. }
    ));
    d.see(Observation::Compacted(CompactionEnd::Done(answer(
        "c1", "stop",
    ))));
    assert_eq!(d.boundary(facts(true)), step(true), "still the first step");
    let a = d.see(Observation::TooLarge {
        estimate: 10,
        usable: 5,
    });
    assert!(
        matches!(
            a,
            Action::Fail {
                reason: StopReason::ContextOverflow,
                ..
            }
        ),
        "{a:?}"
    );
}

#[test]
fn without_auto_compaction_an_overflow_is_an_error() {
    let mut d = Drive::new(Rules {
        auto_compact: false,
        ..rules()
    });
    d.start_to_boundary(facts(true));
    let a = d.see(Observation::Stepped(StepReport {
        overflowed: true,
        ..report("m1", "overflow", Outcome::Compact, false)
    }));
    assert!(
        matches!(
            a,
            Action::Fail {
                reason: StopReason::ContextOverflow,
                ..
            }
        ),
        "{a:?}"
    );
}

#[test]
fn a_step_cut_by_the_output_limit_stops_on_its_error_even_near_the_limit() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let a = d.see(Observation::Stepped(StepReport {
        error: Some(pb::message_error::Kind::OutputLength),
        ..report("m1", "length", Outcome::Compact, true)
    }));
    assert_eq!(a, finish_failed("m1", "length", StopReason::Error));
}

#[test]
fn doom_loops_and_denied_permissions_stop_without_an_error() {
    for (blocked, reason) in [
        (Blocked::DoomLoop, StopReason::DoomLoop),
        (Blocked::PermissionDenied, StopReason::PermissionDenied),
    ] {
        let mut d = Drive::new(rules());
        d.start_to_boundary(facts(true));
        let a = d.see(Observation::Stepped(StepReport {
            blocked: Some(blocked),
            ..report("m1", "tool_calls", Outcome::Stop, false)
        }));
        assert_eq!(a, finish("m1", "tool_calls", reason));
    }
}

#[test]
fn an_empty_answer_is_a_typed_stop() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    assert_eq!(
        d.see(Observation::Stepped(StepReport {
            empty: true,
            ..report("m1", "other", Outcome::Continue, true)
        })),
        finish("m1", "other", StopReason::EmptyResponse)
    );
}

#[test]
fn an_abort_between_steps_or_during_one_stops_as_aborted() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    assert_eq!(
        d.see(Observation::Stepped(StepReport {
            aborted: true,
            ..report("m1", "", Outcome::Stop, false)
        })),
        finish("m1", "", StopReason::Aborted)
    );
    let mut between = Drive::new(rules());
    between.see(Observation::Started);
    assert_eq!(
        between.see(Observation::Cancelled),
        Action::Finish {
            answer: None,
            reason: StopReason::Aborted,
            report_error: false,
        }
    );
}

#[test]
fn structured_output_and_budget_errors_of_a_step_have_their_own_stop() {
    for (kind, reason) in [
        (
            pb::message_error::Kind::StructuredOutput,
            StopReason::StructuredOutput,
        ),
        (pb::message_error::Kind::BudgetExceeded, StopReason::Budget),
        (pb::message_error::Kind::Api, StopReason::Error),
    ] {
        let mut d = Drive::new(rules());
        d.start_to_boundary(facts(true));
        let a = d.see(Observation::Stepped(StepReport {
            error: Some(kind),
            ..report("m1", "stop", Outcome::Stop, false)
        }));
        assert_eq!(a, finish_failed("m1", "stop", reason), "{kind:?}");
    }
}

fn failure(source: FailureSource, output_started: bool) -> StepFailure {
    StepFailure {
        source,
        kind: gw::ErrorKind::ProviderError,
        retryable: true,
        retry_after: None,
        output_started,
        beyond_gateway_cap: false,
    }
}

fn failed(f: StepFailure) -> Observation {
    Observation::Stepped(StepReport {
        error: Some(pb::message_error::Kind::Api),
        failure: Some(f),
        ..report("m1", "", Outcome::Stop, false)
    })
}

#[test]
fn an_error_before_output_is_not_retried_because_the_gateway_already_did() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    assert_eq!(
        d.see(failed(failure(FailureSource::Gateway, false))),
        finish_failed("m1", "", StopReason::Error)
    );
}

#[test]
fn an_error_after_output_started_is_retried_up_to_the_agents_retries() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let f = failure(FailureSource::Gateway, true);
    for attempt in 1..=2 {
        let a = d.see(failed(f));
        assert!(
            matches!(a, Action::Wait { why: WaitFor::StepRetry { attempt: n }, .. } if n == attempt),
            "{a:?}"
        );
        assert_eq!(d.see(Observation::Waited), Action::DeliverQueue);
        assert_eq!(
            d.boundary(facts(true)),
            step(false),
            "a retry is not a new step"
        );
    }
    assert_eq!(d.see(failed(f)), finish_failed("m1", "", StopReason::Error));
}

#[test]
fn an_unreachable_gateway_is_retried_with_backoff_until_the_steps_deadline() {
    let mut d = Drive::new(Rules {
        step_deadline: Duration::from_secs(3),
        ..rules()
    });
    d.start_to_boundary(facts(true));
    let f = failure(FailureSource::Transport, false);
    let mut delays = Vec::new();
    loop {
        match d.see(failed(f)) {
            Action::Wait { delay, .. } => {
                delays.push(delay);
                d.now += delay;
                d.see(Observation::Waited);
                assert_eq!(d.boundary(facts(true)), step(false));
            }
            other => {
                assert_eq!(other, finish_failed("m1", "", StopReason::Error));
                break;
            }
        }
    }
    assert_eq!(
        delays,
        [500 * MS, 1000 * MS],
        "more than the agent's two retries were not needed: the deadline (3 s) bounds them, not the count"
    );
    let mut long = Drive::new(rules());
    long.start_to_boundary(facts(true));
    for _ in 0..4 {
        let Action::Wait { delay, .. } = long.see(failed(f)) else {
            panic!("a 20 s deadline allows four tries after 0.5, 1, 2 and 4 s")
        };
        long.now += delay;
        long.see(Observation::Waited);
        long.boundary(facts(true));
    }
}

#[test]
fn a_retry_after_beyond_the_gateways_cap_is_waited_out_within_the_agents_limit() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let f = StepFailure {
        kind: gw::ErrorKind::RateLimited,
        retry_after: Some(Duration::from_secs(5)),
        beyond_gateway_cap: true,
        ..failure(FailureSource::Gateway, false)
    };
    assert_eq!(
        d.see(failed(f)),
        Action::Wait {
            delay: Duration::from_secs(5),
            why: WaitFor::StepRetry { attempt: 1 }
        }
    );
    let state = LoopState::new(rules(), false);
    let too_long = StepFailure {
        retry_after: Some(Duration::from_secs(90)),
        ..f
    };
    assert_eq!(
        state.retry_delay(&too_long, 0.0, Duration::ZERO),
        None,
        "over max_retry_after"
    );
    let within_cap = StepFailure {
        beyond_gateway_cap: false,
        ..f
    };
    assert_eq!(
        state.retry_delay(&within_cap, 0.0, Duration::ZERO),
        None,
        "the gateway already waited it out"
    );
    assert_eq!(
        state.retry_delay(&f, 0.0, Duration::from_secs(16)),
        None,
        "the wait would end after the step's deadline"
    );
}

#[test]
fn errors_no_retry_can_fix_stop_at_once_even_after_output() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let f = StepFailure {
        kind: gw::ErrorKind::Auth,
        ..failure(FailureSource::Gateway, true)
    };
    assert_eq!(d.see(failed(f)), finish_failed("m1", "", StopReason::Error));
}

#[test]
fn storage_failures_are_retried_while_the_lease_holds_then_handed_off() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let a = d.see(Observation::StorageFailed {
        lease_age: 100 * MS,
    });
    assert_eq!(
        a,
        Action::Wait {
            delay: STORAGE_BASE_DELAY,
            why: WaitFor::Storage { attempt: 1 }
        }
    );
    assert_eq!(d.see(Observation::Waited), Action::ProveLease);
    let a = d.see(Observation::StorageFailed {
        lease_age: 300 * MS,
    });
    assert_eq!(
        a,
        Action::Wait {
            delay: 2 * STORAGE_BASE_DELAY,
            why: WaitFor::Storage { attempt: 2 }
        },
        "the delay doubles"
    );
    d.see(Observation::Waited);
    assert_eq!(
        d.see(Observation::StorageFailed {
            lease_age: 1490 * MS
        }),
        Action::HandOff { answer: None },
        "the lease would expire before the next try"
    );
}

#[test]
fn storage_back_with_the_lease_reruns_the_iteration() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    d.see(Observation::StorageFailed {
        lease_age: 100 * MS,
    });
    d.see(Observation::Waited);
    assert_eq!(d.see(Observation::LeaseProven), Action::DeliverQueue);
    assert_eq!(d.boundary(facts(true)), step(false));
}

#[test]
fn a_finish_that_storage_refused_is_retried_not_the_iteration() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    let end = d.see(Observation::Stepped(report(
        "m1",
        "stop",
        Outcome::Continue,
        true,
    )));
    assert_eq!(end, finish("m1", "stop", StopReason::Completed));
    d.see(Observation::StorageFailed {
        lease_age: 100 * MS,
    });
    d.see(Observation::Waited);
    assert_eq!(d.see(Observation::LeaseProven), end);
}

#[test]
fn a_lost_lease_or_a_deleted_session_ends_the_loop_without_writing() {
    let mut d = Drive::new(rules());
    d.start_to_boundary(facts(true));
    assert_eq!(
        d.see(Observation::LeaseLost),
        Action::HandOff { answer: None }
    );
    let mut gone = Drive::new(rules());
    gone.see(Observation::Started);
    assert_eq!(gone.see(Observation::Gone), Action::Abandon);
}
