//! The Diagnose API: checks one session's stored invariants and says which failed, with the ids and values found.
//!
//! It reads only and never repairs. Everything is loaded first (session, messages with parts, lease, active-set
//! membership, write failures); the checks are pure functions of that data, so each one is tested on hand-built
//! messages. The checks, in their fixed order:
//!
//! | name | invariant |
//! |---|---|
//! | `step_pairing` | every step-start is followed by its step-finish before the next step-start |
//! | `message_cost` | an assistant message's cost is the sum of its step-finish costs; the session's is the sum of its messages |
//! | `message_tokens` | an assistant message's tokens are its last step's; the session's are the sum of every step's |
//! | `tools_settled` | no tool part is left pending or running |
//! | `parts_closed` | finished assistant messages have a completion time, and their text and reasoning parts an end time |
//! | `busy_under_lease` | a loop marked running holds a live lease, and a live lease belongs to a running loop |
//!
//! While a loop holds the session's lease, the message it is writing (an assistant message without a completion
//! time) is work in progress: it is exempt from the per-message checks, and the session totals (settled after each
//! step) are not compared. A step with no step-finish is accepted when its message records why the step ended early:
//! an error, a retry, an interruption (a crashed replica's step, an aborted tool) or a context overflow; the provider
//! never reported usage for such a step, so there is nothing to add up.

use std::time::{Duration, UNIX_EPOCH};

use llm_proto::sessions as pb;
use prost_types::Timestamp;
use tonic::{Response, Status};

use crate::api::status;
use crate::engine::Engine;
use crate::processor::FINISH_OVERFLOW;
use crate::store::WriteFailures;

/// Stable check names, in report order.
pub const CHECKS: [&str; 6] = [
    STEP_PAIRING,
    MESSAGE_COST,
    MESSAGE_TOKENS,
    TOOLS_SETTLED,
    PARTS_CLOSED,
    BUSY_UNDER_LEASE,
];

/// Every step-start has its step-finish.
pub const STEP_PAIRING: &str = "step_pairing";
/// Costs add up.
pub const MESSAGE_COST: &str = "message_cost";
/// Token totals match the steps.
pub const MESSAGE_TOKENS: &str = "message_tokens";
/// No tool is left pending or running.
pub const TOOLS_SETTLED: &str = "tools_settled";
/// Finished messages and their text and reasoning parts are closed.
pub const PARTS_CLOSED: &str = "parts_closed";
/// Busy exactly under a live lease.
pub const BUSY_UNDER_LEASE: &str = "busy_under_lease";

/// Findings listed in one check's detail; more are counted, not listed.
const MAX_FINDINGS: usize = 10;
/// How often, and how far apart, a lease / active-mark mismatch is read again before it is reported.
const RECHECKS: usize = 3;
const RECHECK_DELAY: Duration = Duration::from_millis(50);

/// Everything the checks look at, loaded from the store.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The session (totals).
    pub session: pb::Session,
    /// Every message, oldest first, with its parts.
    pub messages: Vec<pb::Message>,
    /// The lease holder (`owner`), when a lease is live.
    pub lease_holder: Option<String>,
    /// Whether the session is in the active set (a loop was marked running).
    pub active: bool,
    /// The lease is held by this replica, but no loop for the session runs here.
    pub held_here_without_loop: bool,
    /// The permission request a running loop waits on, when one is recorded.
    pub asking: Option<pb::PermissionAsked>,
    /// How long the session's agent lets a client tool take (for the deadline of an open call).
    pub client_tool_timeout: Duration,
}

impl Loaded {
    /// True while a loop holds a live lease: its current message is work in progress.
    fn live(&self) -> bool {
        self.lease_holder.is_some()
    }

    /// An assistant message the live loop is still writing.
    fn in_progress(&self, m: &pb::Message) -> bool {
        self.live() && m.role() == pb::Role::Assistant && m.completed_at.is_none()
    }

    /// Assistant messages that are not work in progress.
    fn settled_assistants(&self) -> impl Iterator<Item = &pb::Message> {
        self.messages
            .iter()
            .filter(|m| m.role() == pb::Role::Assistant && !self.in_progress(m))
    }
}

