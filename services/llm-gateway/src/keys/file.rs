//! The keys of the configuration file and the `[redis]` table that enables keys at run time.
//!
//! `[keys.<name>]` names a key: its `tenant` (the unnamed tenant `""` when absent), its token as `token_sha256`
//! (the SHA-256 of the token, 64 hex digits: the file then holds no secret) or `token_env` (an environment variable
//! holding the token), its `role` (`caller`, `processor`, `admin`) and its `models` (every served model when
//! absent). The tokens of `server.auth_tokens` / `GATEWAY_AUTH_TOKENS` are keys too: of the unnamed tenant, role
//! `processor` (trusted as they always were: they may name a call's tenant), each named `token-` and the first 8
//! hex digits of its SHA-256, so spans and logs can tell them apart without showing them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::table::{Clash, KeyTable};
use super::{Digest32, Key, Role, Source, digest, from_hex, to_hex, valid_name};
use crate::settings::{ConfigError, Secret};
use service_kit::env::Env;

/// Shortest token accepted from the environment: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;
/// Most models one key may list.
pub const MAX_MODELS: usize = 256;
/// Longest model name a key may list.
const MAX_MODEL_NAME: usize = 256;

/// `[keys.<name>]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    /// The tenant; the unnamed tenant when absent.
    #[serde(default)]
    pub tenant: String,
    /// The token's SHA-256, 64 hex digits.
    pub token_sha256: Option<String>,
    /// An environment variable holding the token.
    pub token_env: Option<String>,
    /// `caller` (the default), `processor` or `admin`.
    #[serde(default = "default_role")]
    pub role: Role,
    /// Model ids and aliases the key may use; every served model when absent.
    pub models: Option<Vec<String>>,
}

fn default_role() -> Role {
    Role::Caller
}

/// `[redis]` of the gateway: where run-time keys live. Absent: keys come from the file only.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayRedisFile {
    /// `standalone`, `cluster` or `sentinel` (env `GATEWAY_REDIS_MODE`).
    pub mode: String,
    /// Redis URL, or a comma-separated list of cluster seeds or of sentinels (env `GATEWAY_REDIS_URL`).
    pub url: String,
    /// The primary's name at the sentinels, sentinel mode only (env `GATEWAY_REDIS_SENTINEL_MASTER`).
    pub sentinel_master: Option<String>,
    /// Start of every key the gateway writes, so it can share a Redis with the processor.
    pub prefix: String,
    /// ACL user of the data nodes (with `password_env`), unless the URL carries credentials.
    pub username: Option<String>,
    /// Variable holding the ACL password.
    pub password_env: String,
    /// `[redis.tls]`, for `rediss://` URLs.
    pub tls: Option<service_kit::tls::ClientTlsFiles>,
    /// Stop accepting run-time keys once this replica's copy has not been confirmed by Redis for this long; 0 (the
    /// default) keeps the last copy while Redis is unreachable.
    pub keys_max_staleness_ms: u64,
}

impl Default for GatewayRedisFile {
    fn default() -> Self {
        GatewayRedisFile {
            mode: "standalone".into(),
            url: "redis://127.0.0.1:6379".into(),
            sentinel_master: None,
            prefix: "llm-gateway:".into(),
            username: None,
            password_env: "GATEWAY_REDIS_PASSWORD".into(),
            tls: None,
            keys_max_staleness_ms: 0,
        }
    }
}

/// The validated `[redis]` table.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub target: redis_kit::RedisTarget,
    pub access: redis_kit::RedisAccess,
    /// Start of every key; no braces (hash tags are the gateway's own).
    pub prefix: String,
    /// `keys_max_staleness_ms`; `None` when 0.
    pub max_staleness: Option<std::time::Duration>,
}

/// `[redis]`, validated (the connection keys as the processor's: `redis_kit::settings`).
pub fn redis(
    file: Option<&GatewayRedisFile>,
    env: &dyn Env,
) -> Result<Option<RedisSettings>, ConfigError> {
    let Some(file) = file else {
        return Ok(None);
    };
    if file.prefix.contains(['{', '}']) {
        return Err(ConfigError::new("redis.prefix", "must not contain braces"));
    }
    let keys = redis_kit::ConnectionKeys {
        mode: &file.mode,
        url: &file.url,
        sentinel_master: file.sentinel_master.as_deref(),
        username: file.username.as_deref(),
        password_env: &file.password_env,
        tls: file.tls.as_ref(),
    };
    let (target, access) = redis_kit::settings::resolve(&keys, "GATEWAY_", env)
        .map_err(|e| ConfigError::new(e.key, e.message))?;
    Ok(Some(RedisSettings {
        target,
        access,
        prefix: file.prefix.clone(),
        max_staleness: (file.keys_max_staleness_ms > 0)
            .then(|| std::time::Duration::from_millis(file.keys_max_staleness_ms)),
    }))
}

