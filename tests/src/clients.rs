//! The client packages (clients/python, clients/node) and the examples (examples/) run against the whole product
//! with the demo provider behind it, as after `make up`: each package's own test suite, then each example.
//!
//! The tests count what ran: a package's suite reports every test by name, and the names that passed must be the
//! expected ones, so a test skipped, renamed or silently not collected fails the Rust test.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::processor::{PROCESSOR_TOKEN, Product};

/// Where a test's missing prerequisite comes from, for its failure message.
pub const INSTALL: &str =
    "scripts/install-test-deps.sh installs what the tests need (`make test` runs it first)";

/// What to install, for a failure message, when a script's `stderr` says a package it imports is missing (Python's
/// `ModuleNotFoundError`, Node's `ERR_MODULE_NOT_FOUND`); empty otherwise.
pub fn missing_package(stderr: &str) -> String {
    if stderr.contains("ModuleNotFoundError") || stderr.contains("ERR_MODULE_NOT_FOUND") {
        format!(" (a package is missing; {INSTALL})")
    } else {
        String::new()
    }
}

/// The model the tests' sessions use: the fake `openai` provider, answering as the demo provider does.
pub const MODEL: &str = "openai/gpt-4o";

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// The Python the tests run: .tools/test-venv's, which holds the pinned packages of tests/python/requirements.txt
/// (scripts/install-test-deps.sh), or `python3` on PATH before that venv exists (where a missing package then fails
/// the test, naming [`INSTALL`]).
pub fn python3() -> PathBuf {
    let venv = repo().join(".tools/test-venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// The product with the demo provider's scenario behind every `openai/...` model: it calls `get_time` when a
/// prompt offers it and answers in text otherwise.
pub async fn demo_product() -> Product {
    let p = Product::start("").await;
    p.gateway
        .openai
        .set_fallback(fake_provider::scenario::demo());
    p
}

/// The environment `make up` gives a client, pointed at `p`.
pub fn client_env(p: &Product) -> Vec<(&'static str, String)> {
    vec![
        ("PROCESSOR_ADDR", format!("http://{}", p.addr)),
        ("PROCESSOR_TOKEN", PROCESSOR_TOKEN.to_string()),
        ("DEMO_MODEL", MODEL.to_string()),
        ("MODEL", MODEL.to_string()),
    ]
}

/// Runs `cmd` to its end; panics with its output (and `hint`, what to install) when it cannot start or fails.
pub async fn run_ok(cmd: &mut tokio::process::Command, hint: &str) -> Output {
    let shown = format!("{:?}", cmd.as_std());
    let out = cmd
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("{shown} did not start ({e}); {hint}"));
    assert!(
        out.status.success(),
        "{shown} failed ({}); {hint}\n--- stdout:\n{}\n--- stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The tests Python's `unittest -v` reports as passed (`name (module.Class...) ... ok`), in order.
pub fn unittest_passed(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.ends_with(" ... ok"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The tests node's test runner reports as passed in TAP (`ok N - name`, any nesting), in order; the suites
/// (`describe`) count too, by their own names. A skipped or to-do test (`# SKIP`, `# TODO`) did not pass.
pub fn tap_passed(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(str::trim_start)
        .filter_map(|l| l.strip_prefix("ok "))
        .filter_map(|l| l.split_once(" - ").map(|(_, name)| name))
        .filter(|name| !name.contains(" # SKIP") && !name.contains(" # TODO"))
        .map(str::to_string)
        .collect()
}

/// Where `tool` is on PATH, if it is.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

/// What every example prints after `make up`'s prompt (`What time is it in UTC?`, offering `get_time`): the tool call
/// as it arrives, then the stored conversation: the question, the demo provider's preamble, the call answered with
/// the time, and the answer quoting it.
pub fn assert_example_conversation(stdout: &str) {
    assert!(
        stdout.contains("[tool call get_time {\"timezone\":\"UTC\"}]"),
        "{stdout}"
    );
    let stored = stdout
        .split_once("--- the conversation, as stored:\n")
        .map(|(_, s)| s)
        .unwrap_or_default();
    let lines: Vec<&str> = stored.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0], "user: What time is it in UTC?");
    assert_eq!(lines[1], "assistant: Let me check the time for you.");
    let answered = lines[2]
        .strip_prefix("tool get_time({\"timezone\":\"UTC\"}) -> ")
        .unwrap_or_else(|| panic!("no answered get_time call: {stdout}"));
    assert!(answered.ends_with(" UTC"), "{stdout}");
    assert_eq!(
        lines[3],
        format!("assistant: The tool says: {answered}. That's all from the demo provider."),
        "{stdout}"
    );
}
