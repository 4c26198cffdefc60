//! End-to-end tests of `run_builtin`: input validation, confinement through every file tool, output limits.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Workspace,
    outside: PathBuf,
}

/// A workspace next to an `outside` directory holding `secret.txt`, with symlinks from the workspace to it.
fn fixture() -> Fixture {
    let dir = sandbox::test_support::enterable_tempdir();
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
    symlink(outside.join("secret.txt"), ws.root().join("secret-link")).unwrap();
    symlink(&outside, ws.root().join("out-dir")).unwrap();
    std::fs::create_dir(ws.root().join("sub")).unwrap();
    symlink("../../outside", ws.root().join("sub/up")).unwrap();
    Fixture {
        _dir: dir,
        ws,
        outside,
    }
}

/// Every file under `dir` with its content, to show nothing changed.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                files.insert(entry.path(), std::fs::read(entry.path()).unwrap());
            }
        }
    }
    files
}

async fn call(ws: &Workspace, tool: &str, input: serde_json::Value) -> ToolOutcome {
    run_builtin(ws, tool, &input.to_string(), &Limits::default()).await
}

fn err_text(outcome: ToolOutcome) -> String {
    match outcome {
        ToolOutcome::Err(text) => text,
        ToolOutcome::Ok(text) => panic!("expected an error, got Ok({text})"),
    }
}

#[tokio::test]
async fn happy_path_through_run_builtin() {
    let f = fixture();
    let ws = &f.ws;
    assert_eq!(
        call(
            ws,
            "write",
            json!({"path": "notes/a.md", "content": "hello\nworld\n"})
        )
        .await,
        ToolOutcome::Ok("created `notes/a.md` (12 bytes)".to_owned())
    );
    assert_eq!(
        call(
            ws,
            "edit",
            json!({"path": "notes/a.md", "old": "world", "new": "there"})
        )
        .await,
        ToolOutcome::Ok("replaced 1 occurrence in `notes/a.md`".to_owned())
    );
    assert_eq!(
        call(ws, "read", json!({"path": "notes/a.md"})).await,
        ToolOutcome::Ok("   1| hello\n   2| there\n".to_owned())
    );
    assert_eq!(
        call(ws, "list", json!({"path": "notes"})).await,
        ToolOutcome::Ok("a.md".to_owned())
    );
    assert_eq!(
        call(ws, "grep", json!({"pattern": "the", "path": "notes"})).await,
        ToolOutcome::Ok("notes/a.md:2: there".to_owned())
    );
    // Written by the processor, read by the sandbox user.
    let Some(sandbox) = sandbox::test_support::namespaces_or_skip().await else {
        return;
    };
    let limits = Limits {
        sandbox,
        ..Limits::default()
    };
    let input = json!({"command": "cat notes/a.md"}).to_string();
    assert_eq!(
        run_builtin(ws, "bash", &input, &limits).await,
        ToolOutcome::Ok("exit code: 0\nstdout:\nhello\nthere\n".to_owned())
    );
}

#[tokio::test]
async fn escapes_are_refused_by_every_file_tool() {
    let f = fixture();
    let before = snapshot(&f.outside);
    let paths = [
        "../x",
        "/etc/passwd",
        "a/../../x",
        "secret-link",
        "out-dir/secret.txt",
        "out-dir/new.txt",
        "out-dir/deeper/new.txt",
        "sub/up/secret.txt",
    ];
    for path in paths {
        let calls = [
            ("read", json!({ "path": path })),
            ("write", json!({ "path": path, "content": "pwned" })),
            (
                "edit",
                json!({ "path": path, "old": "top", "new": "pwned" }),
            ),
            ("list", json!({ "path": path })),
            ("grep", json!({ "pattern": "secret", "path": path })),
        ];
        for (tool, input) in calls {
            let text = err_text(call(&f.ws, tool, input).await);
            assert!(
                text.starts_with(&format!("refused path `{path}`")),
                "{tool} {path}: {text}"
            );
            assert!(
                text.contains("inside the workspace"),
                "{tool} {path}: {text}"
            );
        }
    }
    assert_eq!(
        snapshot(&f.outside),
        before,
        "something was written outside the workspace"
    );
    assert!(!f.outside.join("new.txt").exists());
    assert!(!f.outside.join("deeper").exists());
    assert!(!f.ws.root().parent().unwrap().join("x").exists());
}

