//! The store's shared connection (a `redis_kit::Conn` in any mode), counting each request and, on a runtime per
//! core, handing each thread a connection of its own.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use redis_kit::Conn;

use super::replicas::Traffic;

/// The store's shared connection, counting each request (a command or a pipeline) in [`Traffic`].
#[derive(Clone)]
pub(super) struct Counted {
    conn: Conn,
    traffic: Arc<Traffic>,
}

thread_local! {
    /// A store's connection of this thread's own (a runtime per core: see `crate::runtimes`), with the store it
    /// belongs to: its requests are then driven by the thread that makes them.
    static LOCAL: std::cell::RefCell<Option<(usize, Conn)>> = const { std::cell::RefCell::new(None) };
}

impl Counted {
    pub(super) fn new(conn: Conn, traffic: Arc<Traffic>) -> Self {
        Self { conn, traffic }
    }

    /// Which store this is (clones share it): the address of its counters.
    fn key(&self) -> usize {
        Arc::as_ptr(&self.traffic).addr()
    }

    /// Whether every key lives on one node (standalone, sentinel): a pipeline may then mix slots.
    pub(super) fn one_node(&self) -> bool {
        !matches!(self.conn, Conn::Cluster(_))
    }

    /// Makes `conn` this thread's connection of this store.
    pub(super) fn set_local(&self, conn: Conn) {
        let key = self.key();
        LOCAL.with(|l| *l.borrow_mut() = Some((key, conn)));
    }

    /// This thread's connection of this store, when it has one.
    fn local(&self) -> Option<Conn> {
        let key = self.key();
        LOCAL.with(|l| {
            l.borrow()
                .as_ref()
                .filter(|(k, _)| *k == key)
                .map(|(_, c)| c.clone())
        })
    }
}

impl ConnectionLike for Counted {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.traffic.request();
        match self.local() {
            Some(mut conn) => Box::pin(async move { conn.req_packed_command(cmd).await }),
            None => self.conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.traffic.request();
        match self.local() {
            Some(mut conn) => {
                Box::pin(async move { conn.req_packed_commands(pipeline, offset, count).await })
            }
            None => self.conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
