//! Configuration: a TOML file plus environment variables, validated at start-up; errors name the key.

mod bash;
mod redis;
mod transport;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use serde::Deserialize;

pub use bash::{BashFile, BashLimitsFile};

use crate::tools::{DoomPolicy, PermissionRules, RuleConfig, Sandbox};

mod tenants;

pub use crate::names::{MAX_TENANT_NAME, valid_tenant_name};
pub use tenants::{Caller, MIN_TOKEN_LEN, Tenant, TenantFile};

/// A configuration error naming its key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// Dotted path of the key.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

fn err(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

/// The file as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `[server]`.
    #[serde(default)]
    pub server: ServerFile,
    /// `[gateway]`.
    #[serde(default)]
    pub gateway: GatewayFile,
    /// `[redis]`.
    #[serde(default)]
    pub redis: RedisFile,
    /// `[workspaces]`.
    #[serde(default)]
    pub workspaces: WorkspacesFile,
    /// `[snapshots]`: workspace snapshots and diffs.
    #[serde(default)]
    pub snapshots: SnapshotsFile,
    /// Agents by name; `default` is used when a session names none.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentFile>,
    /// Session titles.
    #[serde(default)]
    pub titles: TitlesFile,
    /// Tenants by name: which caller tokens belong to them and their budgets.
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantFile>,
    /// `[events]`: the session event log.
    #[serde(default)]
    pub events: EventsFile,
    /// `[tools]`: the built-in tools.
    #[serde(default)]
    pub tools: ToolsFile,
}

/// `[tools]`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsFile {
    /// `[tools.bash]`: the sandbox and the default limits of a command.
    pub bash: BashFile,
}

/// `[events]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsFile {
    /// How long after the first unwritten event a running loop writes its events (and the text its parts received)
    /// to Redis as one entry, while a stream on another replica follows the session. Streams on the loop's replica
    /// get every event at once whatever this is; streams on other replicas see events up to this much later.
    /// Smaller: fresher remote streams, more Redis commands.
    pub flush_interval_ms: u64,
    /// The same while no stream on another replica follows the session (taken as `flush_interval_ms` when shorter).
    /// Nobody sees the difference live; a replica that crashes loses up to this much of the text its own streams
    /// showed. Larger: fewer Redis commands per streamed second.
    pub unwatched_flush_interval_ms: u64,
}

impl Default for EventsFile {
    fn default() -> Self {
        EventsFile {
            flush_interval_ms: u64::try_from(crate::events::DEFAULT_FLUSH_INTERVAL.as_millis())
                .unwrap_or(200),
            unwatched_flush_interval_ms: u64::try_from(
                crate::events::DEFAULT_UNWATCHED_FLUSH_INTERVAL.as_millis(),
            )
            .unwrap_or(1000),
        }
    }
}

/// `[titles]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TitlesFile {
    /// Generate a title after a session's first prompt (one extra small-model call per session).
    pub enabled: bool,
}

