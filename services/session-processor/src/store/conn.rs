//! The store's connection to Redis in each deployment mode, behind one type the rest of the store uses unchanged:
//!
//! - **standalone**: one node through a `ConnectionManager` (reconnects to the same address);
//! - **cluster**: the `redis` crate's cluster client (`cluster_async`): it learns the slot map from the seed nodes,
//!   follows `MOVED` (refreshing the map) and `ASK`, and retries while a failover promotes a replica. Scripts go out
//!   as `EVALSHA` to the primary owning their slot; on `NOSCRIPT` (a promoted replica, a new primary) the script is
//!   loaded on every primary and retried. A pipeline whose commands live in several slots is split here (see
//!   [`split_pipeline`]), because the cluster client refuses cross-slot pipelines;
//! - **sentinel**: the current primary as the sentinels name it (see `sentinel`), re-resolved after a failover.

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::replicas::Traffic;
use super::sentinel::Primary;

/// Where the store's data lives, chosen by `[redis] mode` (see docs/operations.md).
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis node.
    Standalone {
        /// `redis://` or `rediss://` URL of the node.
        url: String,
    },
    /// A Redis Cluster, found through any of its nodes.
    Cluster {
        /// URLs of some cluster nodes (seeds); the client learns the rest from them.
        seeds: Vec<String>,
    },
    /// A primary with replicas whose failover Redis Sentinel manages.
    Sentinel {
        /// URLs of the sentinels (not of the data nodes).
        sentinels: Vec<String>,
        /// The name the sentinels monitor the primary under (`sentinel monitor <name> ...`).
        master: String,
    },
}

impl RedisTarget {
    /// A standalone node at `url`.
    pub fn standalone(url: impl Into<String>) -> Self {
        Self::Standalone { url: url.into() }
    }

    /// The mode's name as the configuration spells it.
    pub fn mode(&self) -> &'static str {
        match self {
            Self::Standalone { .. } => "standalone",
            Self::Cluster { .. } => "cluster",
            Self::Sentinel { .. } => "sentinel",
        }
    }

    /// Every URL the target names.
    pub fn urls(&self) -> &[String] {
        match self {
            Self::Standalone { url } => std::slice::from_ref(url),
            Self::Cluster { seeds } => seeds,
            Self::Sentinel { sentinels, .. } => sentinels,
        }
    }
}

/// URLs may carry passwords, so only the mode and the number of addresses are shown.
impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("RedisTarget");
        d.field("mode", &self.mode())
            .field("addresses", &self.urls().len());
        if let Self::Sentinel { master, .. } = self {
            d.field("master", master);
        }
        d.finish()
    }
}

/// One connection of the store, whatever the mode. Cheap to clone: clones share the underlying sockets.
#[derive(Clone)]
pub(super) enum Conn {
    /// Standalone, shared: reconnects on its own.
    Manager(ConnectionManager),
    /// A plain connection to one node (the blocking pool's, in standalone and sentinel mode).
    Direct(MultiplexedConnection),
    /// Redis Cluster.
    Cluster(ClusterConnection),
    /// Sentinel's current primary.
    Sentinel(Primary),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Manager(c) => c.req_packed_command(cmd),
            Self::Direct(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
            Self::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Direct(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) if !pipeline.is_transaction() => {
                split_pipeline(c.clone(), pipeline).boxed()
            }
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Manager(c) => c.get_db(),
            Self::Direct(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
            Self::Sentinel(c) => c.get_db(),
        }
    }
}

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

/// Commands whose replies do not depend on the order they run in relative to the pipeline's other commands.
const READS: &[&[u8]] = &[
    b"GET",
    b"HGET",
    b"HMGET",
    b"HGETALL",
    b"EXISTS",
    b"PTTL",
    b"SISMEMBER",
    b"SMEMBERS",
    b"ZRANGE",
    b"ZSCORE",
    b"ZCARD",
];

/// Commands the store pipelines that take no key. `WAIT` counts the replicas that have the writes made before it on
/// its connection, so it belongs with the command it follows (see `replicas`), not to the slot of its argument.
const KEYLESS: &[&[u8]] = &[b"WAIT"];

