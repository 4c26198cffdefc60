//! Dedicated connections for blocking commands (BLPOP, XREAD BLOCK).
//!
//! Redis serves one connection's commands in order, so a blocking command parks every command queued behind it on
//! the same socket. The shared connection multiplexes every caller onto one socket (per node, on a cluster), so
//! blocking there would stall the whole process; instead each blocking call borrows a connection of its own from
//! this pool: a plain connection to the node (standalone), to the sentinels' current primary (sentinel), or a
//! cluster connection of its own that routes the command to the primary owning its key and follows `MOVED`.

use std::sync::Mutex;
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterConfig};
use redis::{AsyncConnectionConfig, Client, Cmd, FromRedisValue, RedisError};

use super::StoreError;
use super::conn::Conn;
use super::sentinel::{Primary, is_readonly};

/// How the pool opens a connection, per mode.
pub(super) enum Opener {
    /// One node.
    Standalone(Box<Client>),
    /// A cluster.
    Cluster(Box<ClusterClient>),
    /// The sentinels' current primary (a handle without a response timeout, asked afresh at every open).
    Sentinel(Primary),
}

/// Idle connections kept for reuse; beyond this, returned connections are closed so a burst of waiters does not
/// pin sockets forever.
const MAX_IDLE: usize = 16;

/// A small pool of exclusive connections: one blocking command per connection at a time.
pub(super) struct Pool {
    opener: Opener,
    connect_timeout: Duration,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    pub(super) fn new(opener: Opener, connect_timeout: Duration) -> Self {
        Self {
            opener,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    async fn open(&self) -> Result<Conn, RedisError> {
        // No response timeout on the connection itself: the command is meant to wait; `query` bounds it instead.
        match &self.opener {
            Opener::Standalone(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_response_timeout(None);
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(Conn::Direct)
            }
            Opener::Cluster(client) => {
                let config = ClusterConfig::new().set_connection_timeout(self.connect_timeout);
                client
                    .get_async_connection_with_config(config)
                    .await
                    .map(Conn::Cluster)
            }
            Opener::Sentinel(primary) => primary.open().await.map(Conn::Direct),
        }
    }

    fn take(&self) -> Option<Conn> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn give_back(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Runs one blocking command, giving up after `limit` (the command's own block time plus a grace period, so a
    /// silently dropped TCP connection cannot hang the caller forever).
    ///
    /// A connection is returned to the pool only after a complete reply. When the caller's future is dropped
    /// mid-command, or the command fails or times out, the connection is dropped with it: the server may still be
    /// blocking it, and the next borrower would queue behind a command nobody waits for.
    pub(super) async fn query<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        limit: Duration,
    ) -> Result<T, StoreError> {
        if let Some(mut conn) = self.take() {
            match tokio::time::timeout(limit, cmd.query_async::<T>(&mut conn)).await {
                Ok(Ok(value)) => {
                    self.give_back(conn);
                    return Ok(value);
                }
                // An idle connection may have died (server restart, idle timeout, failover) or reach a primary
                // demoted to a replica (READONLY, sentinel mode); one attempt on a fresh connection tells a dead
                // socket from a dead server.
                Ok(Err(e))
                    if e.is_connection_dropped()
                        || e.is_io_error()
                        || e.is_unrecoverable_error()
                        || is_readonly(&e) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(StoreError::Timeout(limit)),
            }
        }
        let mut conn = self.open().await?;
        match tokio::time::timeout(limit, cmd.query_async::<T>(&mut conn)).await {
            Ok(Ok(value)) => {
                self.give_back(conn);
                Ok(value)
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(StoreError::Timeout(limit)),
        }
    }
}