/// Collects a check's findings and builds its result.
struct Findings {
    name: &'static str,
    description: &'static str,
    found: Vec<String>,
}

impl Findings {
    fn new(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            description,
            found: Vec::new(),
        }
    }

    fn push(&mut self, finding: String) {
        self.found.push(finding);
    }

    fn finish(self) -> pb::DiagnosticCheck {
        let total = self.found.len();
        let mut detail = self
            .found
            .into_iter()
            .take(MAX_FINDINGS)
            .collect::<Vec<_>>()
            .join("; ");
        if total > MAX_FINDINGS {
            detail.push_str(&format!("; and {} more", total - MAX_FINDINGS));
        }
        pb::DiagnosticCheck {
            name: self.name.into(),
            ok: total == 0,
            detail,
            description: self.description.into(),
        }
    }
}

fn parts(m: &pb::Message) -> impl Iterator<Item = (&pb::Part, &pb::part::Kind)> {
    m.parts
        .iter()
        .filter_map(|p| p.kind.as_ref().map(|k| (p, k)))
}

fn step_finishes(m: &pb::Message) -> impl Iterator<Item = &pb::StepFinishPart> {
    parts(m).filter_map(|(_, k)| match k {
        pb::part::Kind::StepFinish(f) => Some(f),
        _ => None,
    })
}

/// The message says why a step of it ended without a step-finish.
fn ended_early(m: &pb::Message) -> bool {
    m.error.is_some()
        || matches!(
            m.finish.as_str(),
            "retried" | "interrupted" | FINISH_OVERFLOW
        )
        || parts(m).any(|(_, k)| match k {
            pb::part::Kind::Retry(_) => true,
            pb::part::Kind::Tool(t) => t.state.as_ref().is_some_and(|s| s.interrupted),
            _ => false,
        })
}

fn tokens_str(t: &pb::Tokens) -> String {
    format!(
        "{{input {}, output {}, reasoning {}, cache_read {}, cache_write {}}}",
        t.input, t.output, t.reasoning, t.cache_read, t.cache_write
    )
}

fn add_tokens(sum: &mut pb::Tokens, t: &pb::Tokens) {
    sum.input += t.input;
    sum.output += t.output;
    sum.reasoning += t.reasoning;
    sum.cache_read += t.cache_read;
    sum.cache_write += t.cache_write;
}

/// `step_pairing`: every step-start is followed by its step-finish before the next step-start.
pub fn step_pairing(data: &Loaded) -> pb::DiagnosticCheck {
    let mut f = Findings::new(
        STEP_PAIRING,
        "every step-start is followed by its step-finish before the next step-start (a step that ended with an \
         error, a retry, an interruption or an overflow may lack it; the running step of a live loop is skipped)",
    );
    for m in data.settled_assistants() {
        let excused = ended_early(m);
        let mut open: Option<&str> = None;
        for (p, kind) in parts(m) {
            match kind {
                pb::part::Kind::StepStart(_) => {
                    if let Some(o) = open
                        && !excused
                    {
                        f.push(format!(
                            "message {}: step-start {o} has no step-finish before step-start {}",
                            m.id, p.id
                        ));
                    }
                    open = Some(&p.id);
                }
                pb::part::Kind::StepFinish(_) => {
                    if open.is_none() {
                        f.push(format!(
                            "message {}: step-finish {} has no step-start",
                            m.id, p.id
                        ));
                    }
                    open = None;
                }
                _ => {}
            }
        }
        if let Some(o) = open
            && !excused
        {
            f.push(format!(
                "message {}: step-start {o} has no step-finish (finish {:?}, no error recorded)",
                m.id, m.finish
            ));
        }
    }
    f.finish()
}

