//! The `sessions` CLI as a process: `--help` never shows the token, and `--json` prints JSON Lines a script can
//! read (one API message per line, `.proto` field names, every field present).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{PROCESSOR_TOKEN, Product};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use serde_json::Value;

const CLI: &str = env!("CARGO_BIN_EXE_sessions_cli");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_never_prints_the_token_from_the_environment() {
    let secret = "tok-never-print-me-0123456789";
    for args in [&["--help"][..], &["prompt", "--help"], &["-h"]] {
        let out = tokio::process::Command::new(CLI)
            .args(args)
            .env("PROCESSOR_TOKEN", secret)
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The top-level help names the variable (a subcommand's does not list the global token).
        if args[0] != "prompt" {
            assert!(
                all.contains("PROCESSOR_TOKEN"),
                "the variable is named: {all}"
            );
        }
        assert!(!all.contains(secret), "{args:?} printed the token: {all}");
    }
}

/// Runs the CLI with `--json` and `args`; every stdout line parsed.
async fn json(p: &Product, args: &[&str]) -> Vec<Value> {
    let out = tokio::process::Command::new(CLI)
        .arg("--json")
        .args(args)
        .env("PROCESSOR_ADDR", format!("http://{}", p.addr))
        .env("PROCESSOR_TOKEN", PROCESSOR_TOKEN)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_is_one_api_message_per_line() {
    let p = Product::start("").await;
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-cli")
            .text(&["Hello ", "script."])
            .finish("stop", Some((12, 6))),
    ));

    let created = json(&p, &["create"]).await;
    assert_eq!(created.len(), 1);
    let id = created[0]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("ses_"), "{id}");
    assert_eq!(
        created[0]["cost_nano_usd"], 0,
        "defaults are present, as numbers"
    );

    let events = json(&p, &["prompt", &id, "Hi"]).await;
    assert!(events.iter().all(|e| e["session_id"] == id.as_str()));
    let deltas: String = events
        .iter()
        .filter_map(|e| e["part_delta"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, "Hello script.");
    let last = events.last().unwrap();
    assert_eq!(last["done"]["finish"], "stop", "{last}");
    assert_eq!(
        last["done"]["stopped_by"], "STOP_REASON_COMPLETED",
        "{last}"
    );

    let messages = json(&p, &["messages", &id]).await;
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["ROLE_USER", "ROLE_ASSISTANT"]);
    assert_eq!(
        messages[1]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["text"]["text"].as_str())
            .collect::<Vec<_>>(),
        ["Hello script."]
    );
    assert!(messages[1]["cost_nano_usd"].as_i64().unwrap() > 0);

    let got = json(&p, &["get", &id]).await;
    assert_eq!(got[0]["id"], id.as_str());
    assert_eq!(got[0]["cost_nano_usd"], messages[1]["cost_nano_usd"]);
    assert_eq!(got[0]["status"]["kind"], "KIND_IDLE", "{}", got[0]);

    let diagnosis = json(&p, &["diagnose", &id]).await;
    assert_eq!(diagnosis[0]["healthy"], true, "{}", diagnosis[0]);
}
