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
use crate::history::FINISH_OVERFLOW;
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
    let store = &engine.store;
    let session_id = session.id.as_str();
    // The lease first: a loop that starts after this read makes its message look settled, never the other way.
    let mut lease = store
        .lease_holder(session_id)
        .await
        .map_err(status::storage)?;
    let mut active = store.is_active(session_id).await.map_err(status::storage)?;
    // Lease and active mark disagree for a moment whenever a loop starts or ends; only a lasting mismatch is news.
    for _ in 0..RECHECKS {
        if lease.is_some() == active {
            break;
        }
        tokio::time::sleep(RECHECK_DELAY).await;
        lease = store
            .lease_holder(session_id)
            .await
            .map_err(status::storage)?;
        active = store.is_active(session_id).await.map_err(status::storage)?;
    }
    let (messages, _) = store
        .list_messages(session_id, None, usize::MAX)
        .await
        .map_err(status::storage)?;
    let held_here_without_loop = lease
        .as_ref()
        .is_some_and(|(owner, _)| *owner == engine.owner && !engine.is_running(session_id));
    // A recorded permission request counts only while a loop holds the lease (it expires by itself otherwise).
    let asking = match &lease {
        Some(_) => store.asking(session_id).await.map_err(status::storage)?,
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
        .store
        .session_write_failures(&session_id)
        .await
        .map_err(status::storage)?;
    Ok(Response::new(report(&data, &failures)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processor::{Effect, Processor};
    use llm_proto::gateway as gw;

    fn ts(s: i64) -> Timestamp {
        Timestamp {
            seconds: s,
            nanos: 0,
        }
    }

    fn part(id: &str, kind: pb::part::Kind) -> pb::Part {
        pb::Part {
            id: id.into(),
            kind: Some(kind),
            ..Default::default()
        }
    }

    fn tokens(input: u64, output: u64) -> pb::Tokens {
        pb::Tokens {
            input,
            output,
            ..Default::default()
        }
    }

    fn start(id: &str) -> pb::Part {
        part(id, pb::part::Kind::StepStart(pb::StepStartPart::default()))
    }

    fn finish(id: &str, reason: &str, t: pb::Tokens, cost: i64) -> pb::Part {
        part(
            id,
            pb::part::Kind::StepFinish(pb::StepFinishPart {
                reason: reason.into(),
                tokens: Some(t),
                cost_nano_usd: cost,
                model: "openai/gpt-4o".into(),
                requested_model: "openai/gpt-4o".into(),
                ..Default::default()
            }),
        )
    }

    fn text(id: &str, ended: bool) -> pb::Part {
        part(
            id,
            pb::part::Kind::Text(pb::TextPart {
                text: "hi".into(),
                started_at: Some(ts(1)),
                ended_at: ended.then(|| ts(2)),
                synthetic: false,
            }),
        )
    }

    fn tool(id: &str, status: pb::tool_state::Status) -> pb::Part {
        part(
            id,
            pb::part::Kind::Tool(pb::ToolPart {
                call_id: format!("call_{id}"),
                tool: "read".into(),
                state: Some(pb::ToolState {
                    status: status as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        )
    }

    fn user(id: &str) -> pb::Message {
        pb::Message {
            id: id.into(),
            role: pb::Role::User as i32,
            parts: vec![text(&format!("{id}_t"), true)],
            ..Default::default()
        }
    }

    fn assistant(
        id: &str,
        finish: &str,
        cost: i64,
        t: pb::Tokens,
        parts: Vec<pb::Part>,
    ) -> pb::Message {
        pb::Message {
            id: id.into(),
            role: pb::Role::Assistant as i32,
            model: "openai/gpt-4o".into(),
            finish: finish.into(),
            cost_nano_usd: cost,
            tokens: Some(t),
            completed_at: Some(ts(3)),
            parts,
            ..Default::default()
        }
    }

    /// A two-step tool conversation as the loop stores it: step 1 calls a tool, step 2 answers.
    fn healthy() -> Loaded {
        let m1 = assistant(
            "msg_2",
            "tool_calls",
            100,
            tokens(10, 5),
            vec![
                start("p1"),
                tool("p2", pb::tool_state::Status::Completed),
                finish("p3", "tool_calls", tokens(10, 5), 100),
            ],
        );
        let m2 = assistant(
            "msg_3",
            "stop",
            250,
            tokens(20, 7),
            vec![
                start("p4"),
                text("p5", true),
                finish("p6", "stop", tokens(20, 7), 250),
            ],
        );
        Loaded {
            session: pb::Session {
                id: "ses_1".into(),
                cost_nano_usd: 350,
                tokens: Some(tokens(30, 12)),
                ..Default::default()
            },
            messages: vec![user("msg_1"), m1, m2],
            ..Default::default()
        }
    }

    fn check<'a>(checks: &'a [pb::DiagnosticCheck], name: &str) -> &'a pb::DiagnosticCheck {
        checks.iter().find(|c| c.name == name).unwrap()
    }

    fn failing(data: &Loaded) -> Vec<String> {
        run_checks(data)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn a_healthy_session_passes_every_check_in_the_fixed_order() {
        let checks = run_checks(&healthy());
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, CHECKS);
        for c in &checks {
            assert!(c.ok, "{c:?}");
            assert!(c.detail.is_empty());
            assert!(!c.description.is_empty());
        }
        let r = report(&healthy(), &WriteFailures::default());
        assert!(r.healthy);
        assert_eq!(
            (r.retries, r.fallbacks, r.storage_write_failures),
            (0, 0, 0)
        );
        assert!(r.last_error.is_none() && r.last_storage_failure_at.is_none());
    }

    #[test]
    fn a_step_start_without_its_step_finish_is_named() {
        let mut data = healthy();
        data.messages[2].parts.push(start("p7"));
        assert_eq!(failing(&data), [STEP_PAIRING]);
        let c = check(&run_checks(&data), STEP_PAIRING).clone();
        assert!(
            c.detail.contains("msg_3") && c.detail.contains("p7"),
            "{}",
            c.detail
        );

        // Two starts in a row, and a finish without a start.
        let mut data = healthy();
        data.messages[1].parts.insert(1, start("p1b"));
        data.messages[2].parts.remove(0);
        let c = step_pairing(&data);
        assert!(!c.ok);
        assert!(
            c.detail
                .contains("step-start p1 has no step-finish before step-start p1b"),
            "{}",
            c.detail
        );
        assert!(
            c.detail.contains("step-finish p6 has no step-start"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn a_step_that_ended_early_for_a_recorded_reason_may_lack_its_step_finish() {
        for (finish, error) in [
            ("retried", false),
            ("", true),
            ("interrupted", false),
            (FINISH_OVERFLOW, false),
        ] {
            let mut data = healthy();
            let m = assistant(
                "msg_4",
                finish,
                0,
                pb::Tokens::default(),
                vec![start("p8"), text("p9", true)],
            );
            data.messages.push(pb::Message {
                error: error.then(|| pb::MessageError {
                    kind: pb::message_error::Kind::Api as i32,
                    message: "overloaded".into(),
                    ..Default::default()
                }),
                ..m
            });
            assert!(step_pairing(&data).ok, "{finish} {error}");
        }
        // The running step of a live loop is skipped too.
        let mut data = healthy();
        data.lease_holder = Some("rep_a".into());
        data.active = true;
        let mut running = assistant("msg_4", "", 0, pb::Tokens::default(), vec![start("p8")]);
        running.completed_at = None;
        data.messages.push(running.clone());
        assert!(failing(&data).is_empty(), "{:?}", run_checks(&data));
        // Without the lease, the same message is an orphan.
        data.lease_holder = None;
        data.active = false;
        assert_eq!(failing(&data), [STEP_PAIRING, PARTS_CLOSED]);
    }

    #[test]
    fn a_message_cost_that_does_not_add_up_is_named_with_its_values() {
        let mut data = healthy();
        data.messages[2].cost_nano_usd = 251;
        data.session.cost_nano_usd = 351;
        assert_eq!(failing(&data), [MESSAGE_COST]);
        let c = message_cost(&data);
        assert!(
            c.detail
                .contains("message msg_3: cost 251 nano-USD but its steps sum to 250"),
            "{}",
            c.detail
        );
        assert!(
            !c.detail.contains("session"),
            "the session equals its messages: {}",
            c.detail
        );

        let mut data = healthy();
        data.session.cost_nano_usd = 1;
        let c = message_cost(&data);
        assert!(
            c.detail
                .contains("session ses_1: cost 1 nano-USD but its messages sum to 350"),
            "{}",
            c.detail
        );
        // While a loop runs, the session total is not compared (settled after each step).
        data.lease_holder = Some("rep".into());
        data.active = true;
        assert!(message_cost(&data).ok);
    }

    #[test]
    fn message_tokens_are_the_last_steps_and_session_tokens_the_sum() {
        let mut data = healthy();
        data.messages[2].tokens = Some(tokens(30, 12));
        assert_eq!(failing(&data), [MESSAGE_TOKENS]);
        assert!(message_tokens(&data).detail.contains("message msg_3"));

        let mut data = healthy();
        data.session.tokens = Some(tokens(20, 7));
        let c = message_tokens(&data);
        assert!(!c.ok && c.detail.contains("session ses_1"), "{}", c.detail);

        // A message with no step-finish has no tokens.
        let mut data = healthy();
        data.messages.push(assistant(
            "msg_4",
            "retried",
            0,
            tokens(1, 0),
            vec![start("p8")],
        ));
        data.messages[3]
            .parts
            .push(part("p9", pb::part::Kind::Retry(pb::RetryPart::default())));
        assert_eq!(failing(&data), [MESSAGE_TOKENS]);
    }

    #[test]
    fn a_tool_left_running_is_named_unless_the_live_loop_runs_it() {
        let mut data = healthy();
        data.messages[1].parts[1] = tool("p2", pb::tool_state::Status::Running);
        assert_eq!(failing(&data), [TOOLS_SETTLED]);
        let c = tools_settled(&data);
        assert!(
            c.detail
                .contains("tool part p2 (call call_p2, `read`) is running"),
            "{}",
            c.detail
        );

        let mut data = healthy();
        data.lease_holder = Some("rep".into());
        data.active = true;
        let mut waiting = assistant(
            "msg_4",
            "tool_calls",
            5,
            tokens(1, 1),
            vec![
                start("p8"),
                tool("p9", pb::tool_state::Status::Pending),
                finish("pa", "tool_calls", tokens(1, 1), 5),
            ],
        );
        waiting.completed_at = None;
        data.messages.push(waiting);
        assert!(tools_settled(&data).ok);
    }

    #[test]
    fn open_parts_and_messages_without_completion_are_named() {
        let mut data = healthy();
        data.messages[2].parts[1] = text("p5", false);
        data.messages[1].completed_at = None;
        assert_eq!(failing(&data), [PARTS_CLOSED]);
        let c = parts_closed(&data);
        assert!(
            c.detail.contains("message msg_2 has no completion time"),
            "{}",
            c.detail
        );
        assert!(
            c.detail
                .contains("message msg_3: text part p5 has no end time"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn busy_and_lease_must_agree() {
        let mut data = healthy();
        data.active = true;
        assert_eq!(failing(&data), [BUSY_UNDER_LEASE]);
        assert!(busy_under_lease(&data).detail.contains("no lease is held"));

        let mut data = healthy();
        data.lease_holder = Some("rep_x".into());
        let c = busy_under_lease(&data);
        assert!(
            !c.ok && c.detail.contains("lease held by rep_x"),
            "{}",
            c.detail
        );

        data.active = true;
        assert!(busy_under_lease(&data).ok);
        data.held_here_without_loop = true;
        let c = busy_under_lease(&data);
        assert!(
            !c.ok && c.detail.contains("no loop for the session runs here"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn many_findings_are_listed_up_to_a_bound() {
        let mut data = healthy();
        for i in 0..(MAX_FINDINGS + 3) {
            data.messages[2]
                .parts
                .push(text(&format!("q{i:02}"), false));
        }
        let c = parts_closed(&data);
        assert_eq!(c.detail.matches("has no end time").count(), MAX_FINDINGS);
        assert!(c.detail.ends_with("and 3 more"), "{}", c.detail);
    }

    #[test]
    fn retries_fallbacks_and_the_last_error_are_reported() {
        let mut data = healthy();
        let mut failed = assistant(
            "msg_2a",
            "retried",
            0,
            pb::Tokens::default(),
            vec![
                start("p0"),
                part(
                    "p0r",
                    pb::part::Kind::Retry(pb::RetryPart {
                        attempt: 1,
                        ..Default::default()
                    }),
                ),
            ],
        );
        failed.error = None;
        data.messages.insert(1, failed);
        if let Some(pb::part::Kind::StepFinish(f)) = data.messages[3].parts[2].kind.as_mut() {
            f.model = "anthropic/claude-sonnet-4-5".into();
        }
        // An older step stored before the requested model was recorded is not a fallback.
        if let Some(pb::part::Kind::StepFinish(f)) = data.messages[2].parts[2].kind.as_mut() {
            f.requested_model.clear();
            f.model = "openai/gpt-4o-2024-08-06".into();
        }
        let old = pb::MessageError {
            kind: pb::message_error::Kind::Api as i32,
            message: "old".into(),
            ..Default::default()
        };
        let new = pb::MessageError {
            kind: pb::message_error::Kind::OutputLength as i32,
            message: "cut".into(),
            ..Default::default()
        };
        data.messages[2].error = Some(old);
        data.messages[3].error = Some(new.clone());
        let failures = WriteFailures {
            count: 2,
            last_at_ms: 1_700_000_000_123,
            last_message: "redis: broken pipe".into(),
        };
        let r = report(&data, &failures);
        assert_eq!((r.retries, r.fallbacks), (1, 1));
        assert_eq!(r.last_error, Some(new));
        assert_eq!(r.last_error_message_id, "msg_3");
        assert_eq!(r.storage_write_failures, 2);
        assert_eq!(
            r.last_storage_failure_at,
            Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 123_000_000
            })
        );
        assert_eq!(r.last_storage_failure, "redis: broken pipe");
        assert!(!r.lease_held && r.lease_holder.is_empty());
    }

    #[test]
    fn the_processor_records_the_requested_and_the_served_model_on_step_finish() {
        let mut p = Processor::new(
            pb::Message {
                id: "msg_1".into(),
                session_id: "ses_1".into(),
                role: pb::Role::Assistant as i32,
                model: "openai/gpt-4o".into(),
                ..Default::default()
            },
            None,
        );
        let mut out = Vec::new();
        use gw::stream_response::Event as E;
        for e in [
            E::StreamStart(gw::StreamStart {
                provider: "anthropic".into(),
                model: "anthropic/claude-sonnet-4-5".into(),
                attempt: 4,
            }),
            E::StepStart(gw::StepStart {}),
            E::StepFinish(gw::StepFinish {
                finish_reason: gw::FinishReason::Stop as i32,
                ..Default::default()
            }),
        ] {
            p.handle(gw::StreamResponse { event: Some(e) }, ts(1), &mut out);
        }
        let finish = out
            .iter()
            .find_map(|e| match e {
                Effect::Part(pb::Part {
                    kind: Some(pb::part::Kind::StepFinish(f)),
                    ..
                }) => Some(f.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(finish.model, "anthropic/claude-sonnet-4-5");
        assert_eq!(finish.requested_model, "openai/gpt-4o");
        let m = pb::Message {
            role: pb::Role::Assistant as i32,
            parts: vec![part("p", pb::part::Kind::StepFinish(finish))],
            ..Default::default()
        };
        assert_eq!(fallbacks(&[m]), 1);
    }
}
