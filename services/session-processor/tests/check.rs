//! `session-processor --check` as a process: a valid configuration exits 0 with a summary, an invalid one exits 1
//! naming the key, and nothing is connected to (no Redis, no gateway runs here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_session-processor");

/// Runs `--check` on `toml` with only the given environment; exit code and stderr.
fn check(toml: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("processor.toml");
    std::fs::write(&path, toml).unwrap();
    let out = Command::new(BIN)
        .arg("--check")
        .arg("--config")
        .arg(&path)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

const ENV: [(&str, &str); 3] = [
    ("PROCESSOR_AUTH_TOKENS", "check-caller-token-0123456789"),
    ("GATEWAY_TOKEN", "check-gateway-token-0123456789"),
    ("PROCESSOR_WORKSPACE_ROOT", "/tmp"),
];

const VALID: &str = r#"
[server]
listen = "127.0.0.1:0"
[gateway]
url = "http://127.0.0.1:1"
[agents.default]
role_prompt = "You help."
model = "openai/gpt-4o"
"#;

#[test]
fn a_valid_configuration_is_ok_and_nothing_is_dialled() {
    let (code, stderr) = check(VALID, &ENV);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("configuration OK: 1 agents"), "{stderr}");
}

#[test]
fn an_invalid_configuration_exits_1_naming_the_key() {
    for (extra, key) in [
        ("[snapshots]\nnot_a_key = 1\n", "not_a_key"),
        ("", "server.keepalive_interval_ms"),
    ] {
        let toml = if key.starts_with("server.") {
            VALID.replace("[server]\n", "[server]\nkeepalive_interval_ms = 10\n")
        } else {
            format!("{VALID}{extra}")
        };
        let (code, stderr) = check(&toml, &ENV);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
    // No caller token anywhere: refused, saying which setting is missing.
    let (code, stderr) = check(VALID, &ENV[1..]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("server.auth_tokens") || stderr.contains("PROCESSOR_AUTH_TOKENS"),
        "{stderr}"
    );
}
