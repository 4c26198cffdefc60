//! How a service reaches Redis: the target (one node, a cluster's seeds, or the sentinels) plus ACL credentials and
//! TLS from the configuration.
//!
//! `redis://` is plaintext, `rediss://` TLS (rustls, like the gRPC side). Credentials come from the URL
//! (`redis[s]://user:password@host`) or from [`RedisAccess`]; either way they are sent with the connection's `HELLO`
//! / `AUTH` and never logged: this type's `Debug` hides the password and the URL is never printed.

use std::time::Duration;

use redis::IntoConnectionInfo;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClientBuilder, ClusterConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use service_kit::tls::ClientTls;

use redis::cluster::ClusterClient;
use redis::{AsyncConnectionConfig, Client, RedisError};

use crate::conn::Conn;
use crate::sentinel::Primary;
use crate::target::RedisTarget;

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
pub fn client(url: &str, access: &RedisAccess) -> Result<redis::Client, RedisError> {
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
        return redis::Client::open(info);
    };
    redis::Client::build_with_tls(info, certificates(tls))
}

fn certificates(tls: &ClientTls) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: tls.identity().map(|id| redis::ClientTlsConfig {
            client_cert: id.cert_pem().to_vec(),
            client_key: id.key_pem().to_vec(),
        }),
        root_cert: tls.ca_pem().map(<[u8]>::to_vec),
    }
}

/// Bounds of a shared connection: connecting, and each non-blocking command.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// Establishing a connection.
    pub connect: Duration,
    /// Each command's reply.
    pub response: Duration,
}

/// How connections of their own (for blocking commands) are opened, per mode.
pub enum Opener {
    /// One node.
    Standalone(Box<Client>),
    /// A cluster.
    Cluster(Box<ClusterClient>),
    /// The sentinels' current primary (a handle without a response timeout, asked afresh at every open).
    Sentinel(Primary),
}

impl Opener {
    /// A new connection without a response timeout: its command is meant to wait, and its caller bounds it.
    pub async fn open(&self, connect_timeout: Duration) -> Result<Conn, RedisError> {
        match self {
            Opener::Standalone(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(None);
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(Conn::Direct)
            }
            Opener::Cluster(client) => {
                let config = ClusterConfig::new().set_connection_timeout(connect_timeout);
                client
                    .get_async_connection_with_config(config)
                    .await
                    .map(Conn::Cluster)
            }
            Opener::Sentinel(primary) => primary.open().await.map(Conn::Direct),
        }
    }
}

/// The shared connection for `target` and the opener of connections of their own for blocking commands.
pub async fn connect(
    target: &RedisTarget,
    access: &RedisAccess,
    timeouts: Timeouts,
) -> Result<(Conn, Opener), RedisError> {
    match target {
        RedisTarget::Standalone { url } => {
            let client = client(url, access)?;
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(Some(timeouts.response))
                .set_connection_timeout(Some(timeouts.connect));
            let conn = ConnectionManager::new_with_config(client.clone(), config).await?;
            Ok((Conn::Manager(conn), Opener::Standalone(Box::new(client))))
        }
        RedisTarget::Cluster { seeds } => {
            let mut builder = ClusterClientBuilder::new(
                seeds
                    .iter()
                    .map(|s| s.as_str().into_connection_info())
                    .collect::<Result<Vec<_>, _>>()?,
            );
            if let Some(user) = &access.username {
                builder = builder.username(user);
            }
            if let Some(password) = &access.password {
                builder = builder.password(password);
            }
            if let Some(tls) = &access.tls {
                builder = builder.certs(certificates(tls));
            }
            let client = builder.build()?;
            let config = ClusterConfig::new()
                .set_connection_timeout(timeouts.connect)
                .set_response_timeout(timeouts.response);
            let conn = client.get_async_connection_with_config(config).await?;
            Ok((Conn::Cluster(conn), Opener::Cluster(Box::new(client))))
        }
        RedisTarget::Sentinel { sentinels, master } => {
            let shared = Primary::new(
                sentinel_client(sentinels, master, access)?,
                timeouts.connect,
                Some(timeouts.response),
            );
            let blocking = Primary::new(
                sentinel_client(sentinels, master, access)?,
                timeouts.connect,
                None,
            );
            Ok((Conn::Sentinel(shared), Opener::Sentinel(blocking)))
        }
    }
}

/// Sentinels at `urls` (their own credentials in the URLs) watching `master`; `access` applies to the data nodes,
/// and TLS (`rediss://` sentinels) to both.
fn sentinel_client(
    urls: &[String],
    master: &str,
    access: &RedisAccess,
) -> Result<SentinelClient, RedisError> {
    let infos = urls
        .iter()
        .map(|u| u.as_str().into_connection_info())
        .collect::<Result<Vec<_>, _>>()?;
    let mut builder = SentinelClientBuilder::new(
        infos.iter().map(|i| i.addr().clone()),
        master,
        SentinelServerType::Master,
    )?;
    if let Some(first) = infos.first() {
        let settings = first.redis_settings();
        if let Some(user) = settings.username() {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = settings.password() {
            builder = builder.set_client_to_sentinel_password(password);
        }
    }
    if let Some(user) = &access.username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = &access.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(tls) = &access.tls {
        builder = builder
            .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
            .set_client_to_redis_certificates(certificates(tls))
            .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure)
            .set_client_to_sentinel_certificates(certificates(tls));
    }
    builder.build()
}

/// Whether `url` carries a user name or a password of its own.
pub fn url_has_credentials(url: &str) -> Result<bool, RedisError> {
    let info = url.into_connection_info()?;
    let settings = info.redis_settings();
    Ok(settings.username().is_some() || settings.password().is_some())
}
