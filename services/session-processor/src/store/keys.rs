//! Key layout. Every key of a session carries the hash tag `{sess:<id>}` so Redis Cluster keeps the whole session
//! in one slot, which is what lets one Lua script check the lease and write in the same atomic step.

use super::StoreError;

/// Longest session id accepted; ids are short generated strings, so a long one is a caller bug, and a bound keeps
/// key sizes predictable.
const MAX_SESSION_ID: usize = 256;
/// Longest message, part, call or permission id accepted.
const MAX_ID: usize = 512;

/// Keys of one session: `<prefix>{sess:<id>}:<suffix>`.
pub(super) struct SessionKeys {
    base: String,
}

impl SessionKeys {
    /// Builds the keys of `session_id` under `prefix`. The id must not contain braces: a `}` would end the hash tag
    /// early and let one session's keys alias another's.
    pub(super) fn new(prefix: &str, session_id: &str) -> Result<Self, StoreError> {
        if session_id.is_empty()
            || session_id.len() > MAX_SESSION_ID
            || session_id.contains(['{', '}'])
        {
            return Err(StoreError::InvalidArgument(format!(
                "session id {session_id:?} must be 1..={MAX_SESSION_ID} bytes without braces"
            )));
        }
        Ok(Self {
            base: [prefix, "{sess:", session_id, "}:"].concat(),
        })
    }

    /// The base followed by `kind` and `id` (`msg:<id>`, `parts:<id>`, ...; a fixed key's name is its `kind` with
    /// an empty `id`). `concat` allocates the key at its size once; `format!` would grow it as it writes, and a
    /// prompt's writes name a few dozen keys.
    fn with(&self, kind: &str, id: &str) -> String {
        [self.base.as_str(), kind, id].concat()
    }

    /// Encoded `Session` (without live status).
    pub(super) fn session(&self) -> String {
        self.with("session", "")
    }

    /// ZSET of message ids (score 0, lexicographic order = chronological).
    pub(super) fn messages(&self) -> String {
        self.with("messages", "")
    }

    /// Encoded `Message` with `parts` cleared.
    pub(super) fn message(&self, message_id: &str) -> String {
        self.with("msg:", message_id)
    }

    /// HASH part id → encoded `Part`.
    pub(super) fn parts(&self, message_id: &str) -> String {
        self.with("parts:", message_id)
    }

    /// Stream of encoded `SessionEvent`s.
    pub(super) fn events(&self) -> String {
        self.with("events", "")
    }

    /// `<owner>:<token>` with a PX ttl.
    pub(super) fn lease(&self) -> String {
        self.with("lease", "")
    }

    /// INCR counter the fencing tokens come from; it outlives leases so tokens only grow.
    pub(super) fn fence(&self) -> String {
        self.with("fence", "")
    }

    /// LIST of encoded `PromptRequest`s waiting for the running loop, each tagged (see `queue.rs`).
    pub(super) fn queue(&self) -> String {
        self.with("queue", "")
    }

    /// HASH tag → user message id of the queued prompts delivered, empty while one is queued (see `queue.rs`), with
    /// a PX ttl.
    pub(super) fn delivered(&self) -> String {
        self.with("delivered", "")
    }

    /// SET of the session's keys whose names carry caller-chosen ids (mailboxes, idempotency keys), so
    /// `delete_session` finds them without SCAN.
    pub(super) fn aux(&self) -> String {
        self.with("aux", "")
    }

    /// HASH call id → encoded `SubmitToolResultRequest`: the durable record of every tool result.
    pub(super) fn tool_results(&self) -> String {
        self.with("toolresults", "")
    }

    /// LIST that wakes the loop waiting for `call_id` (a doorbell; the record above is the truth).
    pub(super) fn tool_mailbox(&self, call_id: &str) -> String {
        self.with("toolresult:", call_id)
    }

    /// SET of the questions a loop asked the caller (`tool:<call id>`, `permission:<permission id>`): only those
    /// can be answered, so a caller cannot store answers nobody asked for.
    pub(super) fn awaiting(&self) -> String {
        self.with("awaiting", "")
    }

    /// HASH permission id → encoded `ReplyPermissionRequest`: the durable record of every reply.
    pub(super) fn permissions(&self) -> String {
        self.with("permissions", "")
    }

