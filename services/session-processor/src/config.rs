//! Configuration: a TOML file plus environment variables, validated at start-up; errors name the key.

mod agents;
mod bash;
mod redis;
mod transport;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

pub use agents::{Agent, AgentFile, Agents, ReasoningFile, RetryPolicy};
pub use bash::{BashFile, BashLimitsFile};

use crate::tools::Sandbox;

mod tenants;

use service_kit::listen;

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

/// `n`, refused when 0.
fn at_least_one<N: Copy + Default + PartialEq>(key: &str, n: N) -> Result<N, ConfigError> {
    if n == N::default() {
        return Err(err(key, "must be at least 1"));
    }
    Ok(n)
}

/// `server.store_unreachable_grace_ms`, at least 100.
fn store_grace(server: &ServerFile) -> Result<Duration, ConfigError> {
    match server.store_unreachable_grace_ms {
        ms if ms < 100 => Err(err(
            "server.store_unreachable_grace_ms",
            "must be at least 100",
        )),
        ms => Ok(Duration::from_millis(ms)),
    }
}

impl From<service_kit::listen::KeyError> for ConfigError {
    fn from(e: service_kit::listen::KeyError) -> Self {
        err(e.key, e.message)
    }
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
    /// Streams (`Prompt`, `Subscribe`, `Compact`) one tenant may have open on this replica at once; one more is
    /// `RESOURCE_EXHAUSTED`. At least 1.
    pub max_streams_per_tenant: usize,
    /// Sessions one tenant may hold (`[tenants.<name>] max_sessions` overrides it); one more `CreateSession` is
    /// `RESOURCE_EXHAUSTED`. At least 1.
    pub max_sessions_per_tenant: u64,
    /// Idle time after which the server pings a connection (HTTP/2 PING).
    pub keepalive_interval_ms: u64,
    /// How long a ping may go unanswered before the server closes the connection.
    pub keepalive_timeout_ms: u64,
    /// HTTP/2 receive window of one call: how many bytes of a request a caller may send ahead of the server's
    /// reading (`service_kit::grpc::ReceiveWindow`).
    pub stream_window_bytes: u32,
    /// How long Redis may stay unreachable before health says `NOT_SERVING` (for the whole server and for
    /// `SessionService`), so a load balancer or Kubernetes' probe takes the replica out; `SERVING` again at the
    /// first answer. At least 100.
    pub store_unreachable_grace_ms: u64,
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
            max_streams_per_tenant: 1_000,
            max_sessions_per_tenant: 100_000,
            keepalive_interval_ms: listen::DEFAULT_KEEPALIVE_INTERVAL_MS,
            keepalive_timeout_ms: listen::DEFAULT_KEEPALIVE_TIMEOUT_MS,
            stream_window_bytes: service_kit::grpc::ReceiveWindow::DEFAULT.stream_bytes(),
            store_unreachable_grace_ms: 2_000,
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
    /// With `balance = "connection"`: how many HTTP/2 connections to open to the URL (1 to 64; each call goes to the
    /// less loaded of two). Env `GATEWAY_CONNECTIONS`.
    pub connections: usize,
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
            connections: 1,
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
    /// Replicas that must acknowledge each write a caller is told about (`WAIT`); 0 (the default) never waits.
    pub wait_replicas: u32,
    /// How long Redis waits for them, per write.
    pub wait_timeout_ms: u64,
    /// Event-log reads (streams following a session whose loop runs elsewhere or not at all) that may block at once,
    /// each on a Redis connection of its own; the others poll every 250 ms. At least 1.
    pub max_blocking_reads: usize,
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
            wait_replicas: 0,
            wait_timeout_ms: 100,
            max_blocking_reads: crate::store::DEFAULT_LOG_WAITS,
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
    /// `WAIT` after the writes a caller is told about (`[redis] wait_replicas`); `None`: never.
    pub redis_wait: Option<crate::store::ReplicaWait>,
    /// TLS of the listener; plaintext when `None`.
    pub server_tls: Option<service_kit::tls::ServerTls>,
    /// Largest request message the server decodes.
    pub max_request_bytes: usize,
    /// Streams one tenant may have open on this replica at once.
    pub max_streams_per_tenant: usize,
    /// Sessions a tenant without a `max_sessions` of its own may hold.
    pub max_sessions_per_tenant: u64,
    /// Event-log reads that may block at once.
    pub max_blocking_reads: usize,
    /// How long Redis may stay unreachable before health says `NOT_SERVING`.
    pub store_unreachable_grace: Duration,
    /// HTTP/2 keepalive of the listener's connections.
    pub keepalive: service_kit::grpc::Keepalive,
    /// HTTP/2 receive windows of the listener's calls and connections.
    pub receive_window: service_kit::grpc::ReceiveWindow,
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
    /// Agents by name; shared, so a loop holds its agent without copying it (rules, skills, prompts).
    pub agents: Agents,
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