/// `message_cost`: each assistant message's cost is the sum of its step-finish costs, and the session's cost the
/// sum of its assistant messages' (not compared while a loop runs: totals are settled after each step).
pub fn message_cost(data: &Loaded) -> pb::DiagnosticCheck {
    let mut f = Findings::new(
        MESSAGE_COST,
        "an assistant message's cost equals the sum of its step-finish costs, and the session's cost the sum of its \
         messages' costs (nano-USD)",
    );
    for m in data.settled_assistants() {
        let steps: i64 = step_finishes(m).map(|s| s.cost_nano_usd).sum();
        if m.cost_nano_usd != steps {
            f.push(format!(
                "message {}: cost {} nano-USD but its steps sum to {steps}",
                m.id, m.cost_nano_usd
            ));
        }
    }
    if !data.live() {
        let messages: i64 = data
            .messages
            .iter()
            .filter(|m| m.role() == pb::Role::Assistant)
            .map(|m| m.cost_nano_usd)
            .sum();
        if data.session.cost_nano_usd != messages {
            f.push(format!(
                "session {}: cost {} nano-USD but its messages sum to {messages}",
                data.session.id, data.session.cost_nano_usd
            ));
        }
    }
    f.finish()
}

/// `message_tokens`: an assistant message's tokens are those of its last step (the context size; none without a
/// step-finish), and the session's tokens the sum of every step's (not compared while a loop runs).
pub fn message_tokens(data: &Loaded) -> pb::DiagnosticCheck {
    let mut f = Findings::new(
        MESSAGE_TOKENS,
        "an assistant message's tokens are its last step-finish's tokens, and the session's tokens the sum of every \
         step-finish's",
    );
    for m in data.settled_assistants() {
        let last = step_finishes(m)
            .last()
            .map(|s| s.tokens.unwrap_or_default())
            .unwrap_or_default();
        let stored = m.tokens.unwrap_or_default();
        if stored != last {
            f.push(format!(
                "message {}: tokens {} but its last step has {}",
                m.id,
                tokens_str(&stored),
                tokens_str(&last)
            ));
        }
    }
    if !data.live() {
        let mut sum = pb::Tokens::default();
        for m in data
            .messages
            .iter()
            .filter(|m| m.role() == pb::Role::Assistant)
        {
            for s in step_finishes(m) {
                add_tokens(&mut sum, &s.tokens.unwrap_or_default());
            }
        }
        let stored = data.session.tokens.unwrap_or_default();
        if stored != sum {
            f.push(format!(
                "session {}: tokens {} but its steps sum to {}",
                data.session.id,
                tokens_str(&stored),
                tokens_str(&sum)
            ));
        }
    }
    f.finish()
}

/// `tools_settled`: no tool part is pending or running, except in the message a live loop is still writing (a
/// client tool waiting for its result, a built-in tool running).
pub fn tools_settled(data: &Loaded) -> pb::DiagnosticCheck {
    let mut f = Findings::new(
        TOOLS_SETTLED,
        "no tool part is left pending or running outside the step a live loop is running",
    );
    for m in data.messages.iter().filter(|m| !data.in_progress(m)) {
        for (p, kind) in parts(m) {
            let pb::part::Kind::Tool(t) = kind else {
                continue;
            };
            let status = t
                .state
                .as_ref()
                .map_or(pb::tool_state::Status::Unspecified, |s| s.status());
            if !matches!(
                status,
                pb::tool_state::Status::Completed | pb::tool_state::Status::Error
            ) {
                f.push(format!(
                    "message {}: tool part {} (call {}, `{}`) is {}",
                    m.id,
                    p.id,
                    t.call_id,
                    t.tool,
                    status
                        .as_str_name()
                        .trim_start_matches("STATUS_")
                        .to_lowercase()
                ));
            }
        }
    }
    f.finish()
}

/// `parts_closed`: every assistant message outside a live loop's current step has its completion time, and its
/// text and reasoning parts their end times.
pub fn parts_closed(data: &Loaded) -> pb::DiagnosticCheck {
    let mut f = Findings::new(
        PARTS_CLOSED,
        "assistant messages have a completion time and their text and reasoning parts an end time, except the step a \
         live loop is running",
    );
    for m in data.settled_assistants() {
        if m.completed_at.is_none() {
            f.push(format!(
                "message {} has no completion time and no loop holds the lease",
                m.id
            ));
        }
        for (p, kind) in parts(m) {
            let (what, ended) = match kind {
                pb::part::Kind::Text(t) => ("text", t.ended_at.is_some()),
                pb::part::Kind::Reasoning(r) => ("reasoning", r.ended_at.is_some()),
                _ => continue,
            };
            if !ended {
                f.push(format!(
                    "message {}: {what} part {} has no end time",
                    m.id, p.id
                ));
            }
        }
    }
    f.finish()
}

