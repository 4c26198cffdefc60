//! `[redis]`: which Redis the store talks to and how it finds it (the connection keys are `redis_kit::settings`'s,
//! shared with the gateway; `REDIS_MODE`, `REDIS_URL` and `REDIS_SENTINEL_MASTER` override the file), and the
//! replica waits after acknowledged writes.

use super::{ConfigError, Env, RedisFile, err};
use crate::store::{RedisAccess, RedisTarget, ReplicaWait};

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

/// The target and the credentials and TLS that go with it (`redis_kit::settings`: the keys both services share).
pub(super) fn redis_target(
    file: &RedisFile,
    env: &dyn Env,
) -> Result<(RedisTarget, RedisAccess), ConfigError> {
    let keys = redis_kit::ConnectionKeys {
        mode: &file.mode,
        url: &file.url,
        sentinel_master: file.sentinel_master.as_deref(),
        username: file.username.as_deref(),
        password_env: &file.password_env,
        tls: file.tls.as_ref(),
    };
    redis_kit::settings::resolve(&keys, "", env).map_err(|e| err(e.key, e.message))
}

#[cfg(test)]
#[path = "redis_tests.rs"]
mod tests;
