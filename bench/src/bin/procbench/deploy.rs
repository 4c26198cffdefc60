//! The Redis deployments a run compares (`--redis`): a private standalone node, or a Redis Cluster of 3 primaries
//! started here (`bench::redis_kit`), with or without a replica per primary and the processor's replica wait.

use super::*;
use bench::redis_kit::cluster::{PRIMARIES, RedisCluster};
use redis::aio::MultiplexedConnection;

/// One deployment of `--redis`: `standalone`, `cluster`, `cluster+replicas`, `cluster+replicas+wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Setup {
    /// A Redis Cluster (else one node).
    pub(super) cluster: bool,
    /// One replica per primary.
    pub(super) replicas: bool,
    /// The processor waits for one replica after each acknowledged write (`[redis] wait_replicas = 1`).
    pub(super) wait: bool,
}

impl Setup {
    /// Parses `--redis`: deployments separated by commas, each a mode with `+` options.
    pub(super) fn parse_list(list: &str) -> Result<Vec<Setup>, String> {
        let setups = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Setup::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if setups.is_empty() {
            return Err("no deployment named".into());
        }
        Ok(setups)
    }

    fn parse(spec: &str) -> Result<Setup, String> {
        let mut words = spec.split('+');
        let cluster = match words.next() {
            Some("standalone") => false,
            Some("cluster") => true,
            _ => return Err(format!("{spec:?}: starts with standalone or cluster")),
        };
        let mut setup = Setup {
            cluster,
            replicas: false,
            wait: false,
        };
        for word in words {
            match word {
                "replicas" if cluster => setup.replicas = true,
                "wait" if setup.replicas => setup.wait = true,
                _ => {
                    return Err(format!(
                        "{spec:?}: options are cluster+replicas and cluster+replicas+wait"
                    ));
                }
            }
        }
        Ok(setup)
    }

    /// As `--redis` spells it.
    pub(super) fn name(&self) -> String {
        let mut name = String::from(if self.cluster {
            "cluster"
        } else {
            "standalone"
        });
        if self.replicas {
            name.push_str("+replicas");
        }
        if self.wait {
            name.push_str("+wait");
        }
        name
    }
}

/// The Redis a setup measures: its servers, the processor's `[redis]` lines for it, and what the report reads.
pub(super) struct RedisUnderTest {
    /// The private `redis-server` (killed when dropped); `None` for a cluster or `--redis-url`.
    _node: Option<Child>,
    /// The private cluster (its nodes killed when dropped).
    _cluster: Option<RedisCluster>,
    /// The nodes whose commands the processor's requests caused (the primaries: a replica applies them again).
    primaries: Vec<MultiplexedConnection>,
    /// Every node's process (CPU and RSS are summed over them); empty for an external Redis.
    pub(super) pids: Vec<u32>,
    /// `redis.url` (and `REDIS_URL`): the node, or the cluster's seeds.
    pub(super) url: String,
    /// The processor's `[redis]` lines besides the URL and prefix.
    pub(super) config_lines: String,
    /// For the report.
    pub(super) description: String,
}

impl RedisUnderTest {
    /// Starts (or, with `--redis-url`, connects to) the setup's Redis.
    pub(super) async fn start(setup: Setup, args: &Args, dir: &Path) -> RedisUnderTest {
        let persistence = if args.aof {
            "AOF on (appendfsync everysec)"
        } else {
            "no persistence"
        };
        if setup.cluster {
            return Self::start_cluster(setup, args, persistence).await;
        }
        let (child, url) = match &args.redis_url {
            Some(url) => (None, url.clone()),
            None => {
                let (child, url) = start_redis(&args.redis_server, args.aof, dir).await;
                (Some(child), url)
            }
        };
        let mut node = connect_node(&url).await;
        let version = version(&mut node).await;
        let (pids, description) = match &child {
            Some(child) => (
                child.id().into_iter().collect(),
                format!("private redis-server {version} on {url}, {persistence}"),
            ),
            None => (
                Vec::new(),
                format!("external Redis {version} at {url} (command counts include other clients)"),
            ),
        };
        RedisUnderTest {
            _node: child,
            _cluster: None,
            primaries: vec![node],
            pids,
            url,
            config_lines: "mode = \"standalone\"".into(),
            description,
        }
    }

    async fn start_cluster(setup: Setup, args: &Args, persistence: &str) -> RedisUnderTest {
        let aof: &[&str] = if args.aof {
            &["--appendonly", "yes", "--appendfsync", "everysec"]
        } else {
            &["--appendonly", "no"]
        };
        let replicas = usize::from(setup.replicas);
        let cluster = RedisCluster::start_shaped(replicas, aof).await;
        let mut primaries = Vec::new();
        for p in cluster.primaries().await {
            primaries.push(connect_node(&format!("redis://127.0.0.1:{}", p.port)).await);
        }
        let version = version(&mut primaries[0]).await;
        let mut config_lines = String::from("mode = \"cluster\"");
        let mut wait = String::new();
        if setup.wait {
            config_lines.push_str(&format!(
                "\nwait_replicas = 1\nwait_timeout_ms = {}",
                args.wait_timeout_ms
            ));
            wait = format!(
                "; the processor waits for 1 replica after each acknowledged write (WAIT, {} ms timeout)",
                args.wait_timeout_ms
            );
        }
        let description = format!(
            "private Redis Cluster {version}: {PRIMARIES} primaries{} on loopback, {persistence}{wait}",
            if setup.replicas {
                format!(" and {} replicas", PRIMARIES * replicas)
            } else {
                String::new()
            }
        );
        RedisUnderTest {
            pids: cluster.nodes.iter().filter_map(|n| n.pid()).collect(),
            url: cluster.seeds(),
            _node: None,
            _cluster: Some(cluster),
            primaries,
            config_lines,
            description,
        }
    }

    /// `INFO commandstats` summed over the primaries.
    pub(super) async fn command_stats(&mut self) -> CommandStats {
        let mut sum = CommandStats::default();
        for node in &mut self.primaries {
            sum.add(
                &redisinfo::command_stats(node)
                    .await
                    .expect("INFO commandstats"),
            );
        }
        sum
    }
}

async fn connect_node(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("connect to Redis at {url}: {e}"))
}

async fn version(conn: &mut MultiplexedConnection) -> String {
    redisinfo::info_section(conn, "server")
        .await
        .ok()
        .and_then(|t| redisinfo::info_field(&t, "redis_version").map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}
