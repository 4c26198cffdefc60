use super::repo::cut_text;
use super::*;
use llm_proto::sessions as pb;
use pb::file_change::Status;

#[test]
fn a_summary_lists_files_up_to_its_bound_and_counts_them_all() {
    let changes: Vec<pb::FileChange> = (0..5000)
        .map(|i| pb::FileChange {
            path: format!("node_modules/pkg-{i:05}/index.js"),
            status: Status::Added as i32,
            additions: 2,
            ..Default::default()
        })
        .collect();
    let s = summary(changes);
    assert_eq!(s.additions, 10_000, "totals count every file");
    assert!(s.files_omitted > 0);
    assert_eq!(s.files.len() + s.files_omitted as usize, 5000);
    assert!(prost::Message::encoded_len(&s) <= SUMMARY_FILES_BYTES + 64);
    assert_eq!(
        s.files[0].path, "node_modules/pkg-00000/index.js",
        "the first by path"
    );
    let small = summary(vec![pb::FileChange::default()]);
    assert_eq!((small.files.len(), small.files_omitted), (1, 0));
}

struct Fixture {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    ws: PathBuf,
    repo: Repo,
}

fn fixture() -> Fixture {
    fixture_with(1024 * 1024, Duration::from_secs(30))
}

fn fixture_with(max_file_bytes: u64, timeout: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspaces/demo");
    std::fs::create_dir_all(&ws).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let config = SnapshotConfig {
        enabled: true,
        root: dir.path().join("workspaces/@snapshots"),
        max_file_bytes,
        timeout,
    };
    let repo = Repo::new(&config, "ses_1", &ws).unwrap();
    Fixture {
        _dir: dir,
        outside,
        ws,
        repo,
    }
}

fn write(f: &Fixture, path: &str, content: &[u8]) {
    let full = f.ws.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, content).unwrap();
}

fn change(path: &str, status: Status, additions: u64, deletions: u64) -> pb::FileChange {
    pb::FileChange {
        path: path.into(),
        status: status as i32,
        additions,
        deletions,
        binary: false,
    }
}

#[tokio::test]
async fn added_modified_deleted_binary_and_nested_files_are_reported() {
    let f = fixture();
    write(&f, "keep.txt", b"one\ntwo\nthree\n");
    write(&f, "gone.txt", b"bye\n");
    write(&f, "img.bin", b"\x00\x01\x02");
    let before = f.repo.track().await.unwrap();
    assert!(valid_snapshot_id(&before), "{before}");
    write(&f, "keep.txt", b"one\n2\nthree\nfour\n");
    std::fs::remove_file(f.ws.join("gone.txt")).unwrap();
    write(&f, "img.bin", b"\x00\x01\x03\x04");
    write(&f, "a/b/c/deep.rs", b"fn main() {}\n// end\n");
    let after = f.repo.track().await.unwrap();
    let mut bin = change("img.bin", Status::Modified, 0, 0);
    bin.binary = true;
    assert_eq!(
        f.repo.changes(&before, &after).await.unwrap(),
        [
            change("a/b/c/deep.rs", Status::Added, 2, 0),
            change("gone.txt", Status::Deleted, 0, 1),
            bin,
            change("keep.txt", Status::Modified, 2, 1),
        ]
    );
    assert!(f.repo.changes(&after, &after).await.unwrap().is_empty());
    let (patch, cut) = f
        .repo
        .patch(&before, &after, "keep.txt", 1 << 20)
        .await
        .unwrap();
    assert!(!cut);
    assert!(
        patch.starts_with("diff --git a/keep.txt b/keep.txt\n"),
        "{patch}"
    );
    assert!(patch.contains("\n-two\n+2\n three\n+four\n"), "{patch}");
    let summary = summary(f.repo.changes(&before, &after).await.unwrap());
    assert_eq!((summary.additions, summary.deletions), (4, 2));
}

#[tokio::test]
async fn the_workspace_never_gets_a_git_directory_and_unchanged_trees_are_equal() {
    let f = fixture();
    write(&f, "x.txt", b"x\n");
    let a = f.repo.track().await.unwrap();
    let b = f.repo.track().await.unwrap();
    assert_eq!(a, b, "an unchanged workspace has the same snapshot");
    assert!(!f.ws.join(".git").exists());
    assert!(f.repo.git_dir().join("HEAD").exists());
    assert!(!f.repo.git_dir().starts_with(&f.ws));
    assert!(
        !f.repo.git_dir().join("hooks").exists(),
        "no template, so no sample hooks"
    );
}

#[tokio::test]
async fn files_outside_the_workspace_are_never_seen_and_symlinks_stay_links() {
    let f = fixture();
    std::fs::write(f.outside.join("secret.txt"), "top secret\n").unwrap();
    write(&f, "in.txt", b"in\n");
    let before = f.repo.track().await.unwrap();
    std::os::unix::fs::symlink(f.outside.join("secret.txt"), f.ws.join("link")).unwrap();
    std::fs::write(f.outside.join("secret.txt"), "changed secret\n").unwrap();
    std::fs::write(f.outside.join("new.txt"), "new\n").unwrap();
    let after = f.repo.track().await.unwrap();
    let changes = f.repo.changes(&before, &after).await.unwrap();
    assert_eq!(changes, [change("link", Status::Added, 1, 0)]);
    let (patch, _) = f
        .repo
        .patch(&before, &after, "link", 1 << 20)
        .await
        .unwrap();
    assert!(
        !patch.contains("secret\n"),
        "only the link's target path: {patch}"
    );
}

