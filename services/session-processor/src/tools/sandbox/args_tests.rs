use super::super::Confinement;
use super::*;
use std::path::PathBuf;

fn strings(args: &[OsString]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn settings() -> SandboxSettings {
    SandboxSettings {
        confinement: Confinement::Namespaces,
        ro_paths: vec![PathBuf::from("/opt/tools")],
        ..SandboxSettings::default()
    }
}

fn position(args: &[String], needle: &[&str]) -> usize {
    args.windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{needle:?} not in {args:?}"))
}

#[test]
fn the_sandbox_sees_the_system_read_only_and_the_workspace_read_write() {
    let ws = Path::new("/srv/ws/acme/demo");
    let args = strings(&bwrap(
        &settings(),
        &BashLimits::default(),
        Some(ws),
        &shell("ls"),
    ));
    for flag in [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    position(&args, &["--ro-bind", "/usr", "/usr"]);
    position(
        &args,
        &["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"],
    );
    position(&args, &["--ro-bind", "/opt/tools", "/opt/tools"]);
    let tmp = position(&args, &["--size", "67108864", "--tmpfs", "/tmp"]);
    let bind = position(
        &args,
        &[
            "--bind",
            "/srv/ws/acme/demo",
            "/srv/ws/acme/demo",
            "--remount-ro",
            "/",
            "--chdir",
            "/srv/ws/acme/demo",
        ],
    );
    assert!(tmp < bind, "the workspace is mounted after /tmp");
    position(
        &args,
        &[
            "--size",
            "67108864",
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",
        ],
    );
    // Read-write mounts: the workspace and nothing else.
    assert_eq!(args.iter().filter(|a| *a == "--bind").count(), 1);
    assert!(!args.iter().any(|a| a.starts_with("/etc/shadow")));
    assert_eq!(args[args.len() - 4..], ["--", "/bin/sh", "-c", "ls"]);
}

#[test]
fn network_is_shared_only_when_allowed() {
    let limits = BashLimits {
        network: true,
        ..BashLimits::default()
    };
    let args = strings(&bwrap(&settings(), &limits, None, &shell("true")));
    assert!(!args.iter().any(|a| a == "--unshare-net"));
    position(&args, &["--remount-ro", "/", "--chdir", "/", "--"]);
}

#[test]
fn every_limit_becomes_a_hard_rlimit() {
    let limits = BashLimits {
        cpu_seconds: 7,
        memory_bytes: 1 << 20,
        max_processes: 9,
        max_file_bytes: 4096,
        ..BashLimits::default()
    };
    assert_eq!(
        strings(&prlimit(&limits, &shell("x"))),
        [
            "--cpu=7:8",
            "--data=1048576",
            "--nproc=9",
            "--fsize=4096",
            "--core=0",
            "--",
            "/bin/sh",
            "-c",
            "x"
        ]
    );
}