    /// The sessions `tenant` may hold.
    pub fn session_quota(&self, tenant: &str) -> u64 {
        self.tenants
            .get(tenant)
            .and_then(|t| t.max_sessions)
            .unwrap_or(self.max_sessions_per_tenant)
    }
}

pub use service_kit::env::{Env, ProcessEnv};

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
        let (listen, metrics_listen) = listeners(&file.server, env)?;
        let unnamed_tokens = listen::tokens(env, "PROCESSOR_AUTH_TOKENS", &file.server.auth_tokens);
        let operator_tokens = listen::tokens(
            env,
            "PROCESSOR_OPERATOR_TOKENS",
            &file.server.operator_tokens,
        );
        let gateway_url = env.var("GATEWAY_URL").unwrap_or(file.gateway.url.clone());
        let gateway_balance = gateway_balance(&file.gateway, &gateway_url, env)?;
        let gateway_token = env.var(&file.gateway.token_env).unwrap_or_default();
        if !file.gateway.default_model.is_empty() && !file.gateway.default_model.contains('/') {
            return Err(err("gateway.default_model", "must be `provider/model`"));
        }
        let redis_url = env.var("REDIS_URL").unwrap_or(file.redis.url.clone());
        let (redis_target, redis_access) = redis::redis_target(&file.redis, env)?;
        let server_tls = transport::server_tls(&file.server, env)?;
        let (max_request_bytes, keepalive, receive_window) =
            transport::server_limits(&file.server)?;
        let gateway_tls = transport::gateway_tls(&file.gateway, &gateway_url)?;
        let workspace_root = PathBuf::from(
            env.var("PROCESSOR_WORKSPACE_ROOT")
                .unwrap_or(file.workspaces.root.clone()),
        );
        let snapshots = snapshots(&file.snapshots, &workspace_root, env)?;

        let (agents, sandbox) = agents::agents(file.agents, base, &file.tools.bash)?;
        let access = tenants::Access::from_config(
            &unnamed_tokens,
            &operator_tokens,
            &file.tenants,
            &agents.keys().cloned().collect(),
            file.server.allow_unauthenticated,
        )?;
        let events = events(&file.events)?;
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
            redis_wait: redis::replica_wait(&file.redis)?,
            server_tls,
            max_request_bytes,
            max_streams_per_tenant: at_least_one(
                "server.max_streams_per_tenant",
                file.server.max_streams_per_tenant,
            )?,
            max_sessions_per_tenant: at_least_one(
                "server.max_sessions_per_tenant",
                file.server.max_sessions_per_tenant,
            )?,
            max_blocking_reads: at_least_one(
                "redis.max_blocking_reads",
                file.redis.max_blocking_reads,
            )?,
            store_unreachable_grace: store_grace(&file.server)?,
            keepalive,
            receive_window,
            gateway_tls,
            redis_prefix: file.redis.prefix,
            lease_ttl: lease_ttl(file.redis.lease_ttl_ms)?,
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

/// The session lease's time to live (`redis.lease_ttl_ms`): at least 500 ms.
fn lease_ttl(ms: u64) -> Result<Duration, ConfigError> {
    if ms < 500 {
        return Err(err("redis.lease_ttl_ms", "must be at least 500"));
    }
    Ok(Duration::from_millis(ms))
}

/// `[server] listen` and `metrics_listen`, the environment first.
fn listeners(
    server: &ServerFile,
    env: &dyn Env,
) -> Result<(SocketAddr, Option<SocketAddr>), ConfigError> {
    let listen =
        listen::required_address(env, "PROCESSOR_LISTEN", "server.listen", &server.listen)?;
    let metrics = listen::address(
        env,
        "PROCESSOR_METRICS_LISTEN",
        "server.metrics_listen",
        server.metrics_listen.as_deref(),
    )?;
    Ok((listen, metrics))
}