#[tokio::test]
async fn gitignore_large_files_and_nested_repositories_are_left_out() {
    let f = fixture_with(100, Duration::from_secs(30));
    write(&f, ".gitignore", b"build/\n*.log\n");
    write(&f, "grows.txt", b"small\n");
    let before = f.repo.track().await.unwrap();
    write(&f, "build/out.txt", b"artifact\n");
    write(&f, "run.log", b"log\n");
    write(&f, "big.txt", &[b'a'; 101]);
    write(&f, "grows.txt", &[b'b'; 200]);
    write(&f, "[glob]*.txt", b"literal name\n");
    write(&f, "vendor/lib/x.txt", b"x\n");
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(f.ws.join("vendor/lib"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(status.success());
    let after = f.repo.track().await.unwrap();
    assert_eq!(
        f.repo.changes(&before, &after).await.unwrap(),
        [
            change("[glob]*.txt", Status::Added, 1, 0),
            change("grows.txt", Status::Deleted, 0, 1),
        ]
    );
}

#[tokio::test]
async fn patches_are_cut_at_the_limit_on_a_line_end() {
    let f = fixture();
    let before = f.repo.track().await.unwrap();
    let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    write(&f, "long.txt", text.as_bytes());
    let after = f.repo.track().await.unwrap();
    let (patch, cut) = f
        .repo
        .patch(&before, &after, "long.txt", 1000)
        .await
        .unwrap();
    assert!(cut);
    assert!(
        patch.len() <= 1000 && patch.ends_with('\n'),
        "{}",
        patch.len()
    );
    let (whole, cut) = f
        .repo
        .patch(&before, &after, "long.txt", 1 << 20)
        .await
        .unwrap();
    assert!(!cut && whole.len() > 1000 && whole.starts_with(&patch));
}

#[tokio::test]
async fn unknown_snapshots_are_missing_not_git_errors() {
    let f = fixture();
    write(&f, "x.txt", b"x\n");
    let tree = f.repo.track().await.unwrap();
    let unknown = "0123456789abcdef0123456789abcdef01234567";
    assert!(matches!(
        f.repo.changes(&tree, unknown).await,
        Err(SnapshotError::Missing(id)) if id == unknown
    ));
    assert!(matches!(
        f.repo.changes("--output=/tmp/x", &tree).await,
        Err(SnapshotError::Missing(_))
    ));
}

#[tokio::test]
async fn a_missing_or_hanging_git_is_an_error_not_a_hang() {
    let f = fixture();
    let missing = f.repo.clone().with_program("/nonexistent/git");
    assert!(matches!(
        missing.track().await,
        Err(SnapshotError::Unavailable(_))
    ));
    let script = f.outside.join("slow-git");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let fx = fixture_with(1024, Duration::from_millis(300));
    let slow = fx.repo.clone().with_program(&script);
    let started = std::time::Instant::now();
    assert!(matches!(slow.track().await, Err(SnapshotError::Timeout(_))));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_stale_index_lock_does_not_block_the_next_snapshot() {
    let f = fixture();
    write(&f, "x.txt", b"x\n");
    f.repo.track().await.unwrap();
    std::fs::write(f.repo.git_dir().join("index.lock"), "").unwrap();
    write(&f, "y.txt", b"y\n");
    f.repo.track().await.unwrap();
}

fn part(kind: pb::part::Kind) -> pb::Part {
    pb::Part {
        kind: Some(kind),
        ..Default::default()
    }
}

#[test]
fn steps_read_their_snapshots_from_the_parts() {
    let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
    let message = pb::Message {
        parts: vec![
            part(pb::part::Kind::StepStart(pb::StepStartPart {
                snapshot: a.clone(),
            })),
            part(pb::part::Kind::StepFinish(pb::StepFinishPart {
                snapshot: b.clone(),
                ..Default::default()
            })),
            part(pb::part::Kind::Patch(pb::PatchPart {
                hash: a.clone(),
                after: b.clone(),
                ..Default::default()
            })),
            // Aborted before it finished: it changed nothing.
            part(pb::part::Kind::StepStart(pb::StepStartPart {
                snapshot: b.clone(),
            })),
            // Finished, but its end snapshot failed.
            part(pb::part::Kind::StepStart(pb::StepStartPart {
                snapshot: c.clone(),
            })),
            part(pb::part::Kind::StepFinish(pb::StepFinishPart::default())),
        ],
        ..Default::default()
    };
    let range = |s: &str, e: &str| StepRange {
        start: s.into(),
        end: e.into(),
    };
    assert_eq!(
        steps(&message),
        [range(&a, &b), range(&b, &b), range(&c, "")]
    );
    assert_eq!(first_and_latest([&message]), (a, c));
}

#[test]
fn cut_text_never_exceeds_the_limit() {
    assert_eq!(cut_text(b"ab\ncd\nef".to_vec(), 7), "ab\ncd\n");
    assert_eq!(cut_text("ééé".as_bytes().to_vec(), 5), "éé");
    assert_eq!(cut_text(vec![0xff; 4], 4).len(), 3);
}