    /// LIST that wakes the loop waiting for `permission_id`.
    pub(super) fn permission_mailbox(&self, permission_id: &str) -> String {
        self.with("permission:", permission_id)
    }

    /// Idempotency claim; the caller's key is hashed so any length or byte content makes a bounded key name.
    pub(super) fn idempotency(&self, key: &str) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(key.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.with("idem:", &hex)
    }

    /// HASH `lease` → `<owner>:<token>`, `s` → encoded `SessionStatus`: the retry status of the loop holding that
    /// lease while it waits before retrying a step. Ignored once the lease moved on.
    pub(super) fn retry_status(&self) -> String {
        self.with("retrystatus", "")
    }

    /// HASH `count`, `at_ms`, `message`: storage write failures of this session, flushed from the replicas' tallies.
    pub(super) fn write_failures(&self) -> String {
        self.with("writefailures", "")
    }

    /// STRING: encoded `PromptRequest` holding only the run's inputs (model, client tools, system), so a loop resumed
    /// on another replica offers the same client tools and system text.
    pub(super) fn run_inputs(&self) -> String {
        self.with("inputs", "")
    }

    /// STRING with a PX ttl: a stream on a replica that does not run the session's loop follows it (refreshed about
    /// once a second while it reads the log), so the loop's event channel writes with the short flush window.
    pub(super) fn watched(&self) -> String {
        self.with("watched", "")
    }

    /// STRING: the model the session's latest user message runs with (its resolved `model`), so the next prompt
    /// that names none inherits it without reading the history.
    pub(super) fn prompt_model(&self) -> String {
        self.with("model", "")
    }

    /// STRING with a PX ttl: the encoded `PermissionAsked` the running loop waits on (see `asking.rs`).
    pub(super) fn asking(&self) -> String {
        self.with("asking", "")
    }

    /// Every key with a fixed name; `delete_session` adds the per-message keys and the `aux` members.
    pub(super) fn fixed(&self) -> Vec<String> {
        vec![
            self.session(),
            self.messages(),
            self.events(),
            self.lease(),
            self.fence(),
            self.queue(),
            self.delivered(),
            self.aux(),
            self.tool_results(),
            self.awaiting(),
            self.permissions(),
            self.retry_status(),
            self.write_failures(),
            self.run_inputs(),
            self.watched(),
            self.prompt_model(),
            self.asking(),
        ]
    }
}

/// Global index of sessions (ZSET, score = created ms). It lives outside every session's slot, so it is never
/// written in the same script as a session key.
pub(super) fn index(prefix: &str) -> String {
    [prefix, "sessions"].concat()
}

/// Global set of sessions with a loop in progress, so any replica can find sessions whose owner died (their lease
/// expired while they were still in this set) and resume them.
pub(super) fn active(prefix: &str) -> String {
    [prefix, "active"].concat()
}

/// A tenant's spend in nano-USD (an INCRBY counter). Tenant names are validated by the configuration
/// (`[A-Za-z0-9._-]`), so they cannot form another key's name or a hash tag.
pub(super) fn tenant_spend(prefix: &str, tenant: &str) -> String {
    format!("{prefix}tenant:{tenant}:spend")
}

/// A tenant's index of sessions (ZSET, score = created ms, as in the global index); the unnamed tenant's has the
/// empty name (`<prefix>tenant::sessions`), which no named tenant can have.
pub(super) fn tenant_sessions(prefix: &str, tenant: &str) -> String {
    format!("{prefix}tenant:{tenant}:sessions")
}

/// STRING: the created-ms score up to which every global index entry has been copied to its tenant's index.
pub(super) fn tenants_indexed(prefix: &str) -> String {
    format!("{prefix}tenants:indexed")
}

/// Checks a message, part, call or permission id: non-empty and bounded. These ids follow a fixed suffix in the key
/// name, so no content can make two different ids produce the same key.
pub(super) fn check_id(what: &str, id: &str) -> Result<(), StoreError> {
    if id.is_empty() || id.len() > MAX_ID {
        return Err(StoreError::InvalidArgument(format!(
            "{what} {id:?} must be 1..={MAX_ID} bytes"
        )));
    }
    Ok(())
}
