//! A service as a real child process: started, its stderr collected line by line, and its bound address read from
//! the line it prints once listening. Also a TLS-only `redis-server` with ACL users, for the transport tests.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

/// A running service process (killed when dropped).
pub struct ServiceProcess {
    /// The process.
    pub child: Child,
    /// What followed the first ready prefix on its line (the listening address).
    pub addr: String,
    /// What followed each further ready prefix of [`start_all`] (e.g. the metrics address), in order.
    pub also: Vec<String>,
    lines: Arc<Mutex<Vec<String>>>,
}

/// Starts `cmd` (stderr piped, killed on drop) and waits up to 20 s for a stderr line containing `ready_prefix`.
/// `Err` carries everything the process printed when it exited (or stalled) before that line.
pub async fn start(cmd: Command, ready_prefix: &str) -> Result<ServiceProcess, String> {
    start_all(cmd, &[ready_prefix]).await
}

/// [`start`], waiting for a line containing each of `ready` (at least one), in any order.
pub async fn start_all(mut cmd: Command, ready: &[&str]) -> Result<ServiceProcess, String> {
    let mut child = cmd
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (found_tx, found_rx) = tokio::sync::oneshot::channel();
    let ended = Arc::new(Notify::new());
    let Some(stderr) = child.stderr.take() else {
        return Err("stderr not piped".into());
    };
    let mut reader = BufReader::new(stderr).lines();
    let prefixes: Vec<String> = ready.iter().map(|p| (*p).to_owned()).collect();
    let (collected, done) = (lines.clone(), ended.clone());
    // Keeps draining stderr for the process's whole life, so it never blocks on a full pipe.
    tokio::spawn(async move {
        let mut found_tx = Some(found_tx);
        let mut found: Vec<Option<String>> = vec![None; prefixes.len()];
        while let Ok(Some(line)) = reader.next_line().await {
            for (slot, prefix) in found.iter_mut().zip(&prefixes) {
                if let Some((_, rest)) = line.split_once(prefix.as_str())
                    && slot.is_none()
                {
                    *slot = Some(rest.to_owned());
                }
            }
            if found.iter().all(Option::is_some)
                && let Some(tx) = found_tx.take()
            {
                let _ = tx.send(found.iter().flatten().cloned().collect::<Vec<_>>());
            }
            collected.lock().map(|mut l| l.push(line)).ok();
        }
        done.notify_one();
    });
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::select! {
            found = found_rx => found.ok(),
            () = ended.notified() => None,
        }
    })
    .await;
    match waited {
        Ok(Some(mut found)) if !found.is_empty() => {
            let addr = found.remove(0);
            Ok(ServiceProcess {
                child,
                addr,
                also: found,
                lines,
            })
        }
        _ => {
            let printed = lines.lock().map(|l| l.join("\n")).unwrap_or_default();
            Err(format!("no {ready:?} lines; it printed:\n{printed}"))
        }
    }
}

impl ServiceProcess {
    /// Every stderr line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Polls the caught-signal mask of process `pid` (`/proc/<pid>/status`, Linux) until `signal` (1 = SIGHUP,
/// 15 = SIGTERM, …) is in it: the process has installed its handler, so the signal will not kill it outright.
/// Panics after [`crate::SHORT`].
pub async fn wait_until_caught(pid: u32, signal: u32) {
    let status = format!("/proc/{pid}/status");
    let bit = 1u64 << (signal - 1);
    let deadline = std::time::Instant::now() + crate::SHORT;
    loop {
        let text = std::fs::read_to_string(&status).expect("read the process status");
        let caught = text
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .map(|mask| u64::from_str_radix(mask.trim(), 16).expect("hex signal mask"))
            .expect("SigCgt line");
        if caught & bit != 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "signal {signal} never caught: {text}"
        );
        // A poll: the mask has no notification of its own.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A free loopback port (bound and released; the caller binds it next): see [`bench::procs::free_port`].
pub fn free_port() -> u16 {
    bench::procs::free_port().expect("free port")
}

/// A `redis-server` that speaks only TLS on the returned port, with the server certificate and CA of `pki`, client
/// certificates required (`tls-auth-clients yes`), the default user off and `acl` lines (e.g.
/// `processor on >secret ~* &* +@all`) as its users.
pub async fn tls_redis(
    pki: &service_kit::test_certs::TestPki,
    acl: &[&str],
) -> (ServiceProcess, u16) {
    let port = free_port();
    let mut cmd = Command::new("redis-server");
    cmd.args([
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .args(["--logfile", "/dev/stderr", "--tls-port", &port.to_string()])
    .arg("--tls-cert-file")
    .arg(&pki.server_cert)
    .arg("--tls-key-file")
    .arg(&pki.server_key)
    .arg("--tls-ca-cert-file")
    .arg(&pki.ca)
    .args(["--tls-auth-clients", "yes", "--user", "default", "off"]);
    for user in acl {
        cmd.arg("--user").args(user.split(' '));
    }
    let redis = start(cmd, "Ready to accept connections")
        .await
        .unwrap_or_else(|e| panic!("redis-server with TLS: {e}"));
    (redis, port)
}
