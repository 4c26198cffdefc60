//! A primary with one replica watched by 3 sentinels, started from Debian's `redis-server` on loopback for the
//! Sentinel tests. Every wait polls the servers' own view (`SENTINEL MASTER`, `SENTINEL GET-MASTER-ADDR-BY-NAME`,
//! `ROLE`) until it shows the expected state, within [`SETTLE`].

use std::time::Duration;

use tokio::time::Instant;

use super::RedisServer;
use super::cluster::SETTLE;
use crate::procs::free_port;

/// A primary, its replica, and 3 sentinels monitoring them as `main` (quorum 2, down after 1 s).
pub struct Sentinels {
    /// The data nodes: the first began as the primary.
    pub data: Vec<RedisServer>,
    /// The sentinels.
    pub sentinels: Vec<RedisServer>,
}

/// The name the test sentinels monitor the primary under.
pub const SENTINEL_MASTER: &str = "main";

impl Sentinels {
    /// Starts the primary, the replica (waiting until it is in sync) and the sentinels (waiting until each knows
    /// the replica and the other sentinels).
    pub async fn start() -> Sentinels {
        let primary = RedisServer::start_with(|| {
            [
                "--appendfsync",
                "everysec",
                "--repl-diskless-sync-delay",
                "0",
            ]
            .map(String::from)
            .to_vec()
        })
        .await;
        let p = primary.port.to_string();
        let replica = RedisServer::start_with(|| {
            ["--appendfsync", "everysec", "--replicaof", "127.0.0.1", &p]
                .map(String::from)
                .to_vec()
        })
        .await;
        let deadline = Instant::now() + SETTLE;
        while !replica
            .cli(&["INFO", "replication"])
            .await
            .is_some_and(|i| i.contains("master_link_status:up"))
        {
            assert!(
                Instant::now() < deadline,
                "the replica syncs within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let conf = format!(
            "sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {p} 2\n\
             sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
             sentinel failover-timeout {SENTINEL_MASTER} 10000\n"
        );
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            let port = free_port().expect("a free port");
            sentinels.push(RedisServer::start_sentinel(port, &conf).await);
        }
        let s = Sentinels {
            data: vec![primary, replica],
            sentinels,
        };
        let deadline = Instant::now() + SETTLE;
        loop {
            let mut ready = true;
            for sentinel in &s.sentinels {
                let info = sentinel
                    .cli(&["SENTINEL", "MASTER", SENTINEL_MASTER])
                    .await
                    .unwrap_or_default();
                let field = |name: &str| {
                    let mut lines = info.lines();
                    lines
                        .find(|l| *l == name)
                        .and_then(|_| lines.next())
                        .map(str::to_owned)
                };
                ready &= field("num-slaves").as_deref() == Some("1")
                    && field("num-other-sentinels").as_deref() == Some("2");
            }
            if ready {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels see each other within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The sentinels' URLs, comma-separated (the processor's `redis.url` in sentinel mode).
    pub fn urls(&self) -> String {
        RedisServer::urls(&self.sentinels)
    }

    /// The port every sentinel names as the primary, once they agree.
    pub async fn primary_port(&self) -> Option<u16> {
        let mut ports = Vec::new();
        for s in &self.sentinels {
            let reply = s
                .cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER])
                .await?;
            ports.push(reply.lines().nth(1)?.trim().parse::<u16>().ok()?);
        }
        ports.windows(2).all(|w| w[0] == w[1]).then(|| ports[0])
    }

    /// SIGKILLs the primary and waits until every sentinel names the replica, and the replica says it is the
    /// primary. Returns the new primary's port.
    pub async fn kill_primary(&mut self) -> u16 {
        let old = self
            .primary_port()
            .await
            .expect("the sentinels agree on the primary");
        let node = self
            .data
            .iter_mut()
            .find(|n| n.port == old)
            .expect("primary");
        node.kill().await;
        let deadline = Instant::now() + SETTLE;
        loop {
            if let Some(new) = self.primary_port().await
                && new != old
                && let Some(n) = self.data.iter().find(|n| n.port == new)
                && n.cli(&["ROLE"])
                    .await
                    .is_some_and(|r| r.starts_with("master"))
            {
                return new;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels fail over within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
