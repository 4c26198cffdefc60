//! Where and as whom a `bash` command runs: the sandbox settings, the start-up probe, and the command line of one
//! confined command.
//!
//! Two confinements (`[tools.bash] confinement`):
//! - `namespaces` (the default): bubblewrap (`bwrap`, Debian package `bubblewrap`) builds a user, pid, mount, IPC,
//!   UTS and (unless the agent allows network) network namespace per command. The command sees the host's `/usr`
//!   and a few `/etc` files read-only ([`args::ETC_FILES`]), a private `/tmp`, `/dev` and `/proc`, and its own
//!   workspace read-write, nothing else: no other workspace, no processor configuration, no `/etc/shadow`. When the
//!   processor runs as root, bubblewrap itself is started as the unprivileged [`SandboxSettings::uid`], so the
//!   command has no privilege on the host even if it escapes the mount namespace; otherwise it runs as the
//!   processor's own (unprivileged) user.
//! - `weak`: no namespaces. The command still runs as [`SandboxSettings::uid`] when the processor is root, with the
//!   same resource limits and a scrubbed environment, but it sees the whole file system that user can read and the
//!   network. Only for hosts whose kernel refuses namespaces, and only when the operator accepts that.
//!
//! Either way every process gets the hard resource limits of [`BashLimits`] (through util-linux `prlimit`), and the
//! environment is cleared down to `PATH`, `HOME`, `LANG` (and `TMPDIR`).
//!
//! At start-up [`Sandbox::ready`] runs a trivial command through exactly this machinery. If that fails (no `bwrap`,
//! or a kernel or container that refuses the namespaces), `bash` is disabled and says why; it never falls back to a
//! weaker confinement by itself.

pub mod args;
pub mod ownership;

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

pub use ownership::Owner;

/// How strongly `bash` is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Confinement {
    /// Linux namespaces through bubblewrap; `bash` is disabled where they are unavailable.
    #[default]
    Namespaces,
    /// No namespaces: uid, resource limits and environment only. Explicitly accepted by the operator.
    Weak,
}

/// Process-wide sandbox settings (`[tools.bash]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Namespaces or weak.
    pub confinement: Confinement,
    /// The bubblewrap program, looked up in [`SandboxSettings::path`] unless absolute. Default `bwrap`.
    pub bwrap: PathBuf,
    /// The user commands run as when the processor runs as root. Default 64000; never 0.
    pub uid: u32,
    /// The group commands run as when the processor runs as root. Default 64000; never 0.
    pub gid: u32,
    /// Further host paths mounted read-only at the same place (toolchains under `/opt`, say).
    pub ro_paths: Vec<PathBuf>,
    /// `PATH` of the command (and where `bwrap` and `prlimit` are found).
    pub path: String,
}

/// Default sandbox uid and gid.
pub const DEFAULT_SANDBOX_ID: u32 = 64000;

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            confinement: Confinement::Namespaces,
            bwrap: PathBuf::from("bwrap"),
            uid: DEFAULT_SANDBOX_ID,
            gid: DEFAULT_SANDBOX_ID,
            ro_paths: Vec::new(),
            path: "/usr/local/bin:/usr/bin:/bin".to_owned(),
        }
    }
}

/// What one `bash` command may use (`[tools.bash]`, overridden per agent by `[agents.<name>.bash]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashLimits {
    /// Wall time before the whole command is killed. Default 60 s.
    pub timeout: Duration,
    /// CPU seconds per process (`RLIMIT_CPU`). Default 60.
    pub cpu_seconds: u64,
    /// Heap and other private writable memory per process, in bytes (`RLIMIT_DATA`). Default 2 GiB.
    pub memory_bytes: u64,
    /// Processes (and threads) the command may have at once (`RLIMIT_NPROC`; per command under `namespaces`, shared
    /// by every command of the sandbox user under `weak`). Default 256.
    pub max_processes: u64,
    /// Largest file a process may write, in bytes (`RLIMIT_FSIZE`). Default 1 GiB.
    pub max_file_bytes: u64,
    /// Size of the private `/tmp` (memory-backed), in bytes. Default 64 MiB.
    pub tmp_bytes: u64,
    /// Output (stdout and stderr together) read before the command is killed. Default 8 MiB; the model sees at most
    /// the tool output limit of it.
    pub output_limit_bytes: usize,
    /// Whether the command may use the network (under `namespaces`; `weak` cannot take it away). Default false.
    pub network: bool,
}

