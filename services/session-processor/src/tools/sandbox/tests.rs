//! The sandbox against what a hostile command tries, with real processes and a real file system: other workspaces,
//! the processor's configuration, `/etc/shadow`, writes outside the workspace, the network, a fork bomb, a gigabyte
//! of output, memory, and processes that try to outlive the call. Each is refused or capped, quickly, and the test
//! process keeps working. Skipped only on a kernel that refuses the namespaces, loudly, and failed there under CI
//! (test_support::sandbox_or_skip).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::test_support::{enterable_tempdir, namespaces_or_skip};
use super::*;
use crate::tools::{Limits, ToolOutcome, Workspace, run_builtin};

/// A workspace, another session's workspace with a secret, and a processor configuration file readable by anyone
/// (so only the mount namespace keeps it away, not its mode).
struct Scene {
    base: tempfile::TempDir,
    ws: Workspace,
    other: PathBuf,
    config: PathBuf,
}

fn scene() -> Scene {
    let base = enterable_tempdir();
    let ws = Workspace::open(&base.path().join("acme/demo")).unwrap();
    let other = base.path().join("evil/demo");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret.txt"), "other-tenant-secret\n").unwrap();
    let config = base.path().join("processor.toml");
    std::fs::write(
        &config,
        "[redis]\nurl = \"redis://:config-secret@redis:6379\"\n",
    )
    .unwrap();
    Scene {
        base,
        ws,
        other,
        config,
    }
}

/// The probed sandbox and a fresh scene; `None` where the kernel refuses the namespaces.
async fn setup() -> Option<(Arc<Sandbox>, Scene)> {
    Some((namespaces_or_skip().await?, scene()))
}

async fn bash(
    sandbox: &Arc<Sandbox>,
    ws: &Workspace,
    bash: BashLimits,
    command: &str,
) -> ToolOutcome {
    let limits = Limits {
        bash,
        sandbox: sandbox.clone(),
        ..Limits::default()
    };
    run_builtin(
        ws,
        "bash",
        &json!({ "command": command }).to_string(),
        &limits,
    )
    .await
}

/// Limits for commands that should end by themselves: the timeout only bounds a hang (generous, since a loaded
/// 2-core machine runs a `find /` in the sandbox in seconds, not milliseconds).
fn quick() -> BashLimits {
    BashLimits {
        timeout: Duration::from_secs(60),
        ..BashLimits::default()
    }
}

/// Live (not zombie) processes whose command line contains `token`.
fn live_with(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let (Ok(cmdline), Ok(stat)) = (
            std::fs::read(dir.join("cmdline")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue;
        };
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'));
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !zombie && cmdline.contains(token) {
            found.push(format!("{}: {cmdline}", dir.display()));
        }
    }
    found
}