impl Default for TitlesFile {
    fn default() -> Self {
        TitlesFile { enabled: true }
    }
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerFile {
    /// Listen address (env `PROCESSOR_LISTEN`).
    pub listen: String,
    /// Caller tokens of the unnamed tenant (env `PROCESSOR_AUTH_TOKENS`, comma-separated, adds to these).
    pub auth_tokens: Vec<String>,
    /// Operator tokens: may act on every tenant's sessions, and every use is logged (env
    /// `PROCESSOR_OPERATOR_TOKENS`, comma-separated, adds to these).
    pub operator_tokens: Vec<String>,
    /// Serve without caller authentication (local development only).
    pub allow_unauthenticated: bool,
    /// Grace period for running loops after SIGTERM.
    pub shutdown_grace_ms: u64,
    /// Address of the Prometheus `/metrics` listener (env `PROCESSOR_METRICS_LISTEN` overrides); off when unset.
    pub metrics_listen: Option<String>,
    /// Largest request message decoded; larger ones get `RESOURCE_EXHAUSTED` unread.
    pub max_request_bytes: usize,
    /// Idle time after which the server pings a connection (HTTP/2 PING).
    pub keepalive_interval_ms: u64,
    /// How long a ping may go unanswered before the server closes the connection.
    pub keepalive_timeout_ms: u64,
    /// Serve TLS (mutual TLS with `client_ca_file`); env `PROCESSOR_TLS_CERT_FILE`, `PROCESSOR_TLS_KEY_FILE` and
    /// `PROCESSOR_TLS_CLIENT_CA_FILE` override its keys.
    pub tls: Option<service_kit::tls::ServerTlsFiles>,
}

impl Default for ServerFile {
    fn default() -> Self {
        ServerFile {
            listen: "127.0.0.1:50052".into(),
            auth_tokens: Vec::new(),
            operator_tokens: Vec::new(),
            allow_unauthenticated: false,
            shutdown_grace_ms: 30_000,
            metrics_listen: None,
            max_request_bytes: transport::DEFAULT_MAX_REQUEST_BYTES,
            keepalive_interval_ms: 30_000,
            keepalive_timeout_ms: 20_000,
            tls: None,
        }
    }
}

/// `[gateway]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayFile {
    /// The gateway's gRPC URL (env `GATEWAY_URL`).
    pub url: String,
    /// Environment variable holding the bearer token for the gateway.
    pub token_env: String,
    /// Deadline of one gateway step.
    pub step_timeout_ms: u64,
    /// How calls are spread over gateway replicas: `connection` (one HTTP/2 connection; calls follow it) or `dns`
    /// (resolve the URL's host every `resolve_interval_ms` and balance each call over every address, e.g. of a
    /// headless Service). Env `GATEWAY_BALANCE`.
    pub balance: String,
    /// How often `balance = "dns"` resolves the gateway's host again.
    pub resolve_interval_ms: u64,
    /// The model (`provider/model`) a prompt runs with when neither it, the session's earlier prompts, the session
    /// nor the agent names one; none when empty.
    pub default_model: String,
    /// TLS to an `https://` gateway: the CA to trust (the system's roots when unset) and the client certificate
    /// when the gateway requires mutual TLS.
    pub tls: Option<service_kit::tls::ClientTlsFiles>,
}

impl Default for GatewayFile {
    fn default() -> Self {
        GatewayFile {
            url: "http://127.0.0.1:50051".into(),
            token_env: "GATEWAY_TOKEN".into(),
            step_timeout_ms: 600_000,
            balance: "connection".into(),
            resolve_interval_ms: 5_000,
            default_model: String::new(),
            tls: None,
        }
    }
}

/// `[redis]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisFile {
    /// `standalone`, `cluster` or `sentinel` (env `REDIS_MODE`; see `config/redis.rs` and docs/operations.md).
    pub mode: String,
    /// Redis URL (env `REDIS_URL`); in cluster mode a comma-separated list of nodes, in sentinel mode of sentinels.
    pub url: String,
    /// The name the sentinels monitor the primary under (env `REDIS_SENTINEL_MASTER`); sentinel mode only.
    pub sentinel_master: Option<String>,
    /// Prefix of every key, so several deployments can share a Redis.
    pub prefix: String,
    /// Lease time-to-live; a replica that stops renewing loses its sessions after this long.
    pub lease_ttl_ms: u64,
    /// Redis ACL user; the URL may carry it instead (`rediss://user:password@host`), not both.
    pub username: Option<String>,
    /// Environment variable holding the password of that user (or of the default user).
    pub password_env: String,
    /// TLS to a `rediss://` Redis: the CA to trust (the system's roots when unset) and the client certificate when
    /// Redis requires one.
    pub tls: Option<service_kit::tls::ClientTlsFiles>,
}

impl Default for RedisFile {
    fn default() -> Self {
        RedisFile {
            mode: "standalone".into(),
            url: "redis://127.0.0.1:6379".into(),
            sentinel_master: None,
            prefix: "llm:".into(),
            lease_ttl_ms: 5_000,
            username: None,
            password_env: "REDIS_PASSWORD".into(),
            tls: None,
        }
    }
}