/// `[gateway] balance`: one connection, or every address DNS gives for the URL.
fn gateway_balance(
    gateway: &GatewayFile,
    gateway_url: &str,
    env: &dyn Env,
) -> Result<crate::gateway_pool::Balance, ConfigError> {
    let balance = env
        .var("GATEWAY_BALANCE")
        .unwrap_or(gateway.balance.clone());
    let connections = gateway_connections(gateway, env)?;
    let balance = match balance.as_str() {
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
            crate::gateway_pool::Balance::Connection { connections }
        }
        "dns" => {
            crate::gateway_pool::parse_targets(gateway_url).map_err(|e| err("gateway.url", e))?;
            if connections != 1 {
                return Err(err(
                    "gateway.connections",
                    "applies to gateway.balance = \"connection\" (dns keeps one connection per address)",
                ));
            }
            if gateway.resolve_interval_ms < 100 {
                return Err(err("gateway.resolve_interval_ms", "must be at least 100"));
            }
            crate::gateway_pool::Balance::Dns {
                interval: Duration::from_millis(gateway.resolve_interval_ms),
            }
        }
        other => {
            return Err(err(
                "gateway.balance",
                format!("`{other}`: expected `connection` or `dns`"),
            ));
        }
    };
    Ok(balance)
}

/// `[gateway] connections` (env `GATEWAY_CONNECTIONS`): 1 to [`crate::gateway_pool::MAX_CONNECTIONS`].
fn gateway_connections(gateway: &GatewayFile, env: &dyn Env) -> Result<usize, ConfigError> {
    let n = match env.var("GATEWAY_CONNECTIONS") {
        Some(text) => text.trim().parse::<usize>().map_err(|e| {
            err(
                "gateway.connections",
                format!("GATEWAY_CONNECTIONS `{text}`: {e}"),
            )
        })?,
        None => gateway.connections,
    };
    if n == 0 || n > crate::gateway_pool::MAX_CONNECTIONS {
        return Err(err(
            "gateway.connections",
            format!("{n}: must be 1 to {}", crate::gateway_pool::MAX_CONNECTIONS),
        ));
    }
    Ok(n)
}

/// `[snapshots]`, validated against the workspace root.
fn snapshots(
    file: &SnapshotsFile,
    workspace_root: &Path,
    env: &dyn Env,
) -> Result<SnapshotConfig, ConfigError> {
    let snapshot_root = env
        .var("PROCESSOR_SNAPSHOT_ROOT")
        .or(file.root.clone())
        .map_or_else(|| workspace_root.join(DEFAULT_SNAPSHOT_DIR), PathBuf::from);
    if !snapshot_root_ok(&snapshot_root, workspace_root) {
        return Err(err(
            "snapshots.root",
            "must not be the workspace root, inside a workspace, or contain the workspace root",
        ));
    }
    if file.timeout_ms == 0 {
        return Err(err("snapshots.timeout_ms", "must be positive"));
    }
    Ok(SnapshotConfig {
        enabled: file.enabled,
        root: snapshot_root,
        max_file_bytes: file.max_file_bytes,
        timeout: Duration::from_millis(file.timeout_ms),
    })
}

/// `[events]`: the event hub's flush windows.
fn events(file: &EventsFile) -> Result<crate::events::EventsConfig, ConfigError> {
    if file.flush_interval_ms == 0 || file.flush_interval_ms > 10_000 {
        return Err(err(
            "events.flush_interval_ms",
            "must be between 1 and 10000",
        ));
    }
    if file.unwatched_flush_interval_ms == 0 || file.unwatched_flush_interval_ms > 10_000 {
        return Err(err(
            "events.unwatched_flush_interval_ms",
            "must be between 1 and 10000",
        ));
    }
    Ok(crate::events::EventsConfig {
        flush_interval: Duration::from_millis(file.flush_interval_ms),
        unwatched_flush_interval: Duration::from_millis(
            file.unwatched_flush_interval_ms.max(file.flush_interval_ms),
        ),
        ..Default::default()
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
