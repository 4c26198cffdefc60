//! The `[server]` keys both services read alike, parsed once: a listener's address (its environment variable
//! first), the caller-token lists the environment adds to, and the HTTP/2 settings of a gRPC listener. Each mistake
//! names its key (`server.listen`), which the service turns into its own configuration error.

use std::net::SocketAddr;

use crate::env::Env;
use crate::grpc::{Keepalive, ReceiveWindow};

/// `server.keepalive_interval_ms` by default: [`Keepalive::DEFAULT`]'s interval.
pub const DEFAULT_KEEPALIVE_INTERVAL_MS: u64 = 30_000;
/// `server.keepalive_timeout_ms` by default: [`Keepalive::DEFAULT`]'s timeout.
pub const DEFAULT_KEEPALIVE_TIMEOUT_MS: u64 = 20_000;

/// A mistake in a `[server]` key: the key (`server.metrics_listen`) and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    /// The key, with its table: `server.listen`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl KeyError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> KeyError {
        KeyError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// The address of `key`: the environment variable `var` when set, else the file's value; `None` when neither is
/// set (a listener that is off).
pub fn address(
    env: &dyn Env,
    var: &str,
    key: &str,
    from_file: Option<&str>,
) -> Result<Option<SocketAddr>, KeyError> {
    match (env.var(var), from_file) {
        (None, None) => Ok(None),
        (Some(text), _) => required_address(env, var, key, &text).map(Some),
        (None, Some(text)) => required_address(env, var, key, text).map(Some),
    }
}

/// The address of `key`, which the file always gives (its default when unset): the environment variable `var`
/// when set, else `from_file`.
pub fn required_address(
    env: &dyn Env,
    var: &str,
    key: &str,
    from_file: &str,
) -> Result<SocketAddr, KeyError> {
    let text = env.var(var).unwrap_or_else(|| from_file.to_string());
    text.parse()
        .map_err(|e| KeyError::new(key, format!("`{text}` is not an address: {e}")))
}

/// The file's tokens, then those of the environment variable `var` (comma-separated, blanks dropped).
pub fn tokens(env: &dyn Env, var: &str, from_file: &[String]) -> Vec<String> {
    let mut tokens = from_file.to_vec();
    if let Some(list) = env.var(var) {
        tokens.extend(
            list.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(String::from),
        );
    }
    tokens
}

/// The HTTP/2 settings of a gRPC listener, from `server.keepalive_interval_ms`, `server.keepalive_timeout_ms` and
/// `server.stream_window_bytes`.
pub fn http2(
    keepalive_interval_ms: u64,
    keepalive_timeout_ms: u64,
    stream_window_bytes: u32,
) -> Result<(Keepalive, ReceiveWindow), KeyError> {
    let keepalive = Keepalive::from_millis(keepalive_interval_ms, keepalive_timeout_ms)
        .map_err(|(key, why)| KeyError::new(format!("server.{key}"), why))?;
    let window = ReceiveWindow::from_bytes(stream_window_bytes)
        .map_err(|why| KeyError::new("server.stream_window_bytes", why))?;
    Ok((keepalive, window))
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
