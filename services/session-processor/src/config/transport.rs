//! The transport keys: `[server.tls]` (and `PROCESSOR_TLS_*`), the listener's message size and keepalive,
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

/// The listener's request size limit and HTTP/2 keepalive.
pub(super) fn server_limits(
    file: &ServerFile,
) -> Result<(usize, service_kit::grpc::Keepalive), ConfigError> {
    if file.max_request_bytes < MIN_MAX_REQUEST_BYTES {
        return Err(err(
            "server.max_request_bytes",
            format!(
                "{}: must be at least {MIN_MAX_REQUEST_BYTES} (4 MiB), so every valid request fits",
                file.max_request_bytes
            ),
        ));
    }
    let keepalive = service_kit::grpc::Keepalive::from_millis(
        file.keepalive_interval_ms,
        file.keepalive_timeout_ms,
    )
    .map_err(|(key, why)| err(format!("server.{key}"), why))?;
    Ok((file.max_request_bytes, keepalive))
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
mod tests {
    use std::path::Path;

    use super::super::*;

    struct Vars(Vec<(String, String)>);

    impl Env for Vars {
        fn var(&self, name: &str) -> Option<String> {
            let token =
                (name == "PROCESSOR_AUTH_TOKENS").then(|| "operator-token-0123456789".to_owned());
            token.or_else(|| {
                self.0
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        }
    }

    fn load(toml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env = Vars(
            env.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        Config::from_file(Config::parse(toml)?, Path::new("."), &env)
    }

    #[test]
    fn tls_files_are_checked_where_they_are_configured() {
        let dir = tempfile::tempdir().unwrap();
        let pki = service_kit::test_certs::generate(dir.path());
        let (cert, key) = (
            pki.server_cert.display().to_string(),
            pki.server_key.display().to_string(),
        );
        let c = load("", &[]).unwrap();
        assert!(c.server_tls.is_none() && c.gateway_tls.is_none() && c.redis_access.tls.is_none());
        let c = load(
            &format!(
                "[server]\ntls = {}\n[gateway]\nurl = \"https://gw:50051\"\ntls = {}\n\
                 [redis]\nurl = \"rediss://redis:6380\"\nusername = \"processor\"\ntls = {}\n",
                pki.server_toml(true),
                pki.client_toml(false),
                pki.client_toml(true),
            ),
            &[("REDIS_PASSWORD", "hunter2")],
        )
        .unwrap();
        assert!(c.server_tls.unwrap().mutual());
        assert!(c.gateway_tls.unwrap().ca_pem().is_some());
        assert_eq!(c.redis_access.username.as_deref(), Some("processor"));
        assert!(c.redis_access.tls.is_some());
        assert!(
            !format!("{:?}", c.redis_access).contains("hunter2"),
            "the password is never printed"
        );
        // From the environment alone; an https gateway without [gateway.tls] trusts the system's roots.
        let c = load(
            "[gateway]\nurl = \"https://gw:50051\"\n",
            &[
                ("PROCESSOR_TLS_CERT_FILE", &cert),
                ("PROCESSOR_TLS_KEY_FILE", &key),
            ],
        )
        .unwrap();
        assert!(!c.server_tls.unwrap().mutual());
        assert!(c.gateway_tls.unwrap().ca_pem().is_none());
    }

    #[test]
    fn transport_mistakes_name_their_key() {
        for (toml, env, key) in [
            (
                "[server.tls]\ncert_file = \"/no/cert.pem\"\nkey_file = \"/no/key.pem\"\n",
                &[][..],
                "server.tls.cert_file",
            ),
            (
                "",
                &[("PROCESSOR_TLS_KEY_FILE", "/k")][..],
                "server.tls.cert_file",
            ),
            (
                "[gateway]\ntls = { ca_file = \"/ca\" }\n",
                &[][..],
                "gateway.tls",
            ),
            (
                "[gateway]\nurl = \"https://gw:1\"\ntls = { ca_file = \"/no/ca.pem\" }\n",
                &[][..],
                "gateway.tls.ca_file",
            ),
            ("[redis]\nurl = \"http://r:1\"\n", &[][..], "redis.url"),
            (
                "[redis]\ntls = { ca_file = \"/ca\" }\n",
                &[][..],
                "redis.tls",
            ),
            (
                "[redis]\nurl = \"rediss://r:1\"\ntls = { server_name = \"x\" }\n",
                &[][..],
                "redis.tls.server_name",
            ),
            (
                "[redis]\nurl = \"redis://u:p@r:1\"\nusername = \"u\"\n",
                &[("REDIS_PASSWORD", "p")][..],
                "redis.username",
            ),
            ("[redis]\nusername = \"u\"\n", &[][..], "redis.password_env"),
        ] {
            assert_eq!(load(toml, env).unwrap_err().key, key, "{toml}");
        }
    }
}
