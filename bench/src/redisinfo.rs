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
mod tests {
    use super::*;

    const BEFORE: &str = "# Commandstats\r\n\
        cmdstat_xadd:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_config|resetstat:calls=1,usec=165,usec_per_call=165.00,rejected_calls=0,failed_calls=0\r\n";
    const AFTER: &str = "# Commandstats\r\n\
        cmdstat_xadd:calls=74,usec=350,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=4,usec=90,usec_per_call=22.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_hset:calls=8,usec=40,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=5,usec=150,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_config|resetstat:calls=1,usec=165,usec_per_call=165.00,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn parses_and_diffs_command_counts_without_info() {
        let before = CommandStats::parse(BEFORE);
        assert_eq!(before.0.get("xadd"), Some(&10));
        assert_eq!(before.0.get("config|resetstat"), Some(&1));
        let d = CommandStats::parse(AFTER).since(&before);
        assert_eq!(
            d.ranked(),
            vec![("xadd", 64), ("hset", 8), ("evalsha", 4)],
            "info is the benchmark's own; unchanged commands are left out"
        );
        assert_eq!(d.total(), 76);
        assert_eq!(d.script_calls(), 4);
        let mut sum = d.clone();
        sum.add(&d);
        assert_eq!(sum.total(), 152);
    }

    #[test]
    fn reads_info_fields() {
        let text = "# Memory\r\nused_memory:1024\r\nused_memory_human:1.00K\r\n";
        assert_eq!(info_field(text, "used_memory"), Some("1024"));
        assert_eq!(info_field(text, "used_memory_rss"), None);
    }
}
