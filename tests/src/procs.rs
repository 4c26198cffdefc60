//! Real processes for fault tests: a service binary started and read until it says where it listens, and a private
//! `redis-server` (Debian's) on a free loopback port with AOF on, that a test can kill, stop, restart and make refuse
//! writes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A free loopback port (bound, read, released: another process could take it in between, which on a test machine
/// does not happen in practice).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts `bin <config>` with `envs`, waits (20 s at most) for the stderr line starting with `ready` and returns
/// the child and the rest of that line (its address). Keeps draining stderr so the child never blocks on it.
pub async fn spawn_service(
    bin: &str,
    config: &Path,
    envs: &[(&str, String)],
    ready: &str,
) -> (Child, String) {
    let mut cmd = Command::new(bin);
    cmd.arg(config).stderr(Stdio::piped()).kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn service");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let addr = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let line = lines
                .next_line()
                .await
                .expect("read stderr")
                .expect("service exited before listening");
            if let Some(a) = line.strip_prefix(ready) {
                return a.to_string();
            }
        }
    })
    .await
    .expect("service starts within 20 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// A private `redis-server` with AOF (`appendfsync always`: every acknowledged write is on disk) in a temporary
/// directory, on a fixed port so it can be restarted where clients reconnect.
pub struct RedisServer {
    /// Its port.
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one and waits until it answers.
    pub async fn start() -> RedisServer {
        let mut r = RedisServer {
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            child: None,
        };
        r.launch().await;
        r
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    async fn launch(&mut self) {
        let child = Command::new("redis-server")
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server (Debian package redis-server) must be installed");
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.cli(&["PING"]).await.as_deref() != Some("PONG") {
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server answers within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