/// `busy_under_lease`: a session marked active (a loop running) holds a live lease, and a live lease belongs to a
/// loop marked active (and, when this replica holds it, to a loop running here).
pub fn busy_under_lease(data: &Loaded) -> pb::DiagnosticCheck {
    let mut f = Findings::new(
        BUSY_UNDER_LEASE,
        "a session whose loop is marked running holds a live lease, and a live lease belongs to a running loop \
         (a mismatch is read again for about 150 ms before it is reported: loops starting or ending cause brief ones)",
    );
    match (&data.lease_holder, data.active) {
        (None, true) => f.push(
            "marked running (in the active set) but no lease is held: the replica running the loop stopped; a \
             recovery sweep resumes it within about 1.5 lease TTLs"
                .into(),
        ),
        (Some(holder), false) => f.push(format!(
            "lease held by {holder} but no loop is marked running (not in the active set)"
        )),
        _ => {}
    }
    if data.held_here_without_loop
        && let Some(holder) = &data.lease_holder
    {
        f.push(format!(
            "lease held by this replica ({holder}) but no loop for the session runs here"
        ));
    }
    f.finish()
}

/// Every check, in the fixed order of [`CHECKS`].
pub fn run_checks(data: &Loaded) -> Vec<pb::DiagnosticCheck> {
    vec![
        step_pairing(data),
        message_cost(data),
        message_tokens(data),
        tools_settled(data),
        parts_closed(data),
        busy_under_lease(data),
    ]
}

/// Retry parts over the session: each is a step that failed and ran again.
pub fn retries(messages: &[pb::Message]) -> u32 {
    let n = messages
        .iter()
        .flat_map(parts)
        .filter(|(_, k)| matches!(k, pb::part::Kind::Retry(_)))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Steps a gateway fallback served: the step-finish's serving model differs from the model the step asked for.
/// Steps stored before the requested model was recorded (empty) are not counted.
pub fn fallbacks(messages: &[pb::Message]) -> u32 {
    let n = messages
        .iter()
        .flat_map(step_finishes)
        .filter(|s| !s.requested_model.is_empty() && s.requested_model != s.model)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The newest assistant message with an error: its id and the error.
pub fn last_error(messages: &[pb::Message]) -> Option<(&str, &pb::MessageError)> {
    messages
        .iter()
        .rev()
        .filter(|m| m.role() == pb::Role::Assistant)
        .find_map(|m| m.error.as_ref().map(|e| (m.id.as_str(), e)))
}

/// The report for loaded data and the session's write failures.
pub fn report(data: &Loaded, failures: &WriteFailures) -> pb::DiagnoseResponse {
    let checks = run_checks(data);
    let (last_error_message_id, last_error) = match last_error(&data.messages) {
        Some((id, e)) => (id.to_string(), Some(e.clone())),
        None => (String::new(), None),
    };
    let last_storage_failure_at = (failures.count > 0 && failures.last_at_ms > 0).then(|| {
        Timestamp::from(UNIX_EPOCH + Duration::from_millis(failures.last_at_ms.unsigned_abs()))
    });
    pb::DiagnoseResponse {
        session_id: data.session.id.clone(),
        healthy: checks.iter().all(|c| c.ok),
        checks,
        last_error,
        last_error_message_id,
        retries: retries(&data.messages),
        fallbacks: fallbacks(&data.messages),
        storage_write_failures: failures.count,
        last_storage_failure_at,
        last_storage_failure: failures.last_message.clone(),
        lease_held: data.lease_holder.is_some(),
        lease_holder: data.lease_holder.clone().unwrap_or_default(),
        stopped_by: stopped_by(&data.messages).map_or(0, |(_, r)| r as i32),
        stopped_by_message_id: stopped_by(&data.messages)
            .map(|(id, _)| id.to_string())
            .unwrap_or_default(),
        waiting: waiting(data),
    }
}

/// Why the session's last loop stopped: the stop reason of its latest assistant message, when that one has one
/// (a running loop's message has none yet).
fn stopped_by(messages: &[pb::Message]) -> Option<(&str, pb::StopReason)> {
    let last = messages
        .iter()
        .rev()
        .find(|m| m.role() == pb::Role::Assistant)?;
    match last.stopped_by() {
        pb::StopReason::Unspecified => None,
        reason => Some((last.id.as_str(), reason)),
    }
}

/// What a loop waits for from the caller: the open client calls of the messages it has not completed (each until
/// its start plus the agent's client tool timeout), and the permission request it recorded.
fn waiting(data: &Loaded) -> Vec<pb::Waiting> {
    let mut out: Vec<pb::Waiting> = data
        .messages
        .iter()
        .filter(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none())
        .flat_map(|m| &m.parts)
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Tool(t)) => {
                let s = t.state.as_ref()?;
                (s.client && s.status() == pb::tool_state::Status::Running).then(|| pb::Waiting {
                    kind: pb::waiting::Kind::ClientTool as i32,
                    id: t.call_id.clone(),
                    tool: t.tool.clone(),
                    deadline: s.started_at.and_then(|at| {
                        let at = std::time::SystemTime::try_from(at).ok()?;
                        Some(Timestamp::from(at + data.client_tool_timeout))
                    }),
                })
            }
            _ => None,
        })
        .collect();
    if let Some(asked) = &data.asking {
        out.push(pb::Waiting {
            kind: pb::waiting::Kind::Permission as i32,
            id: asked.permission_id.clone(),
            tool: asked.tool.clone(),
            deadline: asked.deadline,
        });
    }
    out
}