/// `[workspaces]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkspacesFile {
    /// Directory under which each session's workspace lives (env `PROCESSOR_WORKSPACE_ROOT`).
    pub root: String,
}

impl Default for WorkspacesFile {
    fn default() -> Self {
        WorkspacesFile {
            root: "./workspaces".into(),
        }
    }
}

/// `[snapshots]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotsFile {
    /// Snapshot the workspace at each step (needs `git` on the processor's PATH).
    pub enabled: bool,
    /// Directory of the snapshot repositories, one per session, outside every workspace (env
    /// `PROCESSOR_SNAPSHOT_ROOT`). Unset: `@snapshots` inside the workspace root, a name no workspace can have, so
    /// snapshots live on the same volume as the workspaces.
    pub root: Option<String>,
    /// Files larger than this many bytes are left out of snapshots.
    pub max_file_bytes: u64,
    /// Deadline of one snapshot or one diff (every git command it runs).
    pub timeout_ms: u64,
}

impl Default for SnapshotsFile {
    fn default() -> Self {
        SnapshotsFile {
            enabled: true,
            root: None,
            max_file_bytes: 2 * 1024 * 1024,
            timeout_ms: 30_000,
        }
    }
}

/// Validated `[snapshots]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// Whether sessions with a workspace get snapshots.
    pub enabled: bool,
    /// Directory of the per-session snapshot repositories.
    pub root: PathBuf,
    /// Largest file (bytes) a snapshot includes.
    pub max_file_bytes: u64,
    /// Deadline of one snapshot or diff.
    pub timeout: Duration,
}

/// The directory under the workspace root that holds snapshots by default: `@` is not allowed in workspace names, so
/// no session's workspace can be (or contain) it.
pub const DEFAULT_SNAPSHOT_DIR: &str = "@snapshots";

/// `root` and `workspace_root` must not overlap, except that the snapshot root may sit directly or deeper under the
/// workspace root below a name that cannot be a workspace (one with a character outside `[A-Za-z0-9._-]`) and is
/// not `@tenants`, where tenants' workspaces live.
fn snapshot_root_ok(root: &Path, workspace_root: &Path) -> bool {
    use std::path::Component;
    let norm = |p: &Path| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in p.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    if out.last().is_some_and(|l| l != "..") {
                        out.pop();
                    } else {
                        out.push("..".into());
                    }
                }
                other => out.push(other.as_os_str().to_string_lossy().into_owned()),
            }
        }
        out
    };
    let (r, w) = (norm(root), norm(workspace_root));
    if w.starts_with(&r) {
        return false;
    }
    match r.strip_prefix(w.as_slice()) {
        // Neither a workspace of the unnamed tenant nor the directory of named tenants' workspaces.
        Some([first, ..]) => {
            !crate::tools::valid_workspace_name(first) && first != crate::tools::TENANTS_DIR
        }
        _ => true,
    }
}