/// `server.auth_tokens` (`listed`) plus `GATEWAY_AUTH_TOKENS` (comma-separated), each at least 16 characters; none
/// only when `none_needed` (`[keys]` has some, or `server.allow_unauthenticated` says so).
pub fn auth_tokens(
    listed: &[String],
    none_needed: bool,
    env: &dyn Env,
) -> Result<Vec<Secret>, ConfigError> {
    let auth_tokens: Vec<Secret> = service_kit::listen::tokens(env, "GATEWAY_AUTH_TOKENS", listed)
        .into_iter()
        .map(Secret::new)
        .collect();
    if auth_tokens.iter().any(|t| t.expose().len() < MIN_TOKEN_LEN) {
        return Err(ConfigError::new(
            "server.auth_tokens",
            "tokens must be at least 16 characters",
        ));
    }
    if auth_tokens.is_empty() && !none_needed {
        return Err(ConfigError::new(
            "server.auth_tokens",
            "no caller tokens configured: set GATEWAY_AUTH_TOKENS or [keys.<name>] (or server.allow_unauthenticated = true for local development)",
        ));
    }
    Ok(auth_tokens)
}

/// The configuration's keys: `[keys.<name>]` and the tokens of `server.auth_tokens` (given as `auth_tokens`).
pub fn table(
    files: &BTreeMap<String, KeyFile>,
    auth_tokens: &[Secret],
    env: &dyn Env,
) -> Result<KeyTable, ConfigError> {
    let mut entries: Vec<(Digest32, Key)> = Vec::with_capacity(files.len() + auth_tokens.len());
    for token in auth_tokens {
        let d = digest(token.expose());
        entries.push((
            d,
            config_key(
                format!("token-{}", &to_hex(&d)[..8]),
                "",
                Role::Processor,
                None,
            ),
        ));
    }
    for (name, file) in files {
        entries.push(key_from_file(name, file, env)?);
    }
    KeyTable::build(entries).map_err(|clash| match clash {
        Clash::Name(_, name) => ConfigError::new(
            format!("keys.{name}"),
            "two keys of one tenant share this name",
        ),
        Clash::Token(_, name) if name.starts_with("token-") => ConfigError::new(
            "server.auth_tokens",
            "a token is listed twice (or is also a key's)",
        ),
        Clash::Token(_, name) => {
            ConfigError::new(format!("keys.{name}"), "its token is another key's too")
        }
    })
}

fn config_key(name: String, tenant: &str, role: Role, models: Option<BTreeSet<String>>) -> Key {
    Key {
        name,
        tenant: tenant.to_owned(),
        role,
        models,
        source: Source::Config,
        created_ms: 0,
        rotated_ms: 0,
    }
}

fn key_from_file(
    name: &str,
    file: &KeyFile,
    env: &dyn Env,
) -> Result<(Digest32, Key), ConfigError> {
    let at = |k: &str| format!("keys.{name}.{k}");
    if !valid_name(name) {
        return Err(ConfigError::new(
            format!("keys.{name}"),
            "key names are 1 to 64 characters of [A-Za-z0-9._-], starting with a letter or digit",
        ));
    }
    if !file.tenant.is_empty() && !valid_name(&file.tenant) {
        return Err(ConfigError::new(
            at("tenant"),
            "1 to 64 characters of [A-Za-z0-9._-], starting with a letter or digit (absent: the unnamed tenant)",
        ));
    }
    let digest = match (&file.token_sha256, &file.token_env) {
        (Some(hex), None) => from_hex(hex).ok_or_else(|| {
            ConfigError::new(at("token_sha256"), "must be 64 hex digits (a SHA-256)")
        })?,
        (None, Some(var)) => {
            let token = env.var(var).ok_or_else(|| {
                ConfigError::new(
                    at("token_env"),
                    format!("environment variable {var} is not set"),
                )
            })?;
            if token.len() < MIN_TOKEN_LEN {
                return Err(ConfigError::new(
                    at("token_env"),
                    format!("the token in {var} must be at least {MIN_TOKEN_LEN} characters"),
                ));
            }
            digest(&token)
        }
        _ => {
            return Err(ConfigError::new(
                format!("keys.{name}"),
                "set exactly one of token_sha256 and token_env",
            ));
        }
    };
    let models = models(file.models.as_deref()).map_err(|m| ConfigError::new(at("models"), m))?;
    Ok((
        digest,
        config_key(name.to_owned(), &file.tenant, file.role, models),
    ))
}

/// A key's model list checked: absent is every model; present, 1 to [`MAX_MODELS`] non-empty names.
pub fn models(list: Option<&[String]>) -> Result<Option<BTreeSet<String>>, String> {
    let Some(list) = list else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err("must list at least one model (leave it out for every model)".into());
    }
    if list.len() > MAX_MODELS {
        return Err(format!("lists {} models; at most {MAX_MODELS}", list.len()));
    }
    if list
        .iter()
        .any(|m| m.trim().is_empty() || m.len() > MAX_MODEL_NAME)
    {
        return Err(format!("model names are 1 to {MAX_MODEL_NAME} characters"));
    }
    Ok(Some(list.iter().cloned().collect()))
}