/// INVALID_ARGUMENT naming `session_id`, with a `BadRequest` field violation.
/// Loads what the checks need.
async fn load(engine: &Engine, session: pb::Session) -> Result<Loaded, Status> {
    let store = engine.store();
    let session_id = session.id.as_str();
    // The lease first: a loop that starts after this read makes its message look settled, never the other way.
    let mut lease = store
        .leases()
        .lease_holder(session_id)
        .await
        .map_err(status::storage)?;
    let mut active = store
        .active()
        .is_active(session_id)
        .await
        .map_err(status::storage)?;
    // Lease and active mark disagree for a moment whenever a loop starts or ends; only a lasting mismatch is news.
    for _ in 0..RECHECKS {
        if lease.is_some() == active {
            break;
        }
        tokio::time::sleep(RECHECK_DELAY).await;
        lease = store
            .leases()
            .lease_holder(session_id)
            .await
            .map_err(status::storage)?;
        active = store
            .active()
            .is_active(session_id)
            .await
            .map_err(status::storage)?;
    }
    let (messages, _) = store
        .messages()
        .list_messages(session_id, None, usize::MAX)
        .await
        .map_err(status::storage)?;
    let held_here_without_loop = lease
        .as_ref()
        .is_some_and(|(owner, _)| *owner == engine.owner() && !engine.is_running(session_id));
    // A recorded permission request counts only while a loop holds the lease (it expires by itself otherwise).
    let asking = match &lease {
        Some(_) => store
            .mailboxes()
            .asking(session_id)
            .await
            .map_err(status::storage)?,
        None => None,
    };
    let client_tool_timeout = engine
        .agent(&session.agent)
        .map_or(Duration::ZERO, |a| a.client_tool_timeout);
    Ok(Loaded {
        session,
        messages,
        lease_holder: lease.map(|(owner, _)| owner),
        active,
        held_here_without_loop,
        asking,
        client_tool_timeout,
    })
}

/// Serves `Diagnose` for a session the caller may see (the server checked the id and the tenant).
pub async fn diagnose(
    engine: &Engine,
    session: pb::Session,
) -> Result<Response<pb::DiagnoseResponse>, Status> {
    let session_id = session.id.clone();
    let data = load(engine, session).await?;
    let failures = engine
        .store()
        .statuses()
        .session_write_failures(&session_id)
        .await
        .map_err(status::storage)?;
    Ok(Response::new(report(&data, &failures)))
}

#[cfg(test)]
#[path = "diagnostics_tests.rs"]
mod tests;