/// `[agents.<name>]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct AgentFile {
    /// The agent's role prompt, first in the system.
    #[serde(default)]
    pub role_prompt: String,
    /// Default model (`provider/model`).
    #[serde(default)]
    pub model: String,
    /// Built-in tools the agent may use (`read`, `write`, `edit`, `list`, `grep`, `bash`).
    #[serde(default = "default_tools")]
    pub tools: Vec<String>,
    /// Permission rules, first match wins; built-in defaults after them.
    #[serde(default)]
    pub permissions: Vec<RuleConfig>,
    /// Most steps per loop; the last one is text-only.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// What to do about a doom loop: `ask`, `allow` or `deny`.
    #[serde(default = "default_doom")]
    pub doom_loop: String,
    /// Skills: named instruction files (relative to the config file) appended to the system.
    #[serde(default)]
    pub skills: BTreeMap<String, String>,
    /// How long a client tool may take before it fails.
    #[serde(default = "default_client_tool_timeout")]
    pub client_tool_timeout_ms: u64,
    /// How long a permission request waits before it is denied.
    #[serde(default = "default_permission_timeout")]
    pub permission_timeout_ms: u64,
    /// Retries of a step that failed with a retryable error after output started.
    #[serde(default = "default_step_retries")]
    pub step_retries: u32,
    /// First retry delay; doubled per attempt up to `retry_max_delay_ms`.
    #[serde(default = "default_retry_base_delay")]
    pub retry_base_delay_ms: u64,
    /// Longest backoff between step retries.
    #[serde(default = "default_retry_max_delay")]
    pub retry_max_delay_ms: u64,
    /// Longest provider `retry_after` the loop waits for; a longer one stops the loop with the error at once.
    #[serde(default = "default_max_retry_after")]
    pub max_retry_after_ms: u64,
    /// Model for session titles (`provider/model`); the session's model when empty.
    #[serde(default)]
    pub small_model: String,
    /// Compact the history automatically when the context nears the model's limit. When false, an overflow stops the
    /// loop with a context_overflow error.
    #[serde(default = "default_true")]
    pub auto_compact: bool,
    /// Tokens kept free for the answer when deciding that the context overflows; `min(20000, model max output)`
    /// when absent.
    #[serde(default)]
    pub compaction_reserve_tokens: Option<u64>,
    /// Reasoning the agent's steps ask for (`{ effort = "medium", budget_tokens = 4096 }`); a prompt's own
    /// `reasoning` replaces it. None when absent.
    #[serde(default)]
    pub reasoning: Option<ReasoningFile>,
    /// Most recent tool output (in estimated tokens) never pruned from requests.
    #[serde(default = "default_prune_protect")]
    pub prune_protect_tokens: u64,
    /// Older tool output is pruned from requests only when at least this many estimated tokens would go.
    #[serde(default = "default_prune_minimum")]
    pub prune_minimum_tokens: u64,
    /// The agent's own limits for `bash` commands, over `[tools.bash]`.
    #[serde(default)]
    pub bash: Option<BashLimitsFile>,
}

/// `[agents.<name>.reasoning]`.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct ReasoningFile {
    /// `none`, `minimal`, `low`, `medium` or `high`; the model's default when absent.
    #[serde(default)]
    pub effort: String,
    /// Reasoning token budget (Anthropic thinking), at least 1024; none when 0 or absent.
    #[serde(default)]
    pub budget_tokens: u32,
}

impl ReasoningFile {
    /// The validated settings, or what is wrong with them (`effort`, `budget_tokens`).
    fn validate(&self) -> Result<pb::Reasoning, (&'static str, String)> {
        use pb::reasoning::Effort;
        let effort = match self.effort.as_str() {
            "" => Effort::Unspecified,
            "none" => Effort::None,
            "minimal" => Effort::Minimal,
            "low" => Effort::Low,
            "medium" => Effort::Medium,
            "high" => Effort::High,
            other => {
                return Err((
                    "effort",
                    format!("`{other}` is not none, minimal, low, medium or high"),
                ));
            }
        };
        if self.budget_tokens != 0 && self.budget_tokens < 1024 {
            return Err(("budget_tokens", "must be 0 (none) or at least 1024".into()));
        }
        Ok(pb::Reasoning {
            effort: effort as i32,
            budget_tokens: self.budget_tokens,
        })
    }
}

fn default_tools() -> Vec<String> {
    vec!["read".into(), "list".into(), "grep".into()]
}
fn default_max_steps() -> u32 {
    25
}
fn default_doom() -> String {
    "ask".into()
}
fn default_client_tool_timeout() -> u64 {
    300_000
}
fn default_permission_timeout() -> u64 {
    120_000
}
fn default_step_retries() -> u32 {
    3
}
fn default_retry_base_delay() -> u64 {
    500
}
fn default_retry_max_delay() -> u64 {
    30_000
}
fn default_max_retry_after() -> u64 {
    60_000
}
fn default_true() -> bool {
    true
}
fn default_prune_protect() -> u64 {
    40_000
}
fn default_prune_minimum() -> u64 {
    20_000
}

