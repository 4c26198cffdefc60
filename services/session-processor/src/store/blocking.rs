//! Dedicated connections for blocking commands (BLPOP, XREAD BLOCK).
//!
//! Redis serves one connection's commands in order, so a blocking command parks every command queued behind it on
//! the same socket. The shared connection multiplexes every caller onto one socket (per node, on a cluster), so
//! blocking there would stall the whole process; instead each blocking call borrows a connection of its own from
//! this pool: a plain connection to the node (standalone), to the sentinels' current primary (sentinel), or a
//! cluster connection of its own that routes the command to the primary owning its key and follows `MOVED`.

use std::sync::Mutex;
use std::time::Duration;

use redis::{Cmd, FromRedisValue, RedisError};
use redis_kit::sentinel::is_readonly;
use redis_kit::{Conn, Opener};

use super::StoreError;

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
        self.opener.open(self.connect_timeout).await
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
