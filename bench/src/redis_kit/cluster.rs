//! A Redis Cluster on loopback, started from Debian's `redis-server` and `redis-cli --cluster create`: 3 primaries,
//! with replicas (the tests: one each, so a test can fail a primary over) or without, that a test can fail over and
//! reshard and a benchmark can measure. Every wait polls the servers' own view (`CLUSTER NODES`, `CLUSTER INFO`,
//! `INFO replication`) until it shows the expected state, within a bound meaning "it happened".

use std::time::Duration;

use tokio::time::Instant;

use super::RedisServer;
use crate::procs::free_port;

/// How long a cluster or sentinel change may take before the caller gives up.
pub(super) const SETTLE: Duration = Duration::from_secs(30);
/// Primaries of every cluster started here.
pub const PRIMARIES: usize = 3;
/// Cluster node timeout: a primary unreachable this long is failed over (a replica promoted).
const NODE_TIMEOUT_MS: &str = "1000";

/// One node as `CLUSTER NODES` describes it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Node id.
    pub id: String,
    /// Client port.
    pub port: u16,
    /// A primary (else a replica).
    pub primary: bool,
    /// Flagged `fail` (or `fail?`) by the node answering.
    pub failed: bool,
    /// Slot ranges it serves (primaries).
    pub slots: Vec<(u16, u16)>,
}

/// Parses `CLUSTER NODES` output.
fn parse_nodes(text: &str) -> Vec<NodeInfo> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let port = f
                .get(1)?
                .split(['@', ','])
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let flags = f.get(2)?;
            let slots = f
                .iter()
                .skip(8)
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|n| (n, n)),
                })
                .collect();
            Some(NodeInfo {
                id: (*f.first()?).to_owned(),
                port,
                primary: flags.contains("master"),
                failed: flags.contains("fail"),
                slots,
            })
        })
        .collect()
}

/// A Redis Cluster of [`PRIMARIES`] primaries, with or without replicas, on loopback.
pub struct RedisCluster {
    /// Every node, started in this order (the first [`PRIMARIES`] began as primaries).
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// 3 primaries and 3 replicas with the tests' persistence (AOF, `appendfsync everysec`); see
    /// [`RedisCluster::start_shaped`].
    pub async fn start() -> RedisCluster {
        Self::start_shaped(1, &["--appendfsync", "everysec"]).await
    }

