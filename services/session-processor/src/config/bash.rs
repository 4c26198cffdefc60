//! `[tools.bash]` (the sandbox and the default limits of one command) and `[agents.<name>.bash]` (an agent's own
//! limits), validated into [`SandboxSettings`] and [`BashLimits`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{Config, ConfigError, err};
use crate::tools::sandbox::{BashLimits, Confinement, DEFAULT_SANDBOX_ID, SandboxSettings};

/// `[tools.bash]`: process-wide sandbox settings, plus every key of [`BashLimitsFile`] as the default of all agents.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct BashFile {
    /// `namespaces` (default) or `weak`.
    pub confinement: Option<String>,
    /// The bubblewrap program (default `bwrap`, looked up in `path`).
    pub bwrap: Option<String>,
    /// Uid of commands when the processor runs as root (default 64000).
    pub uid: Option<u32>,
    /// Gid of commands when the processor runs as root (default 64000).
    pub gid: Option<u32>,
    /// Further absolute host paths mounted read-only in the sandbox.
    pub ro_paths: Vec<String>,
    /// `PATH` of commands (default `/usr/local/bin:/usr/bin:/bin`).
    pub path: Option<String>,
    /// The default limits.
    #[serde(flatten)]
    pub limits: BashLimitsFile,
    /// Anything else: an error naming the key.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, toml::Value>,
}

/// The limits of one command; every key optional (`[agents.<name>.bash]` over `[tools.bash]` over the defaults).
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct BashLimitsFile {
    /// Wall time before the command is killed (default 60000).
    pub timeout_ms: Option<u64>,
    /// CPU seconds per process (default 60).
    pub cpu_seconds: Option<u64>,
    /// Private writable memory per process, bytes (default 2 GiB).
    pub memory_bytes: Option<u64>,
    /// Processes at once (default 256).
    pub max_processes: Option<u64>,
    /// Largest file written, bytes (default 1 GiB).
    pub max_file_bytes: Option<u64>,
    /// Size of the private /tmp, bytes (default 64 MiB).
    pub tmp_bytes: Option<u64>,
    /// Output read before the command is killed, bytes (default 8 MiB).
    pub output_limit_bytes: Option<u64>,
    /// Whether commands may use the network (default false).
    pub network: Option<bool>,
}

/// Validates `[tools.bash]`.
pub(super) fn settings(file: &BashFile) -> Result<SandboxSettings, ConfigError> {
    if let Some(key) = file.unknown.keys().next() {
        return Err(err(format!("tools.bash.{key}"), "unknown key"));
    }
    let defaults = SandboxSettings::default();
    let confinement = match file.confinement.as_deref() {
        None | Some("namespaces") => Confinement::Namespaces,
        Some("weak") => Confinement::Weak,
        Some(other) => {
            return Err(err(
                "tools.bash.confinement",
                format!("`{other}`: expected `namespaces` or `weak`"),
            ));
        }
    };
    let uid = file.uid.unwrap_or(DEFAULT_SANDBOX_ID);
    let gid = file.gid.unwrap_or(DEFAULT_SANDBOX_ID);
    for (key, id) in [("uid", uid), ("gid", gid)] {
        if id == 0 {
            return Err(err(format!("tools.bash.{key}"), "must not be 0 (root)"));
        }
    }
    let mut ro_paths = Vec::new();
    for path in &file.ro_paths {
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return Err(err(
                "tools.bash.ro_paths",
                format!("`{}` must be an absolute path", path.display()),
            ));
        }
        ro_paths.push(path);
    }
    let path = file.path.clone().unwrap_or(defaults.path);
    if path.is_empty() {
        return Err(err("tools.bash.path", "must not be empty"));
    }
    Ok(SandboxSettings {
        confinement,
        bwrap: file.bwrap.as_deref().map_or(defaults.bwrap, PathBuf::from),
        uid,
        gid,
        ro_paths,
        path,
    })
}

/// The limits of agent `agent`: its `[agents.<agent>.bash]` keys, then `[tools.bash]`'s, then the defaults. An
/// invalid value names the key it came from.
pub(super) fn limits(
    global: &BashLimitsFile,
    own: Option<&BashLimitsFile>,
    agent: &str,
) -> Result<BashLimits, ConfigError> {
    let defaults = BashLimits::default();
    let pick = |field: fn(&BashLimitsFile) -> Option<u64>, name: &str| match own.and_then(field) {
        Some(v) => (Some(v), format!("agents.{agent}.bash.{name}")),
        None => (field(global), format!("tools.bash.{name}")),
    };
    let number = |field: fn(&BashLimitsFile) -> Option<u64>,
                  name: &str,
                  default: u64,
                  range: std::ops::RangeInclusive<u64>|
     -> Result<u64, ConfigError> {
        match pick(field, name) {
            (None, _) => Ok(default),
            (Some(v), _) if range.contains(&v) => Ok(v),
            (Some(_), key) => Err(err(
                key,
                format!("must be between {} and {}", range.start(), range.end()),
            )),
        }
    };
    let timeout_ms = number(
        |f| f.timeout_ms,
        "timeout_ms",
        u64::try_from(defaults.timeout.as_millis()).unwrap_or(60_000),
        100..=86_400_000,
    )?;
    let output_limit = number(
        |f| f.output_limit_bytes,
        "output_limit_bytes",
        defaults.output_limit_bytes as u64,
        1024..=(1 << 30),
    )?;
    Ok(BashLimits {
        timeout: Duration::from_millis(timeout_ms),
        cpu_seconds: number(
            |f| f.cpu_seconds,
            "cpu_seconds",
            defaults.cpu_seconds,
            1..=86_400,
        )?,
        memory_bytes: number(
            |f| f.memory_bytes,
            "memory_bytes",
            defaults.memory_bytes,
            (16 << 20)..=u64::MAX,
        )?,
        max_processes: number(
            |f| f.max_processes,
            "max_processes",
            defaults.max_processes,
            4..=65_536,
        )?,
        max_file_bytes: number(
            |f| f.max_file_bytes,
            "max_file_bytes",
            defaults.max_file_bytes,
            1..=u64::MAX,
        )?,
        tmp_bytes: number(
            |f| f.tmp_bytes,
            "tmp_bytes",
            defaults.tmp_bytes,
            (1 << 20)..=u64::MAX,
        )?,
        output_limit_bytes: usize::try_from(output_limit).unwrap_or(usize::MAX),
        network: own
            .and_then(|f| f.network)
            .or(global.network)
            .unwrap_or(defaults.network),
    })
}

impl Config {
    /// Takes `bash` away from every agent (the sandbox is unavailable): it is no longer offered to models.
    pub fn disable_bash(&mut self) {
        for agent in self.agents.values_mut() {
            std::sync::Arc::make_mut(agent)
                .tools
                .retain(|t| t != "bash");
        }
    }

    /// Names of the agents that may use `bash`.
    pub fn bash_agents(&self) -> Vec<&str> {
        self.agents
            .values()
            .filter(|a| a.tools.iter().any(|t| t == "bash"))
            .map(|a| a.name.as_str())
            .collect()
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
