//! The `bash` tool: one `/bin/sh -c` command in the workspace root, confined by the processor's [`Sandbox`]
//! (see [`super::sandbox`] for what the command can see and as whom it runs).
//!
//! Supervision, whatever the confinement: the command (bubblewrap, or the shell itself under `weak`) leads its own
//! process group, and that group is killed with SIGKILL when the command exits, when it runs past its wall time,
//! when its output passes [`BashLimits::output_limit_bytes`], and when the call is dropped (the loop was aborted).
//! Under `namespaces` killing bubblewrap also ends the sandbox's pid namespace, which takes every process of the
//! command with it, even ones that left the group. Two gaps remain, and one sweep closes both: bubblewrap's pid-1
//! process in the namespace leaves the group and relies on dying with its parent, which it cannot arrange when its
//! parent is killed during its first milliseconds of set-up (a timeout or an abort under load); and under `weak` a
//! process can leave the group (`setsid`). So every command carries a marker of its own call in its environment
//! ([`CALL_VAR`], inherited by every process it starts unless one clears its environment), and the kill also kills
//! every process whose environment holds it.
//!
//! Output is read as it comes, keeping the first [`Limits::max_output_bytes`] of each stream and counting the rest,
//! so a chatty command costs neither memory nor a full pipe.
//!
//! [`Sandbox`]: super::sandbox::Sandbox
//! [`BashLimits::output_limit_bytes`]: super::sandbox::BashLimits::output_limit_bytes

use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

use super::sandbox::BashLimits;
use super::{Limits, ToolError, Workspace};

/// The environment variable marking every process of one call (module docs); its value is the call's own id.
pub(crate) const CALL_VAR: &str = "LLM_SANDBOX_CALL";

/// How long to wait for the output pipes to close after the process group was killed. Only a process that left
/// the group (possible under `weak` confinement) can still hold them; past this the output read so far is used.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// Runs the schema-validated `input` (`{command}`).
pub(crate) async fn run(
    ws: &Workspace,
    input: &Value,
    limits: &Limits,
) -> Result<String, ToolError> {
    let Some(command) = input.get("command").and_then(Value::as_str) else {
        return Err(ToolError::Invalid("`command` must be a string".to_owned()));
    };
    let bash = &limits.bash;
    let mut cmd = limits
        .sandbox
        .command(ws.root(), bash, command)
        .await
        .map_err(ToolError::Invalid)?;
    let call = crate::ids::new("call");
    cmd.env(CALL_VAR, &call);
    let mut child = cmd.spawn().map_err(|source| ToolError::Io {
        context: "cannot start the command".to_owned(),
        source,
    })?;
    let group = Group::of(child.id(), format!("{CALL_VAR}={call}"));

    let budget = Arc::new(Budget::new(bash.output_limit_bytes));
    let cap = limits.max_output_bytes;
    let mut stdout_task = tokio::spawn(capture(child.stdout.take(), cap, budget.clone()));
    let mut stderr_task = tokio::spawn(capture(child.stderr.take(), cap, budget.clone()));

    let end = tokio::select! {
        waited = child.wait() => match waited {
            Ok(status) => End::Exited(status),
            Err(source) => {
                return Err(ToolError::Io {
                    context: "waiting for the command failed".to_owned(),
                    source,
                });
            }
        },
        () = tokio::time::sleep(bash.timeout) => End::TimedOut,
        () = budget.exceeded.notified() => End::OutputLimit,
    };
    let end = end.judged(&budget);
    group.kill();
    if !matches!(end, End::Exited(_)) {
        // The group kill already hit it; this covers a missing group id and reaps the process.
        let _ = child.start_kill();
        let _ = child.wait().await;
    }

    let mut pipes_stuck = false;
    let stdout = finish_capture(&mut stdout_task, &mut pipes_stuck).await;
    let stderr = finish_capture(&mut stderr_task, &mut pipes_stuck).await;

    let mut out = match &end {
        End::Exited(status) => describe_exit(*status, bash),
        End::TimedOut => format!(
            "timed out after {}; the command and all its processes were killed\n",
            human_duration(bash.timeout)
        ),
        End::OutputLimit => format!(
            "output limit: the command wrote more than {} bytes and was killed\n",
            bash.output_limit_bytes
        ),
    };
    append_stream(&mut out, "stdout", &stdout);
    append_stream(&mut out, "stderr", &stderr);
    if stdout.total == 0 && stderr.total == 0 {
        out.push_str("(no output)\n");
    }
    if pipes_stuck {
        out.push_str("(a process that left the process group kept the output open; its output was cut off)\n");
    }
    // A kill is a tool error so the model notices; a non-zero exit code is ordinary output it can act on.
    match end {
        End::Exited(_) => Ok(out),
        End::TimedOut | End::OutputLimit => Err(ToolError::Invalid(out)),
    }
}

enum End {
    Exited(ExitStatus),
    TimedOut,
    OutputLimit,
}

impl End {
    /// What ended the command, given what its output did: past the limit the reader stops and drops its pipe, so
    /// the command may die of SIGPIPE (or ignore it and exit) and its exit be seen first; it was the output limit
    /// all the same.
    fn judged(self, budget: &Budget) -> End {
        match self {
            End::Exited(_) if budget.is_exceeded() => End::OutputLimit,
            end => end,
        }
    }
}