impl Default for BashLimits {
    fn default() -> Self {
        BashLimits {
            timeout: Duration::from_secs(60),
            cpu_seconds: 60,
            memory_bytes: 2 << 30,
            max_processes: 256,
            max_file_bytes: 1 << 30,
            tmp_bytes: 64 << 20,
            output_limit_bytes: 8 << 20,
            network: false,
        }
    }
}

/// Whether the probe found the sandbox usable, and as whom commands run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// The confinement in force.
    pub confinement: Confinement,
    /// The user and group commands are switched to (the processor is root); `None`: the processor's own.
    pub switch_to: Option<Owner>,
}

impl Ready {
    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        let who = match self.switch_to {
            Some(o) => format!("as uid {} gid {}", o.uid, o.gid),
            None => format!(
                "as the processor's own uid {} (switching to another user needs root)",
                rustix::process::geteuid().as_raw()
            ),
        };
        match self.confinement {
            Confinement::Namespaces => format!(
                "bash runs in Linux namespaces (bubblewrap) {who}, with only its workspace writable"
            ),
            Confinement::Weak => format!(
                "bash runs with WEAK confinement (tools.bash.confinement = \"weak\") {who}: no file system, process \
                 or network isolation, only resource limits and a scrubbed environment"
            ),
        }
    }
}

/// The sandbox of one processor: its settings and, once probed, whether it works.
#[derive(Debug)]
pub struct Sandbox {
    settings: SandboxSettings,
    ready: tokio::sync::OnceCell<Result<Ready, String>>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new(SandboxSettings::default())
    }
}

/// How long the start-up probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

