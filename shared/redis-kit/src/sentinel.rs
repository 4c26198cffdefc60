//! Sentinel mode: a connection talks to the primary the sentinels name, and follows a failover.
//!
//! The sentinels are asked for the primary of the configured name (`SENTINEL GET-MASTER-ADDR-BY-NAME`-style lookup
//! by the `redis` crate, which also checks `ROLE` on the node it gets), and one multiplexed connection to it serves
//! every command. When that connection breaks (the primary died) or the node answers `READONLY` (it was demoted to
//! a replica), the connection is dropped and the next command asks the sentinels again, so after a failover the
//! connection reaches the promoted replica without a proxy. A `READONLY` reply means the command did not run, so it is
//! retried once on the new primary; a broken connection is not retried here (the command may have run), the caller
//! sees the error and its own retry rules apply, as with a standalone Redis restarting.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt as _;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

/// The sentinels' current primary, shared by clones.
#[derive(Clone)]
pub struct Primary {
    inner: Arc<Inner>,
}

struct Inner {
    /// Asked for the primary's address; the async lock also lets one caller at a time resolve it.
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the primary and its generation (so a stale failure does not drop a newer connection).
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    generation: std::sync::atomic::AtomicU64,
    config: AsyncConnectionConfig,
}

/// Whether `e` says the connection no longer reaches a usable primary.
pub fn is_stale(e: &RedisError) -> bool {
    e.is_connection_dropped()
        || e.is_io_error()
        || e.is_unrecoverable_error()
        || e.is_timeout()
        || is_readonly(e)
}

/// The node answered as a replica: the command did not run.
pub fn is_readonly(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

impl Primary {
    /// A handle that connects lazily on its first command; `response_timeout` bounds each command (`None`: no bound,
    /// for connections that wait on blocking commands).
    pub fn new(
        sentinels: SentinelClient,
        connect_timeout: Duration,
        response_timeout: Option<Duration>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                sentinels: tokio::sync::Mutex::new(sentinels),
                current: Mutex::new(None),
                generation: std::sync::atomic::AtomicU64::new(0),
                config: AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(response_timeout),
            }),
        }
    }

    fn cached(&self) -> Option<(u64, MultiplexedConnection)> {
        self.inner
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The connection to the current primary, asking the sentinels when there is none.
    async fn get(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let mut sentinels = self.inner.sentinels.lock().await;
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let conn = self.open_with(&mut sentinels).await?;
        let generation = 1 + self
            .inner
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.inner.current.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((generation, conn.clone()));
        Ok((generation, conn))
    }

    /// A new connection of its own to the current primary (for blocking commands).
    pub(super) async fn open(&self) -> RedisResult<MultiplexedConnection> {
        let mut sentinels = self.inner.sentinels.lock().await;
        self.open_with(&mut sentinels).await
    }

    async fn open_with(
        &self,
        sentinels: &mut SentinelClient,
    ) -> RedisResult<MultiplexedConnection> {
        let client = sentinels.async_get_client().await?;
        client
            .get_multiplexed_async_connection_with_config(&self.inner.config)
            .await
    }

    /// Forgets connection `generation` after it failed, unless a newer one replaced it already.
    fn drop_generation(&self, generation: u64) {
        let mut current = self.inner.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
        }
    }

    async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.get().await?;
        match conn.req_packed_command(cmd).await {
            Err(e) if is_stale(&e) => {
                self.drop_generation(generation);
                if !is_readonly(&e) {
                    return Err(e);
                }
                let (_, mut conn) = self.get().await?;
                conn.req_packed_command(cmd).await
            }
            other => other,
        }
    }

    async fn commands(&self, p: &Pipeline, offset: usize, count: usize) -> RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.get().await?;
        match conn.req_packed_commands(p, offset, count).await {
            Err(e) if is_stale(&e) => {
                self.drop_generation(generation);
                Err(e)
            }
            other => other,
        }
    }
}

impl ConnectionLike for Primary {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let this = self.clone();
        async move { this.command(cmd).await }.boxed()
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let this = self.clone();
        async move { this.commands(pipeline, offset, count).await }.boxed()
    }

    fn get_db(&self) -> i64 {
        self.cached().map_or(0, |(_, c)| c.get_db())
    }
}
