//! The transport keys: `[server.tls]` (and `PROCESSOR_TLS_*`), the listener's message size, keepalive and window,
//! and `[gateway.tls]`, validated (files read and checked) into what the listener and the gateway client need.
//! `[redis]`'s URL scheme, ACL credentials and `[redis.tls]` are `redis_kit::settings`'s.

use service_kit::tls::{ClientTls, ClientTlsFiles, ServerTls, ServerTlsFiles, TlsError};

use super::{ConfigError, Env, GatewayFile, ServerFile, err};

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

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