/// The command's process group, killed (SIGKILL) on [`Group::kill`] and again when dropped, so an aborted call
/// leaves nothing running; with it every process whose environment holds the call's marker (module docs).
struct Group {
    id: Option<Pid>,
    /// `LLM_SANDBOX_CALL=<call id>`, as it stands in `/proc/<pid>/environ`.
    marker: String,
}

impl Group {
    /// With `process_group(0)` the group id is the child's pid. Pids 0 and 1 would address other processes (the
    /// caller's own group, or everything), so they are never used as a group to kill.
    fn of(pid: Option<u32>, marker: String) -> Group {
        Group {
            id: pid
                .and_then(|id| i32::try_from(id).ok())
                .filter(|id| *id > 1)
                .and_then(Pid::from_raw),
            marker,
        }
    }

    /// Failures are ignored: the usual one is "no such process" (everything already exited).
    fn kill(&self) {
        if let Some(group) = self.id {
            let _ = kill_process_group(group, Signal::KILL);
        }
        for pid in marked(&self.marker) {
            let _ = kill_process(pid, Signal::KILL);
        }
    }
}

/// The processes whose environment holds `marker` as one whole entry. Reading another user's environment needs
/// privilege, which a processor running commands as another user (as root) has.
fn marked(marker: &str) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ
                .split(|b| *b == 0)
                .any(|var| var == marker.as_bytes())
                .then(|| Pid::from_raw(pid))
                .flatten()
        })
        .collect()
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Output read from both streams together, against [`BashLimits::output_limit_bytes`].
struct Budget {
    read: AtomicUsize,
    limit: usize,
    exceeded: Notify,
}

impl Budget {
    fn new(limit: usize) -> Budget {
        Budget {
            read: AtomicUsize::new(0),
            limit,
            exceeded: Notify::new(),
        }
    }

    /// Whether the output passed the limit.
    fn is_exceeded(&self) -> bool {
        self.read.load(Ordering::Relaxed) > self.limit
    }

    /// Counts `n` more bytes; false (and the supervisor told) once the total passes the limit.
    fn take(&self, n: usize) -> bool {
        let total = self.read.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        if total > self.limit {
            self.exceeded.notify_one();
            return false;
        }
        true
    }
}

/// What was read from one output stream.
#[derive(Default)]
struct Captured {
    /// The first bytes, up to the cap.
    kept: Vec<u8>,
    /// Everything read from the stream.
    total: usize,
}

/// Reads a stream until it ends or the budget runs out, keeping the first `cap` bytes and counting the rest.
async fn capture<R: AsyncRead + Unpin>(
    stream: Option<R>,
    cap: usize,
    budget: Arc<Budget>,
) -> Captured {
    let mut captured = Captured::default();
    let Some(mut stream) = stream else {
        return captured;
    };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                captured.total += n;
                let room = cap.saturating_sub(captured.kept.len());
                captured.kept.extend_from_slice(&chunk[..n.min(room)]);
                if !budget.take(n) {
                    break;
                }
            }
        }
    }
    captured
}

async fn finish_capture(
    task: &mut tokio::task::JoinHandle<Captured>,
    stuck: &mut bool,
) -> Captured {
    match tokio::time::timeout(PIPE_GRACE, &mut *task).await {
        Ok(Ok(captured)) => captured,
        Ok(Err(_)) => Captured::default(),
        Err(_) => {
            *stuck = true;
            task.abort();
            Captured::default()
        }
    }
}

/// `exit code: N` (with what a signal death means), or `terminated by signal N` when the shell itself was killed.
/// Under `namespaces` bubblewrap reports a command killed by signal N as exit code 128 + N, as shells do.
fn describe_exit(status: ExitStatus, limits: &BashLimits) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) if (129..=128 + 64).contains(&code) => format!(
            "exit code: {code} (killed by signal {}{})\n",
            code - 128,
            signal_note(code - 128, limits)
        ),
        (Some(code), _) => format!("exit code: {code}\n"),
        (None, Some(signal)) => format!(
            "terminated by signal {signal}{}\n",
            signal_note(signal, limits)
        ),
        (None, None) => "exit status unknown\n".to_owned(),
    }
}

fn signal_note(signal: i32, limits: &BashLimits) -> String {
    match signal {
        9 => ", SIGKILL".to_owned(),
        11 => ", SIGSEGV".to_owned(),
        24 => format!(
            ", SIGXCPU: the CPU time limit of {} s per process",
            limits.cpu_seconds
        ),
        25 => format!(
            ", SIGXFSZ: the file size limit of {} bytes",
            limits.max_file_bytes
        ),
        _ => String::new(),
    }
}

fn append_stream(out: &mut String, name: &str, captured: &Captured) {
    if captured.total == 0 {
        return;
    }
    out.push_str(name);
    out.push_str(":\n");
    out.push_str(&String::from_utf8_lossy(&captured.kept));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if captured.total > captured.kept.len() {
        out.push_str(&format!(
            "[{name} truncated: showing the first {} of {} bytes]\n",
            captured.kept.len(),
            captured.total
        ));
    }
}

fn human_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}
