//! Redis command counts from `INFO commandstats`, for "Redis commands per 1 000 deltas".
//!
//! Redis counts every command it executes, including the commands a Lua script runs (`redis.call` inside an
//! `EVALSHA` counts once for the script and once per inner command), so the counts here are *commands executed*;
//! the script calls themselves (`evalsha`, `eval`, `fcall`) are the client's round trips for that work.

use std::collections::BTreeMap;

/// Calls per command name (lower case, subcommands as `config|resetstat`), as `INFO commandstats` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStats(pub BTreeMap<String, u64>);

/// Commands that run Lua (their inner commands are counted separately by Redis).
pub const SCRIPT_COMMANDS: [&str; 5] = ["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall"];

impl CommandStats {
    /// Parses the text of `INFO commandstats` (`cmdstat_<name>:calls=<n>,usec=…` lines; others are skipped).
    pub fn parse(info: &str) -> CommandStats {
        let mut calls = BTreeMap::new();
        for line in info.lines() {
            let Some(rest) = line.trim().strip_prefix("cmdstat_") else {
                continue;
            };
            let Some((name, fields)) = rest.split_once(':') else {
                continue;
            };
            let n = fields
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|v| v.parse::<u64>().ok());
            if let Some(n) = n {
                calls.insert(name.to_ascii_lowercase(), n);
            }
        }
        CommandStats(calls)
    }

    /// What ran between `before` and `self`, leaving out `INFO` (the benchmark's own reads) and commands whose
    /// count did not grow.
    pub fn since(&self, before: &CommandStats) -> CommandStats {
        let mut out = BTreeMap::new();
        for (name, &after) in &self.0 {
            if name == "info" {
                continue;
            }
            let d = after.saturating_sub(before.0.get(name).copied().unwrap_or(0));
            if d > 0 {
                out.insert(name.clone(), d);
            }
        }
        CommandStats(out)
    }

    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Sum of the script calls ([`SCRIPT_COMMANDS`]).
    pub fn script_calls(&self) -> u64 {
        SCRIPT_COMMANDS.iter().filter_map(|c| self.0.get(*c)).sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &CommandStats) {
        for (name, n) in &other.0 {
            *self.0.entry(name.clone()).or_insert(0) += n;
        }
    }

    /// `(command, calls)`, most calls first, ties by name.
    pub fn ranked(&self) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.0.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }
}

/// One `field:value` of an `INFO` section's text (e.g. `used_memory` in `INFO memory`).
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.trim()
            .strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

/// Reads `INFO commandstats` over `conn`.
pub async fn command_stats<C: redis::aio::ConnectionLike>(
    conn: &mut C,
) -> redis::RedisResult<CommandStats> {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(CommandStats::parse(&text))
}

/// Reads one section of `INFO` (`memory`, `stats`, …) over `conn`.
pub async fn info_section<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    section: &str,
) -> redis::RedisResult<String> {
    redis::cmd("INFO").arg(section).query_async(conn).await
}

#[cfg(test)]
#[path = "redisinfo_tests.rs"]
mod tests;
