use super::*;
use std::os::unix::fs::symlink;

fn setup() -> (tempfile::TempDir, Workspace, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    (dir, ws, outside)
}

fn refused(result: Result<PathBuf, ToolError>) -> String {
    match result {
        Err(error @ ToolError::OutsideWorkspace { .. }) => error.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn open_creates_and_canonicalizes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(&dir.path().join("a/b/../c")).unwrap();
    assert!(ws.root().is_dir());
    assert_eq!(
        ws.root(),
        std::fs::canonicalize(dir.path().join("a/c")).unwrap()
    );
}

#[test]
fn open_refuses_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "x").unwrap();
    assert!(Workspace::open(&file).is_err());
}

#[test]
fn plain_paths_resolve_inside() {
    let (_dir, ws, _) = setup();
    assert_eq!(ws.resolve("").unwrap(), ws.root());
    assert_eq!(ws.resolve(".").unwrap(), ws.root());
    assert_eq!(ws.resolve("a/b.txt").unwrap(), ws.root().join("a/b.txt"));
    assert_eq!(ws.resolve("./a//b/./c").unwrap(), ws.root().join("a/b/c"));
    assert_eq!(ws.resolve("a/../b").unwrap(), ws.root().join("b"));
}

#[test]
fn escapes_are_refused() {
    let (_dir, ws, _) = setup();
    assert!(refused(ws.resolve("../x")).contains("`..` goes above the workspace root"));
    assert!(refused(ws.resolve("a/../../x")).contains("`..`"));
    assert!(refused(ws.resolve("/etc/passwd")).contains("absolute"));
    assert!(refused(ws.resolve("a\0b")).contains("NUL"));
}

#[test]
fn symlinks_leaving_the_workspace_are_refused() {
    let (_dir, ws, outside) = setup();
    symlink(outside.join("secret.txt"), ws.root().join("file-link")).unwrap();
    symlink(&outside, ws.root().join("dir-link")).unwrap();
    symlink(outside.join("missing"), ws.root().join("dangling")).unwrap();
    std::fs::create_dir(ws.root().join("sub")).unwrap();
    symlink("../../outside", ws.root().join("sub/rel-link")).unwrap();

    assert!(
        refused(ws.resolve("file-link"))
            .contains("`file-link` is a symbolic link to a location outside")
    );
    assert!(refused(ws.resolve("dir-link/secret.txt")).contains("`dir-link`"));
    assert!(refused(ws.resolve("dir-link/new/file")).contains("`dir-link`"));
    assert!(refused(ws.resolve("sub/rel-link/x")).contains("`sub/rel-link`"));
    assert!(refused(ws.resolve("dangling")).contains("does not resolve"));
}

#[test]
fn symlinks_inside_the_workspace_are_followed() {
    let (_dir, ws, _) = setup();
    std::fs::create_dir(ws.root().join("real")).unwrap();
    symlink("real", ws.root().join("alias")).unwrap();
    assert_eq!(
        ws.resolve("alias/f.txt").unwrap(),
        ws.root().join("real/f.txt")
    );
}

#[test]
fn tenants_have_their_own_workspace_folders() {
    let root = Path::new("/srv/ws");
    assert_eq!(workspace_dir(root, "", "proj").unwrap(), root.join("proj"));
    assert_eq!(
        workspace_dir(root, "acme", "proj").unwrap(),
        root.join("@tenants/acme/proj")
    );
    assert_ne!(
        workspace_dir(root, "acme", "proj").unwrap(),
        workspace_dir(root, "evil", "proj").unwrap()
    );
    for name in [
        "",
        ".",
        "..",
        "a/b",
        "../acme",
        "@tenants",
        "a\0",
        "é",
        "-rf",
        ".git",
        "_x",
        &"a".repeat(129),
    ] {
        assert!(workspace_dir(root, "acme", name).is_err(), "{name:?}");
        assert!(workspace_dir(root, "", name).is_err(), "{name:?}");
    }
    for tenant in ["..", ".", "a/b", "@x"] {
        assert!(workspace_dir(root, tenant, "proj").is_err(), "{tenant:?}");
    }
    for name in ["proj", "9lives", "my-proj_2.0", &"a".repeat(128)] {
        assert!(workspace_dir(root, "acme", name).is_ok(), "{name:?}");
    }
}

#[test]
fn a_planted_link_never_leads_into_another_tenants_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let acme = Workspace::for_session(root, "acme", "proj").unwrap();
    std::fs::write(acme.root().join("secret.txt"), "acme's").unwrap();
    let evil = Workspace::for_session(root, "evil", "proj").unwrap();
    assert_ne!(acme.root(), evil.root());
    assert!(!evil.root().join("secret.txt").exists());
    // A link where an unnamed-tenant workspace would be, and one where a tenant's directory would be.
    symlink(acme.root(), root.join("stolen")).unwrap();
    assert!(Workspace::for_session(root, "", "stolen").is_err());
    symlink(root.join("@tenants/acme"), root.join("@tenants/mallory")).unwrap();
    assert!(Workspace::for_session(root, "mallory", "proj").is_err());
    // Reopening is stable.
    assert_eq!(
        Workspace::for_session(root, "acme", "proj").unwrap().root(),
        acme.root()
    );
}

#[test]
fn display_is_relative() {
    let (_dir, ws, _) = setup();
    assert_eq!(ws.display(ws.root()), ".");
    assert_eq!(ws.display(&ws.root().join("a/b")), "a/b");
}
