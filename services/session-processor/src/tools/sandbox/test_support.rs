//! Helpers for tests that run real commands in the sandbox.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use super::{Confinement, Sandbox, SandboxSettings};

/// A temporary directory the sandbox user can enter whatever the umask (it needs search permission on every
/// directory above its workspace).
pub(crate) fn enterable_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    dir
}

/// The default `namespaces` sandbox, probed; `None` only when the kernel itself refuses the namespaces, which
/// `unshare` from util-linux confirms independently of bubblewrap: then the test fails under CI and elsewhere skips,
/// saying so (service_kit::prerequisite). A missing `bwrap`, or a probe failing on a kernel that allows the
/// namespaces, fails the test.
pub(crate) async fn namespaces_or_skip() -> Option<Arc<Sandbox>> {
    sandbox_or_skip(SandboxSettings::default()).await
}

/// Like [`namespaces_or_skip`] with `settings`.
pub(crate) async fn sandbox_or_skip(settings: SandboxSettings) -> Option<Arc<Sandbox>> {
    let sandbox = Arc::new(Sandbox::new(settings));
    let why = match sandbox.ready().await {
        Ok(_) => return Some(sandbox),
        Err(why) => why.to_owned(),
    };
    assert!(
        !why.contains("was not found"),
        "the sandbox tests need bubblewrap (apt-get install bubblewrap; scripts/install-test-deps.sh installs \
         it): {why}"
    );
    if sandbox.settings().confinement == Confinement::Namespaces && kernel_refuses(&sandbox) {
        service_kit::prerequisite::skip_or_fail(
            &format!("this kernel refuses the namespaces the bash sandbox needs ({why})"),
            "allow unprivileged user, pid, mount and network namespaces (sysctl \
             kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; in a container, one \
             started with user namespaces allowed)",
        );
        return None;
    }
    panic!("the sandbox probe failed although the kernel allows the namespaces: {why}");
}

/// Whether `unshare` (as the user bubblewrap would run as) cannot create user, pid, mount and network namespaces.
fn kernel_refuses(sandbox: &Sandbox) -> bool {
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--user", "--pid", "--mount", "--net", "--fork", "true"])
        .current_dir(Path::new("/"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if rustix::process::geteuid().is_root() {
        cmd.uid(sandbox.settings().uid).gid(sandbox.settings().gid);
    }
    !cmd.status().is_ok_and(|s| s.success())
}
