//! The `bash` tool: one `/bin/sh -c` command in the workspace root.
//!
//! Confinement is by working directory and environment only: the command can reach anything the processor's user
//! can. That is why the default permission rules deny it; untrusted commands need a real sandbox.
//!
//! The shell runs as the leader of its own process group, and the whole group is killed with SIGKILL when the
//! command times out and again when the shell exits, so neither a hung pipeline nor a stray background job
//! outlives the call (a background job would also keep the output pipes open and stall the read).

use std::process::Stdio;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::{Limits, ToolError, Workspace};

/// How long to wait for the output pipes to close after the process group was killed. Only a process that left
/// the group (setsid) can still hold them; past this the output read so far is used.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// PATH for the command when the processor itself has none.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Runs the schema-validated `input` (`{command}`).
pub(crate) async fn run(
    ws: &Workspace,
    input: &Value,
    limits: &Limits,
) -> Result<String, ToolError> {
    let Some(command) = input.get("command").and_then(Value::as_str) else {
        return Err(ToolError::Invalid("`command` must be a string".to_owned()));
    };
    let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
    let lang = std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into());
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .current_dir(ws.root())
        // Cleared so the processor's secrets (API keys, Redis URLs) are not handed to model-written commands.
        .env_clear()
        .env("PATH", path)
        .env("HOME", ws.root())
        .env("LANG", lang)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ToolError::Io {
            context: "cannot start /bin/sh".to_owned(),
            source,
        })?;
    // With process_group(0) the group id is the child's pid. Pids 0 and 1 would address other processes
    // (the caller's own group, or everything), so they are never used as a group to kill.
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .filter(|id| *id > 1)
        .and_then(Pid::from_raw);

    let cap = limits.max_output_bytes;
    let mut stdout_task = tokio::spawn(capture(child.stdout.take(), cap));
    let mut stderr_task = tokio::spawn(capture(child.stderr.take(), cap));

    let waited = tokio::time::timeout(limits.bash_timeout, child.wait()).await;
    kill_group(group);
    let status = match waited {
        Ok(Ok(status)) => Some(status),
        Ok(Err(source)) => {
            return Err(ToolError::Io {
                context: "waiting for the command failed".to_owned(),
                source,
            });
        }
        Err(_elapsed) => {
            // The group kill above already hit the shell; this covers a missing group id and reaps the shell.
            let _ = child.start_kill();
            let _ = child.wait().await;
            None
        }
    };

    let mut pipes_stuck = false;
    let stdout = finish_capture(&mut stdout_task, &mut pipes_stuck).await;
    let stderr = finish_capture(&mut stderr_task, &mut pipes_stuck).await;

    let mut out = match status {
        Some(status) => match (
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ) {
            (Some(code), _) => format!("exit code: {code}\n"),
            (None, Some(signal)) => format!("terminated by signal {signal}\n"),
            (None, None) => "exit status unknown\n".to_owned(),
        },
        None => format!(
            "timed out after {}; the command and its process group were killed\n",
            human_duration(limits.bash_timeout)
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
    // A timeout is a tool error so the model notices; a non-zero exit code is ordinary output it can act on.
    if status.is_none() {
        return Err(ToolError::Invalid(out));
    }
    Ok(out)
}

/// SIGKILL to the whole group; failures are ignored because the usual one is "no such process" (everything
/// already exited).
fn kill_group(group: Option<Pid>) {
    if let Some(group) = group {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

/// What was read from one output stream.
#[derive(Default)]
struct Captured {
    /// The first bytes, up to the cap.
    kept: Vec<u8>,
    /// Everything the stream produced.
    total: usize,
}

/// Reads a stream to its end, keeping the first `cap` bytes and counting (but draining) the rest, so a chatty
/// command never blocks on a full pipe.
async fn capture<R: AsyncRead + Unpin>(stream: Option<R>, cap: usize) -> Captured {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Instant;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("ws")).unwrap();
        (dir, ws)
    }

    async fn sh(ws: &Workspace, command: &str, limits: &Limits) -> Result<String, ToolError> {
        run(ws, &json!({ "command": command }), limits).await
    }

    #[tokio::test]
    async fn runs_in_the_workspace_root() {
        let (_d, ws) = ws();
        let out = sh(&ws, "pwd; echo oops >&2; exit 3", &Limits::default())
            .await
            .unwrap();
        let root = ws.root().display();
        assert_eq!(
            out,
            format!("exit code: 3\nstdout:\n{root}\nstderr:\noops\n")
        );
    }

    #[tokio::test]
    async fn environment_is_cleared() {
        let (_d, ws) = ws();
        let out = sh(&ws, "env", &Limits::default()).await.unwrap();
        let names: Vec<&str> = out
            .lines()
            .skip(2)
            .filter_map(|line| line.split_once('=').map(|(name, _)| name))
            .collect();
        // What sh itself adds (PWD, SHLVL, OLDPWD, `_`) is fine; nothing from the processor may leak through.
        for name in &names {
            assert!(
                ["PATH", "HOME", "LANG", "PWD", "OLDPWD", "SHLVL", "_"].contains(name),
                "unexpected variable {name} in {out}"
            );
        }
        assert!(
            out.contains(&format!("HOME={}", ws.root().display())),
            "{out}"
        );
        assert!(names.contains(&"PATH"));
    }

    #[tokio::test]
    async fn stdin_is_empty() {
        let (_d, ws) = ws();
        let out = sh(&ws, "cat; echo done", &Limits::default()).await.unwrap();
        assert_eq!(out, "exit code: 0\nstdout:\ndone\n");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let (_d, ws) = ws();
        let limits = Limits {
            bash_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let started = Instant::now();
        // The subshell and the backgrounded sleep are separate processes in the group; all must die for the pipes
        // to close this quickly.
        let err = sh(&ws, "echo started; (sleep 5; echo late) & sleep 5", &limits)
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        let message = err.to_string();
        assert!(message.starts_with("timed out after 0.3 s"), "{message}");
        assert!(message.contains("started"), "{message}");
        assert!(!message.contains("late"), "{message}");
    }

    #[tokio::test]
    async fn background_jobs_do_not_outlive_the_call() {
        let (_d, ws) = ws();
        let started = Instant::now();
        let out = sh(&ws, "sleep 5 & echo quick", &Limits::default())
            .await
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(out, "exit code: 0\nstdout:\nquick\n");
    }

    #[tokio::test]
    async fn output_is_truncated() {
        let (_d, ws) = ws();
        let limits = Limits {
            max_output_bytes: 100,
            ..Limits::default()
        };
        let out = sh(&ws, "head -c 5000 /dev/zero | tr '\\0' a", &limits)
            .await
            .unwrap();
        assert!(
            out.contains("[stdout truncated: showing the first 100 of 5000 bytes]"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn silent_commands_say_so() {
        let (_d, ws) = ws();
        assert_eq!(
            sh(&ws, "true", &Limits::default()).await.unwrap(),
            "exit code: 0\n(no output)\n"
        );
    }
}