/// A validated agent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Its name (the `[agents.<name>]` key).
    pub name: String,
    /// Role prompt, first in the system.
    pub role_prompt: String,
    /// Default model; empty means the session's.
    pub model: String,
    /// Built-in tools it may use.
    pub tools: Vec<String>,
    /// Permission rules, configured ones first.
    pub permissions: PermissionRules,
    /// Most steps per loop.
    pub max_steps: u32,
    /// What a doom loop leads to.
    pub doom_loop: DoomPolicy,
    /// `(name, text)` of each skill, in name order.
    pub skills: Vec<(String, String)>,
    /// How long a client tool may take.
    pub client_tool_timeout: Duration,
    /// How long a permission request waits.
    pub permission_timeout: Duration,
    /// Retries of a failed step (also in `retry.max_retries`).
    pub step_retries: u32,
    /// How step retries wait (backoff and the provider's `retry_after`).
    pub retry: RetryPolicy,
    /// Model for titles; empty means the session's model.
    pub small_model: String,
    /// Whether an overflow compacts the history (true) or stops the loop (false).
    pub auto_compact: bool,
    /// Configured answer reserve; `None` means `min(20000, model max output)`.
    pub compaction_reserve: Option<u64>,
    /// Reasoning its steps ask for, unless the prompt asks for its own.
    pub reasoning: Option<pb::Reasoning>,
    /// Recent tool output (estimated tokens) never pruned.
    pub prune_protect: u64,
    /// Least amount of tool output (estimated tokens) worth pruning.
    pub prune_minimum: u64,
    /// Limits of its tool calls, and the processor's sandbox for `bash`.
    pub tool_limits: crate::tools::Limits,
}

/// How a failed step is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff delay, doubled per retry.
    pub base_delay: Duration,
    /// Cap of the backoff.
    pub max_delay: Duration,
    /// Longest provider `retry_after` worth waiting for.
    pub max_retry_after: Duration,
}

/// USD as integer nano-USD, the unit every cost in the product uses; `None` for negative, NaN or absurdly large
/// amounts.
pub fn usd_to_nano(usd: f64) -> Option<i64> {
    // 9.2e9 USD is the largest amount i64 nano-USD holds; anything near it is a typo, not a budget.
    if !usd.is_finite() || !(0.0..=1e9).contains(&usd) {
        return None;
    }
    Some((usd * 1e9).round() as i64)
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub listen: SocketAddr,
    /// Where `/metrics` is served; `None` turns the listener off.
    pub metrics_listen: Option<SocketAddr>,
    /// Every accepted token and who presents it (see [`Caller`]).
    pub tokens: Vec<(String, Caller)>,
    /// Serve without caller authentication when no token is configured.
    pub allow_unauthenticated: bool,
    /// Grace period for running loops after SIGTERM.
    pub shutdown_grace: Duration,
    /// The gateway's gRPC URL.
    pub gateway_url: String,
    /// The processor's bearer token for the gateway.
    pub gateway_token: String,
    /// How calls are spread over gateway replicas.
    pub gateway_balance: crate::gateway_pool::Balance,
    /// Deadline of one gateway call.
    pub step_timeout: Duration,
    /// The model of last resort (`[gateway] default_model`); empty when none.
    pub default_model: String,
    /// Redis URL as configured (every address, comma-separated, outside standalone mode).
    pub redis_url: String,
    /// Which Redis the store talks to: one node, a cluster, or the sentinels' primary.
    pub redis_target: crate::store::RedisTarget,
    /// Redis ACL credentials and TLS beyond the URL.
    pub redis_access: crate::store::RedisAccess,
    /// TLS of the listener; plaintext when `None`.
    pub server_tls: Option<service_kit::tls::ServerTls>,
    /// Largest request message the server decodes.
    pub max_request_bytes: usize,
    /// HTTP/2 keepalive of the listener's connections.
    pub keepalive: service_kit::grpc::Keepalive,
    /// TLS to an `https://` gateway.
    pub gateway_tls: Option<service_kit::tls::ClientTls>,
    /// Prefix of every Redis key.
    pub redis_prefix: String,
    /// Lease time-to-live.
    pub lease_ttl: Duration,
    /// Directory of the sessions' workspaces.
    pub workspace_root: PathBuf,
    /// Workspace snapshots.
    pub snapshots: SnapshotConfig,
    /// Agents by name.
    pub agents: BTreeMap<String, Agent>,
    /// Whether sessions get a generated title.
    pub titles: bool,
    /// Tenants by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// The event hub's tuning (`[events]`).
    pub events: crate::events::EventsConfig,
    /// The `bash` sandbox (`[tools.bash]`), shared by every agent's [`Agent::tool_limits`].
    pub sandbox: Arc<Sandbox>,
}

