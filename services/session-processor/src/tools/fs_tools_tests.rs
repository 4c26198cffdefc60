use super::*;
use serde_json::json;

fn read_all(ws: &Workspace, rel: &str) -> String {
    fs::read_to_string(ws.root().join(rel)).unwrap()
}

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    (dir, ws)
}

fn call(ws: &Workspace, tool: &str, input: Value) -> Result<String, ToolError> {
    run(ws, tool, &input, &Limits::default())
}

fn put(ws: &Workspace, rel: &str, content: &str) {
    let path = ws.root().join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

#[test]
fn read_numbers_lines() {
    let (_d, ws) = ws();
    put(&ws, "a.txt", "one\ntwo\r\nthree");
    let out = call(&ws, "read", json!({"path": "a.txt"})).unwrap();
    assert_eq!(out, "   1| one\n   2| two\n   3| three\n");
}

#[test]
fn read_pages_with_offset_and_limit() {
    let (_d, ws) = ws();
    let content: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    put(&ws, "a.txt", &content);
    let out = call(
        &ws,
        "read",
        json!({"path": "a.txt", "offset": 3, "limit": 2}),
    )
    .unwrap();
    assert_eq!(
        out,
        "   3| line 3\n   4| line 4\n(showing lines 3-4; the file continues: read again with offset=5)\n"
    );
    let out = call(&ws, "read", json!({"path": "a.txt", "offset": 9})).unwrap();
    assert_eq!(out, "   9| line 9\n  10| line 10\n");
    let err = call(&ws, "read", json!({"path": "a.txt", "offset": 11})).unwrap_err();
    assert!(err.to_string().contains("past the end"), "{err}");
}

#[test]
fn read_stops_at_max_read_bytes() {
    let (_d, ws) = ws();
    put(&ws, "a.txt", "aaaa\nbbbb\ncccc\n");
    let limits = Limits {
        max_read_bytes: 10,
        ..Limits::default()
    };
    let out = run(&ws, "read", &json!({"path": "a.txt"}), &limits).unwrap();
    assert!(
        out.starts_with("   1| aaaa\n   2| bbbb\n(showing lines 1-2"),
        "{out}"
    );
    assert!(out.contains("offset=3"), "{out}");
}

#[test]
fn read_shortens_long_lines() {
    let (_d, ws) = ws();
    put(&ws, "a.txt", &"x".repeat(MAX_READ_LINE_CHARS + 10));
    let out = call(&ws, "read", json!({"path": "a.txt"})).unwrap();
    assert!(out.contains("[line shortened]"));
    assert!(out.len() < MAX_READ_LINE_CHARS + 100);
}

#[test]
fn read_errors() {
    let (_d, ws) = ws();
    fs::write(ws.root().join("bin"), [0x89, b'P', b'N', b'G', 0, 1, 2]).unwrap();
    fs::create_dir(ws.root().join("d")).unwrap();
    put(&ws, "empty", "");
    assert!(
        call(&ws, "read", json!({"path": "bin"}))
            .unwrap_err()
            .to_string()
            .contains("binary")
    );
    assert!(
        call(&ws, "read", json!({"path": "d"}))
            .unwrap_err()
            .to_string()
            .contains("directory")
    );
    assert!(
        call(&ws, "read", json!({"path": "nope"}))
            .unwrap_err()
            .to_string()
            .contains("does not exist")
    );
    assert_eq!(
        call(&ws, "read", json!({"path": "empty"})).unwrap(),
        "(`empty` is empty)"
    );
}

#[test]
fn write_creates_parents_and_overwrites() {
    let (_d, ws) = ws();
    let out = call(&ws, "write", json!({"path": "a/b/c.txt", "content": "hi"})).unwrap();
    assert_eq!(out, "created `a/b/c.txt` (2 bytes)");
    assert_eq!(read_all(&ws, "a/b/c.txt"), "hi");
    let out = call(
        &ws,
        "write",
        json!({"path": "a/b/c.txt", "content": "bye!"}),
    )
    .unwrap();
    assert_eq!(out, "overwrote `a/b/c.txt` (4 bytes)");
    assert_eq!(read_all(&ws, "a/b/c.txt"), "bye!");
    let err = call(&ws, "write", json!({"path": "a", "content": "x"})).unwrap_err();
    assert!(err.to_string().contains("is a directory"));
    let err = call(&ws, "write", json!({"path": ".", "content": "x"})).unwrap_err();
    assert!(err.to_string().contains("is a directory"));
}

#[test]
fn edit_replaces_a_unique_match() {
    let (_d, ws) = ws();
    put(&ws, "f.rs", "fn a() {}\nfn b() {}\n");
    let out = call(
        &ws,
        "edit",
        json!({"path": "f.rs", "old": "fn b", "new": "fn c"}),
    )
    .unwrap();
    assert_eq!(out, "replaced 1 occurrence in `f.rs`");
    assert_eq!(read_all(&ws, "f.rs"), "fn a() {}\nfn c() {}\n");
}

#[test]
fn edit_errors_leave_the_file_alone() {
    let (_d, ws) = ws();
    put(&ws, "f.rs", "x = 1\nx = 1\n");
    let err = call(&ws, "edit", json!({"path": "f.rs", "old": "y", "new": "z"})).unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    let err = call(
        &ws,
        "edit",
        json!({"path": "f.rs", "old": "x = 1", "new": "x = 2"}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("occurs 2 times"), "{err}");
    let err = call(&ws, "edit", json!({"path": "f.rs", "old": "x", "new": "x"})).unwrap_err();
    assert!(err.to_string().contains("identical"), "{err}");
    let err = call(&ws, "edit", json!({"path": "nope", "old": "x", "new": "y"})).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    fs::write(ws.root().join("latin1"), [b'a', 0xe9, b'\n']).unwrap();
    let err = call(
        &ws,
        "edit",
        json!({"path": "latin1", "old": "a", "new": "b"}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not UTF-8"), "{err}");
    assert_eq!(read_all(&ws, "f.rs"), "x = 1\nx = 1\n");
}

#[test]
fn edit_replace_all() {
    let (_d, ws) = ws();
    put(&ws, "f.rs", "x = 1\nx = 1\n");
    let out = call(
        &ws,
        "edit",
        json!({"path": "f.rs", "old": "x = 1", "new": "x = 2", "replace_all": true}),
    )
    .unwrap();
    assert_eq!(out, "replaced 2 occurrences in `f.rs`");
    assert_eq!(read_all(&ws, "f.rs"), "x = 2\nx = 2\n");
}

#[test]
fn list_sorts_marks_and_skips_git() {
    let (_d, ws) = ws();
    put(&ws, "b.txt", "");
    put(&ws, "a/x.txt", "");
    put(&ws, ".git/HEAD", "");
    put(&ws, ".env", "");
    std::os::unix::fs::symlink("a", ws.root().join("c")).unwrap();
    assert_eq!(call(&ws, "list", json!({})).unwrap(), ".env\na/\nb.txt\nc@");
    assert_eq!(call(&ws, "list", json!({"path": "a"})).unwrap(), "x.txt");
    fs::create_dir(ws.root().join("empty")).unwrap();
    assert_eq!(
        call(&ws, "list", json!({"path": "empty"})).unwrap(),
        "(`empty` is empty)"
    );
    assert!(
        call(&ws, "list", json!({"path": "b.txt"}))
            .unwrap_err()
            .to_string()
            .contains("not a directory")
    );
    assert!(
        call(&ws, "list", json!({"path": "zz"}))
            .unwrap_err()
            .to_string()
            .contains("does not exist")
    );
}

#[test]
fn grep_finds_lines_in_path_order() {
    let (_d, ws) = ws();
    put(&ws, "src/main.rs", "fn main() {\n    todo!()\n}\n");
    put(&ws, "src/lib/a.rs", "// TODO later\n");
    put(&ws, "README.md", "todo: docs\n");
    put(&ws, ".git/config", "todo in git\n");
    fs::write(ws.root().join("blob"), b"todo\0").unwrap();
    let out = call(&ws, "grep", json!({"pattern": "(?i)todo"})).unwrap();
    assert_eq!(
        out,
        "README.md:1: todo: docs\nsrc/main.rs:2: todo!()\nsrc/lib/a.rs:1: // TODO later"
    );
}

#[test]
fn grep_filters_by_path_and_glob() {
    let (_d, ws) = ws();
    put(&ws, "src/main.rs", "needle\n");
    put(&ws, "src/notes.md", "needle\n");
    put(&ws, "docs/x.rs", "needle\n");
    let out = call(&ws, "grep", json!({"pattern": "needle", "glob": "*.rs"})).unwrap();
    assert_eq!(out, "docs/x.rs:1: needle\nsrc/main.rs:1: needle");
    let out = call(
        &ws,
        "grep",
        json!({"pattern": "needle", "glob": "src/**/*.rs"}),
    )
    .unwrap();
    assert_eq!(out, "src/main.rs:1: needle");
    let out = call(&ws, "grep", json!({"pattern": "needle", "path": "src"})).unwrap();
    assert_eq!(out, "src/main.rs:1: needle\nsrc/notes.md:1: needle");
    let out = call(
        &ws,
        "grep",
        json!({"pattern": "needle", "path": "src/notes.md"}),
    )
    .unwrap();
    assert_eq!(out, "src/notes.md:1: needle");
    let out = call(&ws, "grep", json!({"pattern": "absent"})).unwrap();
    assert_eq!(out, "no matches for `absent` in `.`");
}

#[test]
fn grep_caps_results_and_reports_bad_patterns() {
    let (_d, ws) = ws();
    put(&ws, "many.txt", &"hit\n".repeat(MAX_GREP_MATCHES + 5));
    let out = call(&ws, "grep", json!({"pattern": "hit"})).unwrap();
    assert_eq!(
        out.lines().filter(|l| l.starts_with("many.txt:")).count(),
        MAX_GREP_MATCHES
    );
    assert!(out.contains("results capped"));
    let err = call(&ws, "grep", json!({"pattern": "(unclosed"})).unwrap_err();
    assert!(
        err.to_string().contains("invalid regular expression"),
        "{err}"
    );
    let err = call(&ws, "grep", json!({"pattern": "x", "glob": "{a"})).unwrap_err();
    assert!(err.to_string().contains("unclosed"), "{err}");
    let err = call(&ws, "grep", json!({"pattern": "x", "path": "missing"})).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn grep_does_not_follow_symlinks_out() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "needle\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.root().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.root().join("file-link")).unwrap();
    let out = call(&ws, "grep", json!({"pattern": "needle"})).unwrap();
    assert_eq!(out, "no matches for `needle` in `.`");
    assert!(call(&ws, "grep", json!({"pattern": "needle", "path": "link"})).is_err());
}

#[test]
fn bounded_line_reader_caps_memory() {
    let data = vec![b'a'; MAX_LINE_BYTES * 3];
    let mut reader = BufReader::new(&data[..]);
    let mut line = Vec::new();
    assert_eq!(
        read_line_bounded(&mut reader, &mut line).unwrap(),
        data.len()
    );
    assert_eq!(line.len(), MAX_LINE_BYTES);
    assert_eq!(read_line_bounded(&mut reader, &mut line).unwrap(), 0);
}
