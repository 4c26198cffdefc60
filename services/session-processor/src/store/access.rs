//! How the store reaches Redis: the URL plus ACL credentials and TLS from the configuration.
//!
//! `redis://` is plaintext, `rediss://` TLS (rustls, like the gRPC side). Credentials come from the URL
//! (`redis[s]://user:password@host`) or from [`RedisAccess`]; either way they are sent with the connection's `HELLO`
//! / `AUTH` and never logged: this type's `Debug` hides the password and the URL is never printed.

use redis::IntoConnectionInfo;
use service_kit::tls::ClientTls;

use super::StoreError;

/// ACL credentials and TLS for the Redis connection (in addition to what the URL says).
#[derive(Clone, Default)]
pub struct RedisAccess {
    /// ACL user (`AUTH <user> <password>`); the default user when unset.
    pub username: Option<String>,
    /// Password of that user.
    pub password: Option<String>,
    /// TLS for `rediss://` URLs: the CA to trust (the system's roots when not set) and a client certificate when
    /// Redis requires one (`tls-auth-clients yes`).
    pub tls: Option<ClientTls>,
}

impl std::fmt::Debug for RedisAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAccess")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// The client for `url` with `access` applied.
pub fn client(url: &str, access: &RedisAccess) -> Result<redis::Client, StoreError> {
    let mut info = url.into_connection_info()?;
    if access.username.is_some() || access.password.is_some() {
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &access.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &access.password {
            settings = settings.set_password(password);
        }
        info = info.set_redis_settings(settings);
    }
    let Some(tls) = &access.tls else {
        return Ok(redis::Client::open(info)?);
    };
    let certificates = redis::TlsCertificates {
        client_tls: tls.identity().map(|id| redis::ClientTlsConfig {
            client_cert: id.cert_pem().to_vec(),
            client_key: id.key_pem().to_vec(),
        }),
        root_cert: tls.ca_pem().map(<[u8]>::to_vec),
    };
    Ok(redis::Client::build_with_tls(info, certificates)?)
}

/// Whether `url` carries a user name or a password of its own.
pub fn url_has_credentials(url: &str) -> Result<bool, StoreError> {
    let info = url.into_connection_info()?;
    let settings = info.redis_settings();
    Ok(settings.username().is_some() || settings.password().is_some())
}
