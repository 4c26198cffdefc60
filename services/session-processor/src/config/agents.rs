//! `[agents.<name>]`: the file's agent tables, their defaults, and the validated [`Agent`] each becomes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use serde::Deserialize;

use super::bash::{self, BashFile, BashLimitsFile};
use super::{ConfigError, err};
use crate::tools::{DoomPolicy, PermissionRules, RuleConfig, Sandbox};

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

impl AgentFile {
    /// The `default` agent when the file defines none.
    fn default_agent() -> AgentFile {
        AgentFile {
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
        }
    }
}

/// The agents by name, each shared (see `Config::agents`).
pub type Agents = BTreeMap<String, Arc<Agent>>;

/// Validates every agent of the file (adding `default` when the file has none) and builds the `bash` sandbox they
/// share; `base` resolves relative skill paths.
pub(super) fn agents(
    mut files: BTreeMap<String, AgentFile>,
    base: &Path,
    bash_file: &BashFile,
) -> Result<(Agents, Arc<Sandbox>), ConfigError> {
    files
        .entry("default".into())
        .or_insert_with(AgentFile::default_agent);
    let sandbox = Arc::new(Sandbox::new(bash::settings(bash_file)?));
    let mut agents = BTreeMap::new();
    for (name, a) in files {
        let agent = agent(name.clone(), a, base, bash_file, &sandbox)?;
        agents.insert(name, Arc::new(agent));
    }
    Ok((agents, sandbox))
}

/// One validated agent.
fn agent(
    name: String,
    a: AgentFile,
    base: &Path,
    bash_file: &BashFile,
    sandbox: &Arc<Sandbox>,
) -> Result<Agent, ConfigError> {
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
    let permissions =
        PermissionRules::from_config(&a.permissions).map_err(|m| err(key("permissions"), m))?;
    let doom_loop = doom_policy(&a.doom_loop).map_err(|m| err(key("doom_loop"), m))?;
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
    let skills = skills(&a.skills, base, &key)?;
    let tool_limits = crate::tools::Limits {
        bash: bash::limits(&bash_file.limits, a.bash.as_ref(), &name)?,
        sandbox: sandbox.clone(),
        ..crate::tools::Limits::default()
    };
    Ok(Agent {
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
    })
}

/// `doom_loop = "ask" | "allow" | "deny"`.
fn doom_policy(text: &str) -> Result<DoomPolicy, String> {
    match text {
        "ask" => Ok(DoomPolicy::Ask),
        "allow" => Ok(DoomPolicy::Allow),
        "deny" => Ok(DoomPolicy::Deny),
        other => Err(format!("`{other}` is not ask, allow or deny")),
    }
}

/// `(name, text)` of each skill file, read relative to `base`.
fn skills(
    files: &BTreeMap<String, String>,
    base: &Path,
    key: &dyn Fn(&str) -> String,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut skills = Vec::new();
    for (skill, path) in files {
        let full = base.join(path);
        let text = std::fs::read_to_string(&full).map_err(|e| {
            err(
                key(&format!("skills.{skill}")),
                format!("cannot read {}: {e}", full.display()),
            )
        })?;
        skills.push((skill.clone(), text));
    }
    Ok(skills)
}
