//! `[redis]`'s deployment mode: which Redis the store talks to and how it finds it.
//!
//! - `mode = "standalone"` (the default): `url` is the one node.
//! - `mode = "cluster"`: `url` is a comma-separated list of cluster nodes (seeds; one reachable node is enough, the
//!   client learns the rest of the cluster from it).
//! - `mode = "sentinel"`: `url` is a comma-separated list of the sentinels (their own credentials, if any, in
//!   these URLs) and `sentinel_master` the name they monitor the primary under; `username` / `password_env`
//!   authenticate to the data nodes.
//!
//! `REDIS_MODE`, `REDIS_URL` and `REDIS_SENTINEL_MASTER` override the file.

use super::{ConfigError, Env, RedisFile, err, transport};
use crate::store::{RedisAccess, RedisTarget, ReplicaWait};

/// Most addresses in `redis.url`; seeds and sentinels are a handful, so more is a mistake.
const MAX_ADDRESSES: usize = 64;
/// Most replicas `redis.wait_replicas` may ask for.
const MAX_WAIT_REPLICAS: u32 = 16;
/// Longest `redis.wait_timeout_ms`: a waiting write holds the shared connection to its node (see `store::replicas`).
const MAX_WAIT_TIMEOUT_MS: u64 = 1_000;

/// `wait_replicas` and `wait_timeout_ms`: `None` when `wait_replicas` is 0.
pub(super) fn replica_wait(file: &RedisFile) -> Result<Option<ReplicaWait>, ConfigError> {
    if file.wait_replicas == 0 {
        return Ok(None);
    }
    if file.wait_replicas > MAX_WAIT_REPLICAS {
        return Err(err(
            "redis.wait_replicas",
            format!("must be at most {MAX_WAIT_REPLICAS} (0: do not wait)"),
        ));
    }
    // WAIT's 0 means "forever", which would hold the connection as long as a replica is missing.
    if !(1..=MAX_WAIT_TIMEOUT_MS).contains(&file.wait_timeout_ms) {
        return Err(err(
            "redis.wait_timeout_ms",
            format!("must be 1..={MAX_WAIT_TIMEOUT_MS} when redis.wait_replicas is set"),
        ));
    }
    Ok(Some(ReplicaWait {
        replicas: file.wait_replicas,
        timeout: std::time::Duration::from_millis(file.wait_timeout_ms),
    }))
}

/// The target and the credentials and TLS that go with it.
pub(super) fn redis_target(
    file: &RedisFile,
    env: &dyn Env,
) -> Result<(RedisTarget, RedisAccess), ConfigError> {
    let mode = env.var("REDIS_MODE").unwrap_or(file.mode.clone());
    let url = env.var("REDIS_URL").unwrap_or(file.url.clone());
    let master = env
        .var("REDIS_SENTINEL_MASTER")
        .or(file.sentinel_master.clone());
    let urls: Vec<String> = url
        .split(',')
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(err("redis.url", "must name at least one Redis URL"));
    }
    if urls.len() > MAX_ADDRESSES {
        return Err(err(
            "redis.url",
            format!("names {} addresses; at most {MAX_ADDRESSES}", urls.len()),
        ));
    }
    let target = match mode.as_str() {
        "standalone" if urls.len() > 1 => {
            return Err(err(
                "redis.url",
                "names several addresses, but redis.mode is \"standalone\" (use \"cluster\" or \"sentinel\")",
            ));
        }
        "standalone" => RedisTarget::Standalone {
            url: urls[0].clone(),
        },
        "cluster" => RedisTarget::Cluster { seeds: urls },
        "sentinel" => match master.clone() {
            Some(m) if valid_master(&m) => RedisTarget::Sentinel {
                sentinels: urls,
                master: m,
            },
            Some(_) => {
                return Err(err(
                    "redis.sentinel_master",
                    "must be 1..=128 characters of [A-Za-z0-9._-]",
                ));
            }
            None => {
                return Err(err(
                    "redis.sentinel_master",
                    "required when redis.mode is \"sentinel\" (the name the sentinels monitor the primary under)",
                ));
            }
        },
        other => {
            return Err(err(
                "redis.mode",
                format!("must be \"standalone\", \"cluster\" or \"sentinel\", not {other:?}"),
            ));
        }
    };
    if master.is_some() && !matches!(target, RedisTarget::Sentinel { .. }) {
        return Err(err(
            "redis.sentinel_master",
            "set, but redis.mode is not \"sentinel\"",
        ));
    }
    let sentinel = matches!(target, RedisTarget::Sentinel { .. });
    let access = transport::redis_access(file, target.urls(), sentinel, env)?;
    Ok((target, access))
}

fn valid_master(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
#[path = "redis_tests.rs"]
mod tests;
