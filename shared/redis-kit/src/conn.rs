//! A connection to Redis in each deployment mode, behind one type its users call unchanged:
//!
//! - **standalone**: one node through a `ConnectionManager` (reconnects to the same address);
//! - **cluster**: the `redis` crate's cluster client (`cluster_async`): it learns the slot map from the seed nodes,
//!   follows `MOVED` (refreshing the map) and `ASK`, and retries while a failover promotes a replica. Scripts go out
//!   as `EVALSHA` to the primary owning their slot; on `NOSCRIPT` (a promoted replica, a new primary) the script is
//!   loaded on every primary and retried. A pipeline whose commands live in several slots is split here (see
//!   [`split_pipeline`]), because the cluster client refuses cross-slot pipelines;
//! - **sentinel**: the current primary as the sentinels name it (see `sentinel`), re-resolved after a failover.

use futures::FutureExt as _;
use futures::future::BoxFuture;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::sentinel::Primary;

/// One connection to Redis, whatever the mode. Cheap to clone: clones share the underlying sockets.
#[derive(Clone)]
pub enum Conn {
    /// Standalone, shared: reconnects on its own.
    Manager(ConnectionManager),
    /// A plain connection to one node (a connection of its own for blocking commands, in standalone and sentinel
    /// mode).
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

/// Commands pipelined without a key. `WAIT` counts the replicas that have the writes made before it on
/// its connection, so it belongs with the command it follows, not to the slot of its argument.
const KEYLESS: &[&[u8]] = &[b"WAIT"];

/// The hash slot a command's key lives in: its first key is argument 1 for every command pipelined here,
/// except `EVAL`/`EVALSHA` (argument 3, when the script has keys) and the [`KEYLESS`] ones. `None`: no key (routed
/// anywhere, or with the pipeline's keyed commands).
pub fn command_slot(cmd: &Cmd) -> Option<Slot> {
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
pub enum Plan {
    /// Every command in one slot (or keyless): one pipeline, as on a single node.
    Whole,
    /// Only reads: one pipeline per slot, all at once (order between slots cannot change a read's reply).
    Concurrent(Vec<Vec<usize>>),
    /// Writes in several slots: runs of consecutive commands in one slot, one run after the other, so the program
    /// order callers rely on (the processor's index entries before a session on creation, after it on deletion)
    /// holds.
    Sequential(Vec<Vec<usize>>),
}

/// Decides how to send `commands` to a cluster (pure, so it is tested without Redis).
pub fn plan(commands: &[&Cmd]) -> Plan {
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