/// Waits (up to a generous bound: SIGKILLed processes need a moment to be torn down) until no live process carries
/// `token`; panics naming the survivors otherwise.
async fn until_gone(token: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let live = live_with(token);
        if live.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes outlived the call: {live:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A command whose processes (a background subshell, a process in a session of its own, and the shell) all carry
/// `tag` in their command line and never end by themselves.
fn stubborn(tag: &str) -> String {
    format!(
        "(while :; do sleep 1; done) & setsid sh -c 'while :; do sleep 1; done; : {tag}' & while :; do sleep 1; done; : {tag}"
    )
}

/// Half a second for a command.
fn half_a_second() -> BashLimits {
    BashLimits {
        timeout: Duration::from_millis(500),
        ..BashLimits::default()
    }
}

/// Runs `command` (whose processes carry `tag`) under [`half_a_second`], asserts it timed out, and waits until no
/// process with `tag` is left.
async fn times_out_leaving_nothing(
    sandbox: &Arc<Sandbox>,
    ws: &Workspace,
    command: &str,
    tag: &str,
) {
    let out = bash(sandbox, ws, half_a_second(), command).await;
    assert!(
        out.text().starts_with("timed out after 0.5 s"),
        "{}",
        out.text()
    );
    until_gone(tag).await;
}

fn token() -> String {
    format!("sandbox-test-{}", crate::ids::new("t"))
}

#[tokio::test]
async fn inside_the_sandbox_a_command_still_behaves_like_a_shell_command() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let root = s.ws.root().display();
    let out = bash(&sandbox, &s.ws, quick(), "pwd; echo oops >&2; exit 3").await;
    assert_eq!(
        out,
        ToolOutcome::Ok(format!("exit code: 3\nstdout:\n{root}\nstderr:\noops\n"))
    );
    let out = bash(&sandbox, &s.ws, quick(), "cat; echo done").await;
    assert_eq!(
        out.text(),
        "exit code: 0\nstdout:\ndone\n",
        "stdin is empty"
    );
    let out = bash(&sandbox, &s.ws, quick(), "true").await;
    assert_eq!(out.text(), "exit code: 0\n(no output)\n");
    // A background job ends with the command instead of holding the call (and the output pipes) open.
    let started = Instant::now();
    let out = bash(&sandbox, &s.ws, quick(), "sleep 10 & echo quick").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.text(), "exit code: 0\nstdout:\nquick\n");
    // Each stream keeps its first max_output_bytes.
    let limits = Limits {
        max_output_bytes: 100,
        bash: quick(),
        sandbox: sandbox.clone(),
        ..Limits::default()
    };
    let input = json!({ "command": "head -c 5000 /dev/zero | tr '\\0' a" });
    let out = crate::tools::bash::run(&s.ws, &input, &limits)
        .await
        .unwrap();
    assert!(
        out.contains("[stdout truncated: showing the first 100 of 5000 bytes]"),
        "{out}"
    );
}

#[tokio::test]
async fn other_workspaces_the_processor_config_and_shadow_are_not_there() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let attempts = [
        format!("cat {}/secret.txt", s.other.display()),
        "cat ../../evil/demo/secret.txt".to_owned(),
        format!("cat {}", s.config.display()),
        "cat /etc/shadow".to_owned(),
    ];
    for attempt in &attempts {
        let out = bash(&sandbox, &s.ws, quick(), attempt).await;
        let text = out.text();
        assert!(!out.is_err(), "{attempt}: {text}");
        assert!(
            !text.starts_with("exit code: 0"),
            "{attempt} succeeded: {text}"
        );
        assert!(
            text.contains("No such file or directory"),
            "{attempt}: {text}"
        );
        assert!(
            !text.contains("other-tenant-secret") && !text.contains("config-secret"),
            "{attempt} leaked: {text}"
        );
    }
    // Above the workspace there are only the (empty, read-only) directories leading to it.
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        &format!("ls -A {}", s.base.path().display()),
    )
    .await;
    assert_eq!(out.text(), "exit code: 0\nstdout:\nacme\n");
    // What is there: the system read-only (the host's /usr is not searched: it holds no secrets and is large), the
    // session's own workspace and nothing of the processor's tree.
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        "find / \\( -path /usr -o -path /proc -o -path /lib -o -path /lib64 -o -path /bin -o -path /sbin \\) -prune -o \\( -name secret.txt -o -name processor.toml \\) -print 2>/dev/null; ls /",
    )
    .await;
    let text = out.text();
    assert!(
        !text.contains("secret.txt") && !text.contains("processor.toml"),
        "{text}"
    );
    for top in ["usr", "tmp", "proc", "dev", "etc"] {
        assert!(text.lines().any(|l| l == top), "{top} missing: {text}");
    }
    for absent in ["root", "home", "var", "srv", "run", "sys"] {
        assert!(
            !text.lines().any(|l| l == absent),
            "/{absent} visible: {text}"
        );
    }
}

