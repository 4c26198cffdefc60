//! Configuration: a TOML file plus environment variables, validated at start-up; errors name the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::tools::{DoomPolicy, PermissionRules, RuleConfig};

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
    #[serde(default)]
    pub server: ServerFile,
    #[serde(default)]
    pub gateway: GatewayFile,
    #[serde(default)]
    pub redis: RedisFile,
    #[serde(default)]
    pub workspaces: WorkspacesFile,
    /// Agents by name; `default` is used when a session names none.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentFile>,
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerFile {
    /// Listen address (env `PROCESSOR_LISTEN`).
    pub listen: String,
    /// Caller tokens (env `PROCESSOR_AUTH_TOKENS`, comma-separated, adds to these).
    pub auth_tokens: Vec<String>,
    /// Serve without caller authentication (local development only).
    pub allow_unauthenticated: bool,
    /// Grace period for running loops after SIGTERM.
    pub shutdown_grace_ms: u64,
}

impl Default for ServerFile {
    fn default() -> Self {
        ServerFile {
            listen: "127.0.0.1:50052".into(),
            auth_tokens: Vec::new(),
            allow_unauthenticated: false,
            shutdown_grace_ms: 30_000,
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
}

impl Default for GatewayFile {
    fn default() -> Self {
        GatewayFile {
            url: "http://127.0.0.1:50051".into(),
            token_env: "GATEWAY_TOKEN".into(),
            step_timeout_ms: 600_000,
        }
    }
}

/// `[redis]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisFile {
    /// Redis URL (env `REDIS_URL`).
    pub url: String,
    /// Prefix of every key, so several deployments can share a Redis.
    pub prefix: String,
    /// Lease time-to-live; a replica that stops renewing loses its sessions after this long.
    pub lease_ttl_ms: u64,
}

impl Default for RedisFile {
    fn default() -> Self {
        RedisFile {
            url: "redis://127.0.0.1:6379".into(),
            prefix: "llm:".into(),
            lease_ttl_ms: 5_000,
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

/// A validated agent.
#[derive(Debug, Clone)]
pub struct Agent {
    pub name: String,
    pub role_prompt: String,
    pub model: String,
    pub tools: Vec<String>,
    pub permissions: PermissionRules,
    pub max_steps: u32,
    pub doom_loop: DoomPolicy,
    /// `(name, text)` of each skill, in name order.
    pub skills: Vec<(String, String)>,
    pub client_tool_timeout: Duration,
    pub permission_timeout: Duration,
    pub step_retries: u32,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub auth_tokens: Vec<String>,
    pub allow_unauthenticated: bool,
    pub shutdown_grace: Duration,
    pub gateway_url: String,
    pub gateway_token: String,
    pub step_timeout: Duration,
    pub redis_url: String,
    pub redis_prefix: String,
    pub lease_ttl: Duration,
    pub workspace_root: PathBuf,
    pub agents: BTreeMap<String, Agent>,
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
        let mut auth_tokens = file.server.auth_tokens.clone();
        if let Some(list) = env.var("PROCESSOR_AUTH_TOKENS") {
            auth_tokens.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(String::from),
            );
        }
        if auth_tokens.iter().any(|t| t.len() < 16) {
            return Err(err(
                "server.auth_tokens",
                "tokens must be at least 16 characters",
            ));
        }
        if auth_tokens.is_empty() && !file.server.allow_unauthenticated {
            return Err(err(
                "server.auth_tokens",
                "no caller tokens configured: set PROCESSOR_AUTH_TOKENS (or server.allow_unauthenticated = true)",
            ));
        }
        let gateway_url = env.var("GATEWAY_URL").unwrap_or(file.gateway.url.clone());
        if !gateway_url.starts_with("http://") && !gateway_url.starts_with("https://") {
            return Err(err("gateway.url", "must be an http(s) URL"));
        }
        let gateway_token = env.var(&file.gateway.token_env).unwrap_or_default();
        let redis_url = env.var("REDIS_URL").unwrap_or(file.redis.url.clone());
        if !redis_url.starts_with("redis://") && !redis_url.starts_with("rediss://") {
            return Err(err("redis.url", "must be a redis:// or rediss:// URL"));
        }
        if file.redis.lease_ttl_ms < 500 {
            return Err(err("redis.lease_ttl_ms", "must be at least 500"));
        }
        let workspace_root = PathBuf::from(
            env.var("PROCESSOR_WORKSPACE_ROOT")
                .unwrap_or(file.workspaces.root.clone()),
        );

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
        });
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
                },
            );
        }
        Ok(Config {
            listen,
            auth_tokens,
            allow_unauthenticated: file.server.allow_unauthenticated,
            shutdown_grace: Duration::from_millis(file.server.shutdown_grace_ms),
            gateway_url,
            gateway_token,
            step_timeout: Duration::from_millis(file.gateway.step_timeout_ms),
            redis_url,
            redis_prefix: file.redis.prefix,
            lease_ttl: Duration::from_millis(file.redis.lease_ttl_ms),
            workspace_root,
            agents,
        })
    }
}