impl Config {
    /// Who presents a token; `None` for a token that is not accepted.
    pub fn caller(&self, token: &str) -> Option<&Caller> {
        tenants::caller(&self.tokens, token)
    }

    /// Whether `caller` may select the configured agent `agent`.
    pub fn agent_allowed(&self, caller: &Caller, agent: &str) -> bool {
        tenants::agent_allowed(&self.tenants, caller, agent)
    }
}

/// Environment lookup, injectable for tests.
pub trait Env {
    /// The variable's value when set and not empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl<const N: usize> Env for [(&str, &str); N] {
    fn var(&self, name: &str) -> Option<String> {
        self.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
            .filter(|v| !v.is_empty())
    }
}

impl Config {
    /// Loads the file (optional) and the environment.
    pub fn load(path: Option<&Path>, env: &dyn Env) -> Result<Config, ConfigError> {
        let (file, base) = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| err("config", format!("cannot read {}: {e}", p.display())))?;
                (
                    Self::parse(&text)?,
                    p.parent().map(Path::to_path_buf).unwrap_or_default(),
                )
            }
            None => (FileConfig::default(), PathBuf::new()),
        };
        Self::from_file(file, &base, env)
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| err("config", e.message().to_string()))
    }

    /// Validates a parsed file; `base` resolves relative skill paths.
    pub fn from_file(file: FileConfig, base: &Path, env: &dyn Env) -> Result<Config, ConfigError> {
        let listen_text = env
            .var("PROCESSOR_LISTEN")
            .unwrap_or(file.server.listen.clone());
        let listen = listen_text
            .parse()
            .map_err(|e| err("server.listen", format!("`{listen_text}`: {e}")))?;
        let metrics_listen = match env
            .var("PROCESSOR_METRICS_LISTEN")
            .or(file.server.metrics_listen.clone())
        {
            None => None,
            Some(text) => Some(
                text.parse()
                    .map_err(|e| err("server.metrics_listen", format!("`{text}`: {e}")))?,
            ),
        };
        // The file's tokens, then the variable's (comma-separated).
        let list = |from_file: &[String], from_env: Option<String>| -> Vec<String> {
            let mut tokens = from_file.to_vec();
            if let Some(list) = from_env {
                tokens.extend(
                    list.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(String::from),
                );
            }
            tokens
        };
        let unnamed_tokens = list(&file.server.auth_tokens, env.var("PROCESSOR_AUTH_TOKENS"));
        let operator_tokens = list(
            &file.server.operator_tokens,
            env.var("PROCESSOR_OPERATOR_TOKENS"),
        );
        let gateway_url = env.var("GATEWAY_URL").unwrap_or(file.gateway.url.clone());
        let balance = env
            .var("GATEWAY_BALANCE")
            .unwrap_or(file.gateway.balance.clone());
        let gateway_balance = match balance.as_str() {
            "connection" => {
                if !gateway_url.starts_with("http://") && !gateway_url.starts_with("https://") {
                    return Err(err("gateway.url", "must be an http(s) URL"));
                }
                if gateway_url.contains(',') {
                    return Err(err(
                        "gateway.url",
                        "a list of URLs needs gateway.balance = \"dns\"",
                    ));
                }
                crate::gateway_pool::Balance::Connection
            }
            "dns" => {
                crate::gateway_pool::parse_targets(&gateway_url)
                    .map_err(|e| err("gateway.url", e))?;
                if file.gateway.resolve_interval_ms < 100 {
                    return Err(err("gateway.resolve_interval_ms", "must be at least 100"));
                }
                crate::gateway_pool::Balance::Dns {
                    interval: Duration::from_millis(file.gateway.resolve_interval_ms),
                }
            }
            other => {
                return Err(err(
                    "gateway.balance",
                    format!("`{other}`: expected `connection` or `dns`"),
                ));
            }
        };
        let gateway_token = env.var(&file.gateway.token_env).unwrap_or_default();
        if !file.gateway.default_model.is_empty() && !file.gateway.default_model.contains('/') {
            return Err(err("gateway.default_model", "must be `provider/model`"));
        }
        let redis_url = env.var("REDIS_URL").unwrap_or(file.redis.url.clone());
        let (redis_target, redis_access) = redis::redis_target(&file.redis, env)?;
        let server_tls = transport::server_tls(&file.server, env)?;
        let (max_request_bytes, keepalive) = transport::server_limits(&file.server)?;
        let gateway_tls = transport::gateway_tls(&file.gateway, &gateway_url)?;
        if file.redis.lease_ttl_ms < 500 {
            return Err(err("redis.lease_ttl_ms", "must be at least 500"));
        }
        let workspace_root = PathBuf::from(
            env.var("PROCESSOR_WORKSPACE_ROOT")
                .unwrap_or(file.workspaces.root.clone()),
        );
        let snapshot_root = env
            .var("PROCESSOR_SNAPSHOT_ROOT")
            .or(file.snapshots.root.clone())
            .map_or_else(|| workspace_root.join(DEFAULT_SNAPSHOT_DIR), PathBuf::from);
        if !snapshot_root_ok(&snapshot_root, &workspace_root) {
            return Err(err(
                "snapshots.root",
                "must not be the workspace root, inside a workspace, or contain the workspace root",
            ));
        }
        if file.snapshots.timeout_ms == 0 {
            return Err(err("snapshots.timeout_ms", "must be positive"));
        }
        let snapshots = SnapshotConfig {
            enabled: file.snapshots.enabled,
            root: snapshot_root,
            max_file_bytes: file.snapshots.max_file_bytes,
            timeout: Duration::from_millis(file.snapshots.timeout_ms),
        };

        let mut agents = BTreeMap::new();
        let mut files = file.agents;
        files.entry("default".into()).or_insert_with(|| AgentFile {
            role_prompt: "You are a helpful assistant.".into(),
            model: String::new(),
            tools: default_tools(),
            permissions: Vec::new(),
            max_steps: default_max_steps(),
            doom_loop: default_doom(),
            skills: BTreeMap::new(),
            client_tool_timeout_ms: default_client_tool_timeout(),
            permission_timeout_ms: default_permission_timeout(),
            step_retries: default_step_retries(),
            retry_base_delay_ms: default_retry_base_delay(),
            retry_max_delay_ms: default_retry_max_delay(),
            max_retry_after_ms: default_max_retry_after(),
            small_model: String::new(),
            auto_compact: true,
            compaction_reserve_tokens: None,
            reasoning: None,
            prune_protect_tokens: default_prune_protect(),
            prune_minimum_tokens: default_prune_minimum(),
            bash: None,
        });
        let sandbox = Arc::new(Sandbox::new(bash::settings(&file.tools.bash)?));
        for (name, a) in files {
            let key = |k: &str| format!("agents.{name}.{k}");
            let builtin: Vec<String> = crate::tools::builtin_specs()
                .into_iter()
                .map(|s| s.name)
                .collect();
            for t in &a.tools {
                if !builtin.contains(t) {
                    return Err(err(key("tools"), format!("unknown built-in tool `{t}`")));
                }
            }
            let permissions = PermissionRules::from_config(&a.permissions)
                .map_err(|m| err(key("permissions"), m))?;
            let doom_loop = match a.doom_loop.as_str() {
                "ask" => DoomPolicy::Ask,
                "allow" => DoomPolicy::Allow,
                "deny" => DoomPolicy::Deny,
                other => {
                    return Err(err(
                        key("doom_loop"),
                        format!("`{other}` is not ask, allow or deny"),
                    ));
                }
            };
            if a.max_steps == 0 {
                return Err(err(key("max_steps"), "must be positive"));
            }
            if !a.small_model.is_empty() && !a.small_model.contains('/') {
                return Err(err(key("small_model"), "must be `provider/model`"));
            }
            if a.retry_base_delay_ms == 0 || a.retry_max_delay_ms < a.retry_base_delay_ms {
                return Err(err(
                    key("retry_base_delay_ms"),
                    "must be positive and at most retry_max_delay_ms",
                ));
            }
            let reasoning = a
                .reasoning
                .as_ref()
                .map(|r| r.validate())
                .transpose()
                .map_err(|(k, m)| err(key(&format!("reasoning.{k}")), m))?;
            let mut skills = Vec::new();
            for (skill, path) in &a.skills {
                let full = base.join(path);
                let text = std::fs::read_to_string(&full).map_err(|e| {
                    err(
                        key(&format!("skills.{skill}")),
                        format!("cannot read {}: {e}", full.display()),
                    )
                })?;
                skills.push((skill.clone(), text));
            }
            let tool_limits = crate::tools::Limits {
                bash: bash::limits(&file.tools.bash.limits, a.bash.as_ref(), &name)?,
                sandbox: sandbox.clone(),
                ..crate::tools::Limits::default()
            };
            agents.insert(
                name.clone(),
                Agent {
                    name,
                    role_prompt: a.role_prompt,
                    model: a.model,
                    tools: a.tools,
                    permissions,
                    max_steps: a.max_steps,
                    doom_loop,
                    skills,
                    client_tool_timeout: Duration::from_millis(a.client_tool_timeout_ms),
                    permission_timeout: Duration::from_millis(a.permission_timeout_ms),
                    step_retries: a.step_retries,
                    retry: RetryPolicy {
                        max_retries: a.step_retries,
                        base_delay: Duration::from_millis(a.retry_base_delay_ms),
                        max_delay: Duration::from_millis(a.retry_max_delay_ms),
                        max_retry_after: Duration::from_millis(a.max_retry_after_ms),
                    },
                    small_model: a.small_model,
                    auto_compact: a.auto_compact,
                    compaction_reserve: a.compaction_reserve_tokens,
                    reasoning,
                    prune_protect: a.prune_protect_tokens,
                    prune_minimum: a.prune_minimum_tokens,
                    tool_limits,
                },
            );
        }
        let access = tenants::Access::from_config(
            &unnamed_tokens,
            &operator_tokens,
            &file.tenants,
            &agents.keys().cloned().collect(),
            file.server.allow_unauthenticated,
        )?;
        if file.events.flush_interval_ms == 0 || file.events.flush_interval_ms > 10_000 {
            return Err(err(
                "events.flush_interval_ms",
                "must be between 1 and 10000",
            ));
        }
        if file.events.unwatched_flush_interval_ms == 0
            || file.events.unwatched_flush_interval_ms > 10_000
        {
            return Err(err(
                "events.unwatched_flush_interval_ms",
                "must be between 1 and 10000",
            ));
        }
        let events = crate::events::EventsConfig {
            flush_interval: Duration::from_millis(file.events.flush_interval_ms),
            unwatched_flush_interval: Duration::from_millis(
                file.events
                    .unwatched_flush_interval_ms
                    .max(file.events.flush_interval_ms),
            ),
            ..Default::default()
        };
        Ok(Config {
            listen,
            metrics_listen,
            tokens: access.tokens,
            allow_unauthenticated: file.server.allow_unauthenticated,
            shutdown_grace: Duration::from_millis(file.server.shutdown_grace_ms),
            gateway_url,
            gateway_token,
            gateway_balance,
            step_timeout: Duration::from_millis(file.gateway.step_timeout_ms),
            default_model: file.gateway.default_model,
            redis_url,
            redis_target,
            redis_access,
            server_tls,
            max_request_bytes,
            keepalive,
            gateway_tls,
            redis_prefix: file.redis.prefix,
            lease_ttl: Duration::from_millis(file.redis.lease_ttl_ms),
            workspace_root,
            snapshots,
            agents,
            titles: file.titles.enabled,
            tenants: access.tenants,
            events,
            sandbox,
        })
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