#[tokio::test]
async fn writes_outside_the_workspace_fail_and_tmp_is_private() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let tag = token();
    // Next to the workspace and into the other one: under /tmp (where the test's directories are) such a write lands
    // in the sandbox's private /tmp, elsewhere on the read-only root; the host never sees it (checked below).
    for next_door in [
        format!("echo x > {}/{tag}", s.base.path().display()),
        format!("echo x > {}/{tag}", s.other.display()),
    ] {
        let out = bash(&sandbox, &s.ws, quick(), &next_door).await;
        assert!(
            out.text().starts_with("exit code: "),
            "{next_door}: {}",
            out.text()
        );
    }
    let escapes = [
        format!("echo x > /usr/{tag}"),
        format!("echo x > /etc/{tag}"),
        format!("echo x > /{tag}"),
        format!("mkdir -p /var/{tag}"),
        format!("echo x > /dev/{tag}"),
    ];
    for escape in &escapes {
        let out = bash(&sandbox, &s.ws, quick(), escape).await;
        let text = out.text();
        assert!(
            text.starts_with("exit code: ") && !text.starts_with("exit code: 0"),
            "{escape}: {text}"
        );
        assert!(
            text.contains("Read-only file system") || text.contains("No such file or directory"),
            "{escape}: {text}"
        );
    }
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        &format!("echo mine > {tag} && echo private > /tmp/{tag} && cat /tmp/{tag}"),
    )
    .await;
    assert_eq!(out.text(), "exit code: 0\nstdout:\nprivate\n");
    assert_eq!(
        std::fs::read_to_string(s.ws.root().join(&tag)).unwrap(),
        "mine\n"
    );
    for host in [
        s.base.path().join(&tag),
        s.other.join(&tag),
        PathBuf::from("/usr").join(&tag),
        PathBuf::from("/etc").join(&tag),
        PathBuf::from("/").join(&tag),
        PathBuf::from("/var").join(&tag),
        std::env::temp_dir().join(&tag),
    ] {
        assert!(!host.exists(), "{} was created on the host", host.display());
    }
    // Memory-backed space is bounded.
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        "head -c 100000000 /dev/zero > /tmp/fill; head -c 100000000 /dev/zero > /dev/shm/fill",
    )
    .await;
    assert_eq!(
        out.text().matches("No space left on device").count(),
        2,
        "{}",
        out.text()
    );
}

#[tokio::test]
async fn no_network_unless_the_agent_allows_it() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\", Timeout => 5) or die \"refused: $!\\n\"; print \"connected\\n\"'"
    );
    let out = bash(&sandbox, &s.ws, quick(), &connect).await;
    assert!(
        out.text().contains("refused:") && !out.text().contains("connected"),
        "{}",
        out.text()
    );
    let open = BashLimits {
        network: true,
        ..quick()
    };
    let out = bash(&sandbox, &s.ws, open, &connect).await;
    assert_eq!(
        out.text(),
        "exit code: 0\nstdout:\nconnected\n",
        "the same command with network allowed"
    );
}

#[tokio::test]
async fn a_fork_bomb_is_capped_then_killed_and_the_caller_carries_on() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let tag = token();
    let limits = BashLimits {
        timeout: Duration::from_secs(2),
        max_processes: 64,
        ..BashLimits::default()
    };
    let started = Instant::now();
    let out = bash(
        &sandbox,
        &s.ws,
        limits,
        &format!("f() {{ f | f & }}; f; sleep 30; : {tag}"),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    // Contained either way: the timeout kills it (a tool error), or the process limit stops the shell's own fork of
    // `sleep` first and it exits (ordinary output: an exit code and the shell's complaint). Which comes first is the
    // scheduler's race; both show the limit holding.
    let text = out.text();
    assert!(
        (out.is_err() && text.starts_with("timed out after 2 s"))
            || (!out.is_err() && text.starts_with("exit code:")),
        "{text}"
    );
    assert!(
        text.contains("Cannot fork"),
        "the process limit held: {text}"
    );
    until_gone(&tag).await;
    let out = bash(&sandbox, &s.ws, quick(), "echo alive").await;
    assert_eq!(out.text(), "exit code: 0\nstdout:\nalive\n");
}