impl Sandbox {
    /// A sandbox with `settings`, probed on first use.
    pub fn new(settings: SandboxSettings) -> Sandbox {
        Sandbox {
            settings,
            ready: tokio::sync::OnceCell::new(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// Probes the sandbox once (later calls return the first answer): a trivial command run exactly as `bash` runs
    /// one. `Err` says why `bash` cannot run.
    pub async fn ready(&self) -> Result<&Ready, &str> {
        self.ready
            .get_or_init(|| probe(&self.settings))
            .await
            .as_ref()
            .map_err(String::as_str)
    }

    /// The command that runs `command` in `workspace` under `limits`: probed sandbox, workspace handed to the
    /// sandbox user (see [`ownership`]), the full command line, a cleared environment, null stdin and piped output.
    pub async fn command(
        &self,
        workspace: &Path,
        limits: &BashLimits,
        command: &str,
    ) -> Result<Command, String> {
        let ready = self
            .ready()
            .await
            .map_err(|why| format!("bash is disabled on this processor: {why}"))?;
        if let Some(owner) = ready.switch_to {
            unreachable_for(workspace, owner).map_or(Ok(()), Err)?;
            let root = workspace.to_path_buf();
            tokio::task::spawn_blocking(move || ownership::hand_over(&root, owner))
                .await
                .map_err(|e| format!("preparing the workspace stopped: {e}"))?
                .map_err(|e| {
                    format!(
                        "cannot give the workspace to the sandbox user {}: {e}",
                        owner.uid
                    )
                })?;
        }
        Ok(build(
            &self.settings,
            ready.confinement,
            ready.switch_to,
            limits,
            Some(workspace),
            command,
        ))
    }
}

/// The full command for `command` (see the module docs), not yet spawned.
fn build(
    settings: &SandboxSettings,
    confinement: Confinement,
    switch_to: Option<Owner>,
    limits: &BashLimits,
    workspace: Option<&Path>,
    command: &str,
) -> Command {
    let limited = args::prlimit(limits, &args::shell(command));
    let mut cmd = match confinement {
        Confinement::Namespaces => {
            let mut inner = vec![OsString::from("prlimit")];
            inner.extend(limited);
            let mut cmd = Command::new(&settings.bwrap);
            // bwrap starts as the sandbox user, who may not be able to enter the processor's own directory.
            cmd.args(args::bwrap(settings, limits, workspace, &inner))
                .current_dir("/");
            cmd
        }
        Confinement::Weak => {
            let mut cmd = Command::new("prlimit");
            cmd.args(limited);
            if let Some(ws) = workspace {
                cmd.current_dir(ws);
            }
            cmd
        }
    };
    let lang = std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into());
    // Cleared so the processor's secrets (API keys, Redis URLs, tokens) never reach model-written commands.
    cmd.env_clear()
        .env("PATH", &settings.path)
        .env("HOME", workspace.unwrap_or(Path::new("/")))
        .env("LANG", lang);
    if confinement == Confinement::Namespaces {
        cmd.env("TMPDIR", "/tmp");
    }
    if let Some(owner) = switch_to {
        // std drops every supplementary group when a root parent switches uid.
        cmd.uid(owner.uid).gid(owner.gid);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

async fn probe(settings: &SandboxSettings) -> Result<Ready, String> {
    let switch_to = rustix::process::geteuid().is_root().then_some(Owner {
        uid: settings.uid,
        gid: settings.gid,
    });
    let limits = BashLimits::default();
    let mut cmd = build(
        settings,
        settings.confinement,
        switch_to,
        &limits,
        None,
        "exit 0",
    );
    cmd.stdout(Stdio::null());
    let program = match settings.confinement {
        Confinement::Namespaces => settings.bwrap.display().to_string(),
        Confinement::Weak => "prlimit".to_owned(),
    };
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound if settings.confinement == Confinement::Namespaces => format!(
            "`{program}` was not found in {} (install bubblewrap: Debian package `bubblewrap`)",
            settings.path
        ),
        _ => format!("cannot start `{program}`: {e}"),
    })?;
    let mut stderr = String::new();
    let finished = tokio::time::timeout(PROBE_TIMEOUT, async {
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr).await;
        }
        child.wait().await
    })
    .await;
    let status = match finished {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(format!("waiting for `{program}` failed: {e}")),
        Err(_) => {
            return Err(format!(
                "`{program}` did not finish within {PROBE_TIMEOUT:?}"
            ));
        }
    };
    if !status.success() {
        let detail = stderr.trim();
        let hint = match settings.confinement {
            Confinement::Namespaces => {
                "; the kernel or container refuses the namespaces bubblewrap needs (unprivileged user namespaces, \
                 or CAP_SYS_ADMIN in a container)"
            }
            Confinement::Weak => "",
        };
        return Err(format!(
            "a trivial command through `{program}` failed ({status}): {}{hint}",
            if detail.is_empty() {
                "no message"
            } else {
                detail
            }
        ));
    }
    Ok(Ready {
        confinement: settings.confinement,
        switch_to,
    })
}

/// Why `owner` cannot reach `path` (every directory above it needs search permission for that user, who has no
/// supplementary groups), or `None` when it can.
pub fn unreachable_for(path: &Path, owner: Owner) -> Option<String> {
    let mut dirs: Vec<&Path> = path.ancestors().skip(1).collect();
    dirs.reverse();
    for dir in dirs {
        match std::fs::metadata(dir) {
            Ok(meta) if may_search(meta.mode(), meta.uid(), meta.gid(), owner) => {}
            Ok(_) => {
                return Some(format!(
                    "the sandbox user (uid {}) cannot reach the workspace: {} does not let it in (it needs search \
                     permission, e.g. `chmod o+x {}`)",
                    owner.uid,
                    dir.display(),
                    dir.display()
                ));
            }
            Err(e) => {
                return Some(format!(
                    "cannot check the workspace path at {}: {e}",
                    dir.display()
                ));
            }
        }
    }
    None
}

/// Whether a user with only `owner`'s uid and gid may search a directory with `mode`, `uid` and `gid`.
fn may_search(mode: u32, uid: u32, gid: u32, owner: Owner) -> bool {
    let bit = if uid == owner.uid {
        0o100
    } else if gid == owner.gid {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
