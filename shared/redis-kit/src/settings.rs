//! `[redis]`'s connection keys, as both services spell them: which Redis, how to find it, and the credentials and
//! TLS that go with it.
//!
//! - `mode = "standalone"` (the default): `url` is the one node.
//! - `mode = "cluster"`: `url` is a comma-separated list of cluster nodes (seeds; one reachable node is enough, the
//!   client learns the rest of the cluster from it).
//! - `mode = "sentinel"`: `url` is a comma-separated list of the sentinels (their own credentials, if any, in
//!   these URLs) and `sentinel_master` the name they monitor the primary under; `username` / `password_env`
//!   authenticate to the data nodes.
//!
//! `<PREFIX>REDIS_MODE`, `<PREFIX>REDIS_URL` and `<PREFIX>REDIS_SENTINEL_MASTER` override the file, the prefix
//! being each service's own (empty for the processor, `GATEWAY_` for the gateway).

use service_kit::env::Env;
use service_kit::tls::{ClientTls, ClientTlsFiles};

use crate::access::{RedisAccess, url_has_credentials};
use crate::target::RedisTarget;

/// Most addresses in `redis.url`; seeds and sentinels are a handful, so more is a mistake.
const MAX_ADDRESSES: usize = 64;

/// The connection keys of a service's `[redis]` table, borrowed from its own file type.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionKeys<'a> {
    /// `standalone`, `cluster` or `sentinel`.
    pub mode: &'a str,
    /// One URL, or a comma-separated list (cluster seeds, sentinels).
    pub url: &'a str,
    /// The name the sentinels monitor the primary under; sentinel mode only.
    pub sentinel_master: Option<&'a str>,
    /// ACL user of the data nodes.
    pub username: Option<&'a str>,
    /// The environment variable holding that user's password.
    pub password_env: &'a str,
    /// `[redis.tls]`.
    pub tls: Option<&'a ClientTlsFiles>,
}

/// A mistake in the keys, naming the key (`redis.url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// Dotted path of the key.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for SettingError {}

fn err(key: impl Into<String>, message: impl Into<String>) -> SettingError {
    SettingError {
        key: key.into(),
        message: message.into(),
    }
}

/// The target and the credentials and TLS that go with it; `env_prefix` names the service's override variables.
pub fn resolve(
    keys: &ConnectionKeys<'_>,
    env_prefix: &str,
    env: &dyn Env,
) -> Result<(RedisTarget, RedisAccess), SettingError> {
    let var = |name: &str| env.var(&format!("{env_prefix}{name}"));
    let mode = var("REDIS_MODE").unwrap_or_else(|| keys.mode.to_owned());
    let url = var("REDIS_URL").unwrap_or_else(|| keys.url.to_owned());
    let master = var("REDIS_SENTINEL_MASTER").or(keys.sentinel_master.map(str::to_owned));
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
    let target = target(&mode, urls, master.clone())?;
    if master.is_some() && !matches!(target, RedisTarget::Sentinel { .. }) {
        return Err(err(
            "redis.sentinel_master",
            "set, but redis.mode is not \"sentinel\"",
        ));
    }
    let sentinel = matches!(target, RedisTarget::Sentinel { .. });
    let access = access(keys, target.urls(), sentinel, env)?;
    Ok((target, access))
}

fn target(
    mode: &str,
    urls: Vec<String>,
    master: Option<String>,
) -> Result<RedisTarget, SettingError> {
    match mode {
        "standalone" if urls.len() > 1 => Err(err(
            "redis.url",
            "names several addresses, but redis.mode is \"standalone\" (use \"cluster\" or \"sentinel\")",
        )),
        "standalone" => Ok(RedisTarget::Standalone {
            url: urls[0].clone(),
        }),
        "cluster" => Ok(RedisTarget::Cluster { seeds: urls }),
        "sentinel" => match master {
            Some(m) if valid_master(&m) => Ok(RedisTarget::Sentinel {
                sentinels: urls,
                master: m,
            }),
            Some(_) => Err(err(
                "redis.sentinel_master",
                "must be 1..=128 characters of [A-Za-z0-9._-]",
            )),
            None => Err(err(
                "redis.sentinel_master",
                "required when redis.mode is \"sentinel\" (the name the sentinels monitor the primary under)",
            )),
        },
        other => Err(err(
            "redis.mode",
            format!("must be \"standalone\", \"cluster\" or \"sentinel\", not {other:?}"),
        )),
    }
}

fn valid_master(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Credentials and TLS. `rediss://` needs TLS (the system's roots when `[redis.tls]` is absent); the user and
/// password of the data nodes come from the URLs or from `username` and the `password_env` variable, not both. In
/// sentinel mode the URLs name the sentinels, so their credentials are the sentinels' and never conflict.
fn access(
    keys: &ConnectionKeys<'_>,
    urls: &[String],
    sentinel: bool,
    env: &dyn Env,
) -> Result<RedisAccess, SettingError> {
    let tls = urls.first().is_some_and(|u| u.starts_with("rediss://"));
    let mut in_url = false;
    for (i, url) in urls.iter().enumerate() {
        if !url.starts_with("redis://") && !url.starts_with("rediss://") {
            return Err(err(
                "redis.url",
                format!("entry {} must be a redis:// or rediss:// URL", i + 1),
            ));
        }
        if url.starts_with("rediss://") != tls {
            return Err(err(
                "redis.url",
                "mixes redis:// and rediss:// URLs; use one scheme for every node",
            ));
        }
        // The parse error never repeats the URL, which may hold a password.
        in_url |= url_has_credentials(url).map_err(|e| {
            err(
                "redis.url",
                format!("entry {} is not a valid Redis URL: {e}", i + 1),
            )
        })? && !sentinel;
    }
    let password = env.var(keys.password_env);
    if in_url && (keys.username.is_some() || password.is_some()) {
        return Err(err(
            "redis.username",
            format!(
                "the URL already carries credentials; use either the URL or username / {}",
                keys.password_env
            ),
        ));
    }
    if keys.username.is_some() && password.is_none() {
        return Err(err(
            "redis.password_env",
            format!("redis.username is set but {} is not", keys.password_env),
        ));
    }
    let tls = match (keys.tls, tls) {
        (Some(_), false) => {
            return Err(err("redis.tls", "set, but redis.url is not rediss://"));
        }
        (Some(files), true) if files.server_name.is_some() => {
            return Err(err(
                "redis.tls.server_name",
                "not supported: Redis's certificate is checked against the URL's host",
            ));
        }
        (files, true) => Some(
            ClientTls::load(files.unwrap_or(&ClientTlsFiles::default()))
                .map_err(|e| err(format!("redis.tls.{}", e.key), e.message))?,
        ),
        (None, false) => None,
    };
    Ok(RedisAccess {
        username: keys.username.map(str::to_owned),
        password,
        tls,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "settings_tests.rs"]
mod tests;