#[tokio::test]
async fn a_gigabyte_of_output_is_cut_off_without_buffering_it() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let started = Instant::now();
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        "head -c 1073741824 /dev/zero | tr '\\0' y",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    let text = out.text();
    assert!(out.is_err(), "{}", &text[..200.min(text.len())]);
    assert!(
        text.starts_with("output limit: the command wrote more than 8388608 bytes and was killed"),
        "{}",
        &text[..200]
    );
    // What reaches the model is the tool output limit, not the gigabyte.
    assert!(
        text.len() <= Limits::default().max_output_bytes + 200,
        "{} bytes",
        text.len()
    );
}

#[tokio::test]
async fn a_command_that_exits_once_its_output_is_cut_off_is_reported_as_cut_off() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    // It shrugs off the closed pipe and exits at once, racing the limit's own report (its exit seen first, which a
    // loaded machine makes likelier, was reported as an ordinary exit): several times.
    for _ in 0..5 {
        let out = bash(
            &sandbox,
            &s.ws,
            quick(),
            "trap '' PIPE; head -c 16777216 /dev/zero 2>/dev/null; exit 0",
        )
        .await;
        let text = out.text();
        assert!(out.is_err(), "{}", &text[..200.min(text.len())]);
        assert!(
            text.starts_with("output limit: the command wrote more than 8388608 bytes"),
            "{}",
            &text[..200.min(text.len())]
        );
    }
}

#[tokio::test]
async fn memory_file_size_and_cpu_are_limited_per_process() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let memory = BashLimits {
        memory_bytes: 128 << 20,
        ..quick()
    };
    let out = bash(
        &sandbox,
        &s.ws,
        memory,
        "perl -e '$x = \"a\" x (512 * 1024 * 1024); print \"allocated\\n\"'",
    )
    .await;
    assert!(
        out.text().contains("Out of memory") && !out.text().contains("allocated"),
        "{}",
        out.text()
    );
    let files = BashLimits {
        max_file_bytes: 1 << 20,
        ..quick()
    };
    let out = bash(&sandbox, &s.ws, files, "head -c 2097152 /dev/zero > big").await;
    assert!(
        out.text().contains("SIGXFSZ") || out.text().contains("File too large"),
        "{}",
        out.text()
    );
    assert!(std::fs::metadata(s.ws.root().join("big")).unwrap().len() <= 1 << 20);
    let cpu = BashLimits {
        cpu_seconds: 1,
        ..quick()
    };
    let started = Instant::now();
    let out = bash(&sandbox, &s.ws, cpu, "while :; do :; done").await;
    assert!(out.text().contains("SIGXCPU"), "{}", out.text());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn runs_unprivileged_with_a_scrubbed_environment() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    std::fs::write(
        s.ws.root().join("from-the-processor.txt"),
        "root wrote this\n",
    )
    .unwrap();
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        "id -u; id -g; echo appended >> from-the-processor.txt; env | cut -d= -f1 | sort",
    )
    .await;
    let text = out.text();
    let mut lines = text.lines().skip(2);
    let (uid, gid) = (lines.next().unwrap(), lines.next().unwrap());
    if rustix::process::geteuid().is_root() {
        assert_eq!((uid, gid), ("64000", "64000"), "{text}");
    } else {
        assert_eq!(
            uid,
            rustix::process::geteuid().as_raw().to_string(),
            "{text}"
        );
    }
    let names: Vec<&str> = lines.collect();
    for name in &names {
        assert!(
            [
                "HOME",
                "LANG",
                "PATH",
                "PWD",
                "TMPDIR",
                "OLDPWD",
                "SHLVL",
                "_",
                crate::tools::bash::CALL_VAR
            ]
            .contains(name),
            "{name} leaked: {text}"
        );
    }
    // Files the processor wrote are handed to the sandbox user, so the command can change them.
    assert_eq!(
        std::fs::read_to_string(s.ws.root().join("from-the-processor.txt")).unwrap(),
        "root wrote this\nappended\n"
    );
}

#[tokio::test]
async fn timeouts_and_aborts_leave_no_process_behind() {
    let Some((sandbox, s)) = setup().await else {
        return;
    };
    let tag = token();
    times_out_leaving_nothing(&sandbox, &s.ws, &stubborn(&tag), &tag).await;

    // Aborted: the call is dropped mid-command, as when the loop is cancelled.
    let tag = token();
    let command = stubborn(&tag);
    let call = bash(&sandbox, &s.ws, quick(), &command);
    tokio::select! {
        out = call => panic!("finished by itself: {}", out.text()),
        () = async {
            while live_with(&tag).is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } => {}
    }
    until_gone(&tag).await;
}