#[tokio::test]
async fn refusals_name_the_reason() {
    let f = fixture();
    let text = err_text(call(&f.ws, "read", json!({"path": "/etc/passwd"})).await);
    assert!(text.contains("absolute paths are not allowed"), "{text}");
    let text = err_text(call(&f.ws, "read", json!({"path": "a/../../x"})).await);
    assert!(
        text.contains("`..` goes above the workspace root"),
        "{text}"
    );
    let text = err_text(call(&f.ws, "read", json!({"path": "secret-link"})).await);
    assert!(
        text.contains("`secret-link` is a symbolic link to a location outside the workspace"),
        "{text}"
    );
    let text = err_text(call(&f.ws, "write", json!({"path": "sub/up/x", "content": ""})).await);
    assert!(text.contains("`sub/up` is a symbolic link"), "{text}");
}

#[tokio::test]
async fn invalid_json_is_a_tool_error() {
    let f = fixture();
    let outcome = run_builtin(&f.ws, "read", "{\"path\": ", &Limits::default()).await;
    let text = err_text(outcome);
    assert!(
        text.starts_with("invalid input for tool `read`: input is not valid JSON"),
        "{text}"
    );
}

#[tokio::test]
async fn schema_violations_are_tool_errors() {
    let f = fixture();
    let cases = [
        ("read", json!({}), "\"path\" is a required property"),
        ("read", json!({"path": 3}), "at `/path`"),
        ("read", json!({"path": "a", "limit": 0}), "at `/limit`"),
        (
            "write",
            json!({"path": "a"}),
            "\"content\" is a required property",
        ),
        (
            "edit",
            json!({"path": "a", "old": "", "new": "b"}),
            "at `/old`",
        ),
        (
            "edit",
            json!({"path": "a", "old": "x", "new": "y", "replace_all": "yes"}),
            "at `/replace_all`",
        ),
        ("list", json!({"recursive": true}), "recursive"),
        (
            "grep",
            json!({"path": "."}),
            "\"pattern\" is a required property",
        ),
        (
            "bash",
            json!({"cmd": "ls"}),
            "\"command\" is a required property",
        ),
    ];
    for (tool, input, expected) in cases {
        let text = err_text(call(&f.ws, tool, input.clone()).await);
        assert!(
            text.starts_with(&format!(
                "invalid input for tool `{tool}`: input does not match"
            )),
            "{text}"
        );
        assert!(text.contains(expected), "{tool} {input}: {text}");
    }
    let text = err_text(run_builtin(&f.ws, "read", "[]", &Limits::default()).await);
    assert!(text.contains("object"), "{text}");
}

#[tokio::test]
async fn unknown_tools_are_tool_errors() {
    let f = fixture();
    let text = err_text(call(&f.ws, "delete", json!({})).await);
    assert!(
        text.contains("unknown tool `delete`")
            && text.contains("read, write, edit, list, grep, bash"),
        "{text}"
    );
}

#[tokio::test]
async fn output_is_cut_to_max_output_bytes() {
    let f = fixture();
    let content: String = (0..200).map(|n| format!("line {n}\n")).collect();
    call(
        &f.ws,
        "write",
        json!({"path": "long.txt", "content": content}),
    )
    .await;
    let limits = Limits {
        max_output_bytes: 50,
        ..Limits::default()
    };
    let outcome = run_builtin(&f.ws, "read", r#"{"path":"long.txt"}"#, &limits).await;
    let ToolOutcome::Ok(text) = outcome else {
        panic!("{outcome:?}")
    };
    let (kept, note) = text.split_once("\n[output truncated").unwrap();
    assert_eq!(kept.len(), 50);
    assert!(note.contains("showing the first 50 of"), "{note}");
}

#[test]
fn truncation_respects_char_boundaries() {
    let text = truncate_output("ééé".to_owned(), 3);
    assert!(
        text.starts_with("é\n[output truncated: showing the first 2 of 6 bytes]"),
        "{text}"
    );
    assert_eq!(truncate_output("short".to_owned(), 10), "short");
}

#[tokio::test]
async fn bash_timeout_is_a_tool_error_and_prompt() {
    let f = fixture();
    let Some(sandbox) = sandbox::test_support::namespaces_or_skip().await else {
        return;
    };
    let limits = Limits {
        sandbox,
        bash: BashLimits {
            timeout: Duration::from_millis(200),
            ..BashLimits::default()
        },
        ..Limits::default()
    };
    let started = Instant::now();
    let outcome = run_builtin(&f.ws, "bash", r#"{"command":"sleep 5"}"#, &limits).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert!(err_text(outcome).starts_with("timed out after 0.2 s"));
}

#[test]
fn limits_defaults() {
    let limits = Limits::default();
    assert_eq!(limits.max_output_bytes, 64 * 1024);
    assert_eq!(limits.bash.timeout, Duration::from_secs(60));
    assert_eq!(limits.max_read_bytes, 1024 * 1024);
}

#[test]
fn outcome_helpers() {
    assert!(ToolOutcome::Err("x".to_owned()).is_err());
    assert_eq!(ToolOutcome::Ok("y".to_owned()).text(), "y");
}
