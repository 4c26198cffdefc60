//! The transport keys: `[server.tls]` (and `PROCESSOR_TLS_*`), the listener's message size, keepalive and window,
//! `[gateway.tls]`, and `[redis]`'s URL scheme, ACL
//! credentials and `[redis.tls]`, validated (files read and checked) into what the listener and the clients need.

use service_kit::tls::{ClientTls, ClientTlsFiles, ServerTls, ServerTlsFiles, TlsError};

use super::{ConfigError, Env, GatewayFile, RedisFile, ServerFile, err};
use crate::store::{RedisAccess, url_has_credentials};

fn tls_err(table: &str) -> impl Fn(TlsError) -> ConfigError + '_ {
    move |e| err(format!("{table}.{}", e.key), e.message)
}

/// The listener's TLS: `[server.tls]` under the `PROCESSOR_TLS_*` variables.
pub(super) fn server_tls(
    file: &ServerFile,
    env: &dyn Env,
) -> Result<Option<ServerTls>, ConfigError> {
    ServerTlsFiles::with_env(file.tls.clone(), "PROCESSOR", |name| env.var(name))
        .and_then(|files| files.as_ref().map(ServerTls::load).transpose())
        .map_err(tls_err("server.tls"))
}

/// `server.max_request_bytes` by default: every request the limits of `api::validate` accept is far smaller.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// The smallest `server.max_request_bytes`: a prompt at every limit of `api::validate` (3 MiB of content, 256 KiB
/// of client tools, 64 KiB of system text and of schema) still fits.
const MIN_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// The listener's request size limit, HTTP/2 keepalive and receive window.
pub(super) fn server_limits(
    file: &ServerFile,
) -> Result<
    (
        usize,
        service_kit::grpc::Keepalive,
        service_kit::grpc::ReceiveWindow,
    ),
    ConfigError,
> {
    if file.max_request_bytes < MIN_MAX_REQUEST_BYTES {
        return Err(err(
            "server.max_request_bytes",
            format!(
                "{}: must be at least {MIN_MAX_REQUEST_BYTES} (4 MiB), so every valid request fits",
                file.max_request_bytes
            ),
        ));
    }
    let (keepalive, window) = service_kit::listen::http2(
        file.keepalive_interval_ms,
        file.keepalive_timeout_ms,
        file.stream_window_bytes,
    )?;
    Ok((file.max_request_bytes, keepalive, window))
}

/// TLS to the gateway: needed for `https://` URLs (the system's roots when `[gateway.tls]` is absent), refused with
/// plaintext ones.
pub(super) fn gateway_tls(file: &GatewayFile, url: &str) -> Result<Option<ClientTls>, ConfigError> {
    let https = url.split(',').any(|u| u.trim().starts_with("https://"));
    match (&file.tls, https) {
        (Some(_), false) => Err(err("gateway.tls", "set, but gateway.url is not https://")),
        (files, true) => ClientTls::load(files.as_ref().unwrap_or(&ClientTlsFiles::default()))
            .map(Some)
            .map_err(tls_err("gateway.tls")),
        (None, false) => Ok(None),
    }
}

/// Credentials and TLS for Redis. `rediss://` needs TLS (the system's roots when `[redis.tls]` is absent); the user
/// and password of the data nodes come from the URLs or from `username` and the `password_env` variable, not both.
/// In sentinel mode the URLs name the sentinels, so their credentials are the sentinels' and never conflict.
pub(super) fn redis_access(
    file: &RedisFile,
    urls: &[String],
    sentinel: bool,
    env: &dyn Env,
) -> Result<RedisAccess, ConfigError> {
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
    let password = env.var(&file.password_env);
    if in_url && (file.username.is_some() || password.is_some()) {
        return Err(err(
            "redis.username",
            format!(
                "the URL already carries credentials; use either the URL or username / {}",
                file.password_env
            ),
        ));
    }
    if file.username.is_some() && password.is_none() {
        return Err(err(
            "redis.password_env",
            format!("redis.username is set but {} is not", file.password_env),
        ));
    }
    let tls = match (&file.tls, tls) {
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
            ClientTls::load(files.as_ref().unwrap_or(&ClientTlsFiles::default()))
                .map_err(tls_err("redis.tls"))?,
        ),
        (None, false) => None,
    };
    Ok(RedisAccess {
        username: file.username.clone(),
        password,
        tls,
    })
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
