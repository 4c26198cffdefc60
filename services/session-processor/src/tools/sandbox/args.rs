//! The command lines that run one confined `bash` command: pure functions of the settings, the limits and the
//! workspace, so what the sandbox allows can be read (and tested) without running anything.

use std::ffi::OsString;
use std::path::Path;

use super::{BashLimits, SandboxSettings};

/// Host directories of programs and libraries, mounted read-only. `/usr` must exist; the others are mounted when
/// present (on merged-/usr systems they are symbolic links into `/usr`, and the mount follows them).
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Files under `/etc` that programs need to start, resolve names and verify certificates, mounted read-only when
/// present. Nothing else of `/etc` is visible (no `shadow`, no service configuration).
pub(crate) const ETC_FILES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/localtime",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
];

/// Host name inside the sandbox.
const HOSTNAME: &str = "sandbox";

/// `bwrap` arguments that build the sandbox for `limits`, with `workspace` mounted read-write at its own path and
/// made the working directory (`None`: no workspace, working directory `/`, as the start-up probe runs), followed by
/// `command`.
///
/// Namespaces: user (the command is an unprivileged user with no capabilities outside), pid (it sees only its own
/// processes, and when the sandbox's first process dies the kernel kills every other one), mount (the file system is
/// only what is listed here), IPC, UTS, cgroup when the kernel has it, and network unless `limits.network` (an empty
/// namespace with only a loopback device of its own). The command cannot create further user namespaces, runs in a
/// new session (no controlling terminal), and dies with the processor.
pub fn bwrap(
    settings: &SandboxSettings,
    limits: &BashLimits,
    workspace: Option<&Path>,
    command: &[OsString],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |parts: &[&str]| args.extend(parts.iter().map(OsString::from));
    push(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        HOSTNAME,
    ]);
    if !limits.network {
        push(&["--unshare-net"]);
    }
    push(&["--ro-bind", "/usr", "/usr"]);
    // On a merged-/usr system `/bin`, `/lib`… are symlinks into `/usr`: the same symlinks inside, so the sandbox
    // looks like the host and `/usr/lib` is not mounted a second time as a real `/lib`.
    for dir in SYSTEM_DIRS {
        match std::fs::read_link(dir) {
            Ok(target) => args.extend([OsString::from("--symlink"), target.into(), (*dir).into()]),
            Err(_) => args.extend(["--ro-bind-try", dir, dir].map(OsString::from)),
        }
    }
    let mut push = |parts: &[&str]| args.extend(parts.iter().map(OsString::from));
    for file in ETC_FILES {
        push(&["--ro-bind-try", file, file]);
    }
    for path in &settings.ro_paths {
        args.extend([
            OsString::from("--ro-bind"),
            path.clone().into(),
            path.clone().into(),
        ]);
    }
    let tmp_size = limits.tmp_bytes.to_string();
    let mut push = |parts: &[&str]| args.extend(parts.iter().map(OsString::from));
    // Memory-backed file systems are bounded: /tmp and /dev/shm by tmp_bytes each, /dev and / become read-only.
    push(&["--dev", "/dev", "--size", &tmp_size, "--tmpfs", "/dev/shm"]);
    push(&["--remount-ro", "/dev", "--proc", "/proc"]);
    push(&["--size", &tmp_size, "--tmpfs", "/tmp"]);
    // After /tmp, so that a workspace under /tmp (or under a read-only directory) is mounted over what came before.
    if let Some(ws) = workspace {
        args.extend([OsString::from("--bind"), ws.into(), ws.into()]);
    }
    // Last: the sandbox's root (and the directories made for the mounts) is read-only, the mounts keep their mode.
    let mut push = |parts: &[&str]| args.extend(parts.iter().map(OsString::from));
    push(&["--remount-ro", "/", "--chdir"]);
    args.push(workspace.map_or_else(|| OsString::from("/"), OsString::from));
    args.push("--".into());
    args.extend(command.iter().cloned());
    args
}

/// `prlimit` arguments that set the per-process resource limits of `limits` (hard limits, so the command cannot
/// raise them again) and then run `command`. No core dumps: a crashing command must not write its memory into the
/// workspace.
pub fn prlimit(limits: &BashLimits, command: &[OsString]) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        // SIGXCPU at the soft limit, SIGKILL a second later if the process ignores it.
        format!(
            "--cpu={}:{}",
            limits.cpu_seconds,
            limits.cpu_seconds.saturating_add(1)
        ),
        format!("--data={}", limits.memory_bytes),
        format!("--nproc={}", limits.max_processes),
        format!("--fsize={}", limits.max_file_bytes),
        "--core=0".to_owned(),
        "--".to_owned(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.extend(command.iter().cloned());
    args
}

/// `/bin/sh -c <command>`.
pub fn shell(command: &str) -> Vec<OsString> {
    ["/bin/sh", "-c", command]
        .into_iter()
        .map(OsString::from)
        .collect()
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