#[tokio::test]
async fn the_probe_names_a_missing_bwrap() {
    let sandbox = Sandbox::new(SandboxSettings {
        bwrap: PathBuf::from("bwrap-that-does-not-exist"),
        ..SandboxSettings::default()
    });
    let why = sandbox.ready().await.unwrap_err();
    assert!(
        why.contains("`bwrap-that-does-not-exist` was not found") && why.contains("bubblewrap"),
        "{why}"
    );
    let s = scene();
    let out = bash(&Arc::new(sandbox), &s.ws, quick(), "true").await;
    assert!(
        out.is_err()
            && out
                .text()
                .starts_with("bash is disabled on this processor:"),
        "{}",
        out.text()
    );
}

#[test]
fn search_permission_follows_owner_group_other() {
    let me = Owner {
        uid: 64000,
        gid: 64000,
    };
    assert!(may_search(0o700, 64000, 0, me));
    assert!(
        !may_search(0o077, 64000, 64000, me),
        "the owner bits decide for the owner"
    );
    assert!(may_search(0o710, 0, 64000, me));
    assert!(
        !may_search(0o701, 0, 64000, me),
        "the group bits decide for the group"
    );
    assert!(may_search(0o711, 0, 0, me));
    assert!(!may_search(0o770, 0, 0, me));
}

#[test]
fn an_unreachable_workspace_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    // Owned by whoever runs the test, never the sandbox user, and closed to others.
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let me = Owner {
        uid: 64000,
        gid: 64000,
    };
    let why = unreachable_for(&ws, me).unwrap();
    assert!(
        why.contains(&base.path().display().to_string()) && why.contains("o+x"),
        "{why}"
    );
    let open = enterable_tempdir();
    assert_eq!(unreachable_for(&open.path().join("ws"), me), None);
}

#[tokio::test]
async fn weak_confinement_keeps_the_user_the_limits_and_the_group_kill() {
    let weak = SandboxSettings {
        confinement: Confinement::Weak,
        ..SandboxSettings::default()
    };
    let Some(sandbox) = super::test_support::sandbox_or_skip(weak).await else {
        return;
    };
    let s = scene();
    let out = bash(
        &sandbox,
        &s.ws,
        quick(),
        "id -u; pwd; env | cut -d= -f1 | sort",
    )
    .await;
    let text = out.text();
    let mut lines = text.lines().skip(2);
    let expected_uid = if rustix::process::geteuid().is_root() {
        "64000".to_owned()
    } else {
        rustix::process::geteuid().as_raw().to_string()
    };
    assert_eq!(lines.next(), Some(expected_uid.as_str()), "{text}");
    assert_eq!(
        lines.next(),
        Some(s.ws.root().display().to_string().as_str()),
        "{text}"
    );
    for name in lines {
        assert!(
            [
                "HOME",
                "LANG",
                "PATH",
                "PWD",
                "OLDPWD",
                "SHLVL",
                "_",
                crate::tools::bash::CALL_VAR
            ]
            .contains(&name),
            "{name} leaked: {text}"
        );
    }
    if rustix::process::geteuid().is_root() {
        // The unprivileged user still cannot read what only root may.
        let out = bash(&sandbox, &s.ws, quick(), "cat /etc/shadow").await;
        assert!(out.text().contains("Permission denied"), "{}", out.text());
    }
    let tag = token();
    let command =
        format!("(while :; do sleep 1; done; : {tag}) & while :; do sleep 1; done; : {tag}");
    times_out_leaving_nothing(&sandbox, &s.ws, &command, &tag).await;
    // A process that left the group (`setsid`) carries the call's marker, so the kill finds it all the same.
    let tag = token();
    times_out_leaving_nothing(&sandbox, &s.ws, &stubborn(&tag), &tag).await;
}