/// The hash slot a command's key lives in: its first key is argument 1 for every command the store pipelines,
/// except `EVAL`/`EVALSHA` (argument 3, when the script has keys) and the [`KEYLESS`] ones. `None`: no key (routed
/// anywhere, or with the pipeline's keyed commands).
pub(super) fn command_slot(cmd: &Cmd) -> Option<Slot> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .filter_map(|a| match a {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect();
    let name = args.first()?.to_ascii_uppercase();
    if KEYLESS.contains(&name.as_slice()) {
        return None;
    }
    let key = if name == b"EVAL" || name == b"EVALSHA" {
        let keys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
        if keys == 0 {
            return None;
        }
        args.get(3)?
    } else {
        args.get(1)?
    };
    Some(Slot::for_key(key))
}

fn is_read(cmd: &Cmd) -> bool {
    cmd.args_iter().next().is_some_and(|a| match a {
        redis::Arg::Simple(name) => READS.iter().any(|r| name.eq_ignore_ascii_case(r)),
        _ => false,
    })
}

/// How a cross-slot pipeline is sent: `Ok(groups)` of command indexes, each group in one slot.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// Every command in one slot (or keyless): one pipeline, as on a single node.
    Whole,
    /// Only reads: one pipeline per slot, all at once (order between slots cannot change a read's reply).
    Concurrent(Vec<Vec<usize>>),
    /// Writes in several slots: runs of consecutive commands in one slot, one run after the other, so the program
    /// order the store relies on (index entries before the session on creation, after it on deletion) holds.
    Sequential(Vec<Vec<usize>>),
}

/// Decides how to send `commands` to a cluster (pure, so it is tested without Redis).
pub(super) fn plan(commands: &[&Cmd]) -> Plan {
    let slots: Vec<Option<Slot>> = commands.iter().map(|c| command_slot(c)).collect();
    let mut distinct = slots.iter().flatten();
    let first = distinct.next();
    if first.is_none_or(|f| distinct.all(|s| s == f)) {
        return Plan::Whole;
    }
    if commands.iter().all(|c| is_read(c)) {
        let mut groups: Vec<(Option<Slot>, Vec<usize>)> = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            match groups.iter_mut().find(|(s, _)| s == slot) {
                Some((_, g)) => g.push(i),
                None => groups.push((*slot, vec![i])),
            }
        }
        return Plan::Concurrent(groups.into_iter().map(|(_, g)| g).collect());
    }
    let mut runs: Vec<(Option<Slot>, Vec<usize>)> = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        match runs.last_mut() {
            Some((s, run)) if slot.is_none() || s.is_none() || s == slot => {
                if s.is_none() {
                    *s = *slot;
                }
                run.push(i);
            }
            _ => runs.push((*slot, vec![i])),
        }
    }
    Plan::Sequential(runs.into_iter().map(|(_, r)| r).collect())
}

/// Sends a non-transactional pipeline to a cluster following [`plan`], and returns the replies in the pipeline's
/// order, as one node would.
fn split_pipeline(
    conn: ClusterConnection,
    pipeline: &Pipeline,
) -> BoxFuture<'static, RedisResult<Vec<Value>>> {
    let commands: Vec<Cmd> = pipeline.cmd_iter().cloned().collect();
    async move {
        let refs: Vec<&Cmd> = commands.iter().collect();
        let groups = match plan(&refs) {
            Plan::Whole => {
                let mut whole = redis::pipe();
                for c in &commands {
                    whole.add_command(c.clone());
                }
                let n = whole.len();
                return conn.clone().req_packed_commands(&whole, 0, n).await;
            }
            Plan::Concurrent(groups) => {
                let sends = groups
                    .iter()
                    .map(|g| send_group(conn.clone(), &commands, g));
                let replies = futures::future::try_join_all(sends).await?;
                groups.into_iter().zip(replies).collect::<Vec<_>>()
            }
            Plan::Sequential(runs) => {
                let mut out = Vec::with_capacity(runs.len());
                for run in runs {
                    let replies = send_group(conn.clone(), &commands, &run).await?;
                    out.push((run, replies));
                }
                out
            }
        };
        let mut ordered: Vec<Option<Value>> = vec![None; commands.len()];
        for (indexes, replies) in groups {
            for (i, v) in indexes.into_iter().zip(replies) {
                ordered[i] = Some(v);
            }
        }
        ordered
            .into_iter()
            .map(|v| {
                v.ok_or_else(|| {
                    redis::RedisError::from((
                        redis::ErrorKind::Parse,
                        "short reply to a split pipeline",
                    ))
                })
            })
            .collect()
    }
    .boxed()
}

async fn send_group(
    mut conn: ClusterConnection,
    commands: &[Cmd],
    indexes: &[usize],
) -> RedisResult<Vec<Value>> {
    let mut part = redis::pipe();
    for &i in indexes {
        part.add_command(commands[i].clone());
    }
    conn.req_packed_commands(&part, 0, indexes.len()).await
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
