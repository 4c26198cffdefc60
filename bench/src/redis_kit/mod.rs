//! Private `redis-server`s (Debian's) on loopback, shared by the end-to-end tests (`e2e_tests::procs`,
//! `e2e_tests::cluster`) and `procbench`: one node on a free port with AOF on, that a test can kill, stop, restart
//! and make refuse writes; with extra arguments, a cluster node or a replica; or a sentinel. [`cluster`] builds a
//! Redis Cluster from them, [`sentinels`] a Sentinel-managed primary.
//!
//! Test and benchmark kit: a broken set-up (no `redis-server`, a cluster that never becomes healthy) should stop the
//! test or the run loudly, hence `expect` and `assert`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

pub mod cluster;
pub mod sentinels;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::procs::free_port;

/// A private `redis-server` with AOF (`appendfsync always`: every acknowledged write is on disk) in a temporary
/// directory, on a fixed port so it can be restarted where clients reconnect.
pub struct RedisServer {
    /// Its port.
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Arguments after the defaults (later ones win), e.g. `--cluster-enabled yes`.
    extra: Vec<String>,
    /// A sentinel runs from this configuration file (which it rewrites) instead of the defaults.
    sentinel_conf: Option<PathBuf>,
}

/// Why a `redis-server` did not come up.
#[derive(Debug)]
enum Launch {
    /// It exited before answering (typically: its port was taken).
    Exited(std::process::ExitStatus),
    /// It did not answer within 20 s.
    Silent,
}

impl std::fmt::Display for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Launch::Exited(status) => write!(f, "exited before answering ({status})"),
            Launch::Silent => f.write_str("does not answer within 20 s"),
        }
    }
}

impl RedisServer {
    /// Starts one and waits until it answers.
    pub async fn start() -> RedisServer {
        Self::start_with(Vec::new).await
    }

    /// Starts one on a free port, with the arguments `extra` gives after the defaults, and waits until it answers.
    /// `free_port` only finds a port free at the moment it looks, so another test may take it (or a port `extra`
    /// chose, such as a cluster bus port) before the server binds it: a server that exits before answering is
    /// started again on fresh ports.
    pub async fn start_with(extra: impl Fn() -> Vec<String>) -> RedisServer {
        let mut attempt = 1;
        loop {
            let mut r = RedisServer {
                port: free_port().expect("a free port"),
                dir: tempfile::tempdir().expect("tempdir"),
                child: None,
                extra: extra(),
                sentinel_conf: None,
            };
            match r.try_launch().await {
                Ok(()) => return r,
                Err(Launch::Exited(status)) if attempt < 5 => {
                    eprintln!(
                        "redis-server on port {} exited at start ({status}); again on fresh ports",
                        r.port
                    );
                    attempt += 1;
                }
                Err(e) => panic!("redis-server on port {}: {e}", r.port),
            }
        }
    }

    /// Starts a sentinel on `port` whose configuration file holds `conf` (after the `port` line).
    pub async fn start_sentinel(port: u16, conf: &str) -> RedisServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sentinel.conf");
        std::fs::write(&path, format!("port {port}\nbind 127.0.0.1\n{conf}"))
            .expect("sentinel conf");
        let mut r = RedisServer {
            port,
            dir,
            child: None,
            extra: Vec::new(),
            sentinel_conf: Some(path),
        };
        r.launch().await;
        r
    }

    /// Its process id while it runs (for its CPU and memory).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The URLs of `servers`, comma-separated: the processor's `redis.url` for a cluster's seeds or sentinels.
    pub fn urls(servers: &[RedisServer]) -> String {
        servers
            .iter()
            .map(RedisServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    async fn launch(&mut self) {
        if let Err(e) = self.try_launch().await {
            panic!("redis-server on port {}: {e}", self.port);
        }
    }

    /// Starts the process and waits until it answers `PING`.
    async fn try_launch(&mut self) -> Result<(), Launch> {
        let mut command = Command::new("redis-server");
        if let Some(conf) = &self.sentinel_conf {
            command.arg(conf).arg("--sentinel");
        } else {
            command
                .args(["--bind", "127.0.0.1", "--port"])
                .arg(self.port.to_string())
                .arg("--dir")
                .arg(self.dir())
                .args([
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                ])
                .args(&self.extra);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server (Debian package redis-server) must be installed");
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.cli(&["PING"]).await.as_deref() != Some("PONG") {
            if let Ok(Some(status)) = self.child.as_mut().map_or(Ok(None), |c| c.try_wait()) {
                return Err(Launch::Exited(status));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Launch::Silent);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Runs `redis-cli` against it; its trimmed output, `None` when it failed.
    pub async fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .await
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// SIGKILL: whatever was acknowledged is in the AOF; nothing else is flushed.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// SIGTERM: Redis finishes the AOF and exits.
    pub async fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Some(pid) = c.id() {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
            let _ = tokio::time::timeout(Duration::from_secs(20), c.wait()).await;
        }
    }

    /// Starts it again on the same port and directory (it loads its AOF).
    pub async fn restart(&mut self) {
        self.launch().await;
    }

    /// Refuses every write (`maxmemory` far below what is used, no eviction) until [`RedisServer::accept_writes`].
    pub async fn refuse_writes(&self) {
        self.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
            .await
            .expect("config set");
        self.cli(&["CONFIG", "SET", "maxmemory", "1"])
            .await
            .expect("config set");
    }

    /// Accepts writes again.
    pub async fn accept_writes(&self) {
        self.cli(&["CONFIG", "SET", "maxmemory", "0"])
            .await
            .expect("config set");
    }
}