    /// Starts [`PRIMARIES`] × (1 + `replicas`) nodes with `extra` arguments after the cluster's own (later ones win,
    /// so `--appendonly no` turns persistence off), creates the cluster (`redis-cli --cluster create …
    /// --cluster-replicas <replicas>`) and waits until every node sees it healthy and every replica is in sync.
    /// `cluster-require-full-coverage no`: while one shard fails over, the others keep serving.
    pub async fn start_shaped(replicas: usize, extra: &[&str]) -> RedisCluster {
        let mut nodes = Vec::new();
        for _ in 0..PRIMARIES * (1 + replicas) {
            let node = RedisServer::start_with(|| {
                let bus = free_port().expect("a free port").to_string();
                let mut args = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    NODE_TIMEOUT_MS,
                    "--cluster-port",
                    &bus,
                    "--cluster-replica-validity-factor",
                    "0",
                    "--cluster-require-full-coverage",
                    "no",
                    "--repl-diskless-sync-delay",
                    "0",
                ]
                .map(String::from)
                .to_vec();
                args.extend(extra.iter().map(|a| (*a).to_owned()));
                args
            })
            .await;
            nodes.push(node);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .await
            .expect("redis-cli");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes };
        cluster
            .wait_until("the new cluster is healthy", |views| {
                views.iter().all(|v| {
                    v.iter()
                        .filter(|n| n.primary && !n.slots.is_empty())
                        .count()
                        == PRIMARIES
                        && v.iter().filter(|n| !n.primary).count() == PRIMARIES * replicas
                })
            })
            .await;
        cluster.wait_for_replicas().await;
        cluster
    }

    /// Waits until every replica's link to its primary is up (its initial sync done), so a failover promotes a
    /// replica that has the data.
    async fn wait_for_replicas(&self) {
        let deadline = Instant::now() + SETTLE;
        for n in &self.nodes {
            loop {
                let info = n.cli(&["INFO", "replication"]).await.unwrap_or_default();
                if info.contains("role:master") || info.contains("master_link_status:up") {
                    break;
                }
                assert!(Instant::now() < deadline, "replicas sync within {SETTLE:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The nodes' URLs, comma-separated (the processor's `redis.url` in cluster mode).
    pub fn seeds(&self) -> String {
        RedisServer::urls(&self.nodes)
    }

    fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .expect("a node of this cluster")
    }

    /// The hash slot of `key`.
    pub async fn slot_of(&self, key: &str) -> u16 {
        self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .await
            .and_then(|s| s.parse().ok())
            .expect("CLUSTER KEYSLOT")
    }

    /// Each live node's view: `CLUSTER NODES`, only from nodes that answer and whose `CLUSTER INFO` says ok.
    async fn views(&self, skip: &[u16]) -> Option<Vec<Vec<NodeInfo>>> {
        let mut views = Vec::new();
        for n in self.nodes.iter().filter(|n| !skip.contains(&n.port)) {
            let info = n.cli(&["CLUSTER", "INFO"]).await?;
            if !info.contains("cluster_state:ok") {
                return None;
            }
            views.push(parse_nodes(&n.cli(&["CLUSTER", "NODES"]).await?));
        }
        Some(views)
    }

    async fn wait_until_skipping(
        &self,
        what: &str,
        skip: &[u16],
        done: impl Fn(&[Vec<NodeInfo>]) -> bool,
    ) -> Vec<NodeInfo> {
        let deadline = Instant::now() + SETTLE;
        loop {
            if let Some(views) = self.views(skip).await
                && done(&views)
            {
                return views.into_iter().next().unwrap_or_default();
            }
            assert!(Instant::now() < deadline, "{what} within {SETTLE:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_until(
        &self,
        what: &str,
        done: impl Fn(&[Vec<NodeInfo>]) -> bool,
    ) -> Vec<NodeInfo> {
        self.wait_until_skipping(what, &[], done).await
    }

    /// The primary serving `slot`, as every node sees it.
    pub async fn owner(&self, slot: u16) -> NodeInfo {
        let view = self
            .wait_until("the nodes agree on the slot's owner", |views| {
                let owners: Vec<Option<u16>> = views.iter().map(|v| owner_in(v, slot)).collect();
                owners
                    .first()
                    .is_some_and(|o| o.is_some() && owners.iter().all(|x| x == o))
            })
            .await;
        let port = owner_in(&view, slot).expect("an owner");
        view.into_iter()
            .find(|n| n.port == port)
            .expect("the owner")
    }

    /// The primaries, as node 0 sees them.
    pub async fn primaries(&self) -> Vec<NodeInfo> {
        self.wait_until("the cluster is healthy", |_| true)
            .await
            .into_iter()
            .filter(|n| n.primary && !n.slots.is_empty())
            .collect()
    }

    /// SIGKILLs the primary serving `slot` and waits until every live node sees a replica promoted in its place.
    /// Returns the killed primary's port and the new primary.
    pub async fn kill_primary_of(&mut self, slot: u16) -> (u16, NodeInfo) {
        let old = self.owner(slot).await;
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == old.port)
            .expect("owner");
        node.kill().await;
        let skip = [old.port];
        let view = self
            .wait_until_skipping("a replica is promoted", &skip, |views| {
                views.iter().all(|v| {
                    owner_in(v, slot).is_some_and(|p| p != old.port)
                        && v.iter().any(|n| n.port == old.port && n.failed)
                })
            })
            .await;
        let port = owner_in(&view, slot).expect("new owner");
        (
            old.port,
            view.into_iter()
                .find(|n| n.port == port)
                .expect("new owner"),
        )
    }

    /// Moves `slot` to the primary `to` while clients keep using it: IMPORTING on the target, MIGRATING on the
    /// source, MIGRATE of its keys in batches until none is left, then SETSLOT NODE on both (and every other
    /// primary), and waits until every node agrees.
    pub async fn migrate_slot(&self, slot: u16, to: &NodeInfo) {
        let from = self.owner(slot).await;
        assert_ne!(from.port, to.port, "moving a slot to another primary");
        let (src, dst) = (self.node(from.port), self.node(to.port));
        let s = slot.to_string();
        let ok = |r: Option<String>| assert_eq!(r.as_deref(), Some("OK"));
        ok(dst
            .cli(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id])
            .await);
        ok(src
            .cli(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id])
            .await);
        let port = to.port.to_string();
        loop {
            let keys = src
                .cli(&["CLUSTER", "GETKEYSINSLOT", &s, "100"])
                .await
                .expect("keys");
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let mut args = vec![
                "MIGRATE",
                "127.0.0.1",
                &port,
                "",
                "0",
                "5000",
                "REPLACE",
                "KEYS",
            ];
            args.extend(keys);
            let reply = src.cli(&args).await.expect("MIGRATE");
            assert!(reply == "OK" || reply == "NOKEY", "MIGRATE: {reply}");
        }
        ok(dst.cli(&["CLUSTER", "SETSLOT", &s, "NODE", &to.id]).await);
        ok(src.cli(&["CLUSTER", "SETSLOT", &s, "NODE", &to.id]).await);
        for p in self.primaries().await {
            if p.port != from.port && p.port != to.port {
                let _ = self
                    .node(p.port)
                    .cli(&["CLUSTER", "SETSLOT", &s, "NODE", &to.id])
                    .await;
            }
        }
        let target = to.port;
        self.wait_until("every node sees the slot moved", |views| {
            views.iter().all(|v| owner_in(v, slot) == Some(target))
        })
        .await;
    }
}

fn owner_in(view: &[NodeInfo], slot: u16) -> Option<u16> {
    view.iter()
        .find(|n| n.primary && !n.failed && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
        .map(|n| n.port)
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
