//! The `sessions` CLI as a process: `--help` never shows the token, and `--json` prints JSON Lines a script can
//! read (one API message per line, `.proto` field names, every field present); and the demo provider behind the real
//! processor walks the whole loop a newcomer should see, driven by the CLI as `make demo` drives it.
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

/// The id of a session `sessions create` made with `args`.
async fn created(p: &Product, args: &[&str]) -> String {
    let out = json(p, &[&["create"][..], args].concat()).await;
    out[0]["id"].as_str().unwrap().to_string()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_without_its_scheme_works_and_an_unreachable_one_is_named_with_its_cause() {
    let p = Product::start("").await;
    let bare = tokio::process::Command::new(CLI)
        .args(["--json", "create"])
        .env("PROCESSOR_ADDR", p.addr.to_string())
        .env("PROCESSOR_TOKEN", PROCESSOR_TOKEN)
        .output()
        .await
        .unwrap();
    assert!(
        bare.status.success(),
        "{}",
        String::from_utf8_lossy(&bare.stderr)
    );

    // A port nobody listens on: bind one, then free it.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let out = tokio::process::Command::new(CLI)
        .args(["create"])
        .env("PROCESSOR_ADDR", addr.to_string())
        .env("PROCESSOR_TOKEN", PROCESSOR_TOKEN)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "cannot reach the session-processor at http://{addr}"
        )),
        "names the address: {err}"
    );
    assert!(err.contains("refused"), "names the cause: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_a_session_after_an_event_and_get_time_is_a_client_tool_without_the_flag() {
    let p = Product::start("").await;
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-cli-1")
            .tool_call("call_t", "get_time", &["{}"])
            .finish("tool_calls", Some((10, 3))),
    ));
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-cli-2")
            .text(&["It is ", "tea time."])
            .finish("stop", Some((14, 4))),
    ));
    let id = created(&p, &[]).await;
    // Without --time-tool, `get_time` is the caller's like any client tool: --auto's answer, not the clock.
    let events = json(
        &p,
        &[
            "prompt",
            &id,
            "Time?",
            "--client-tool",
            "get_time",
            "--auto",
            "tea time",
        ],
    )
    .await;
    let outputs: Vec<&str> = events
        .iter()
        .filter_map(|e| e["part_updated"]["tool"]["state"]["output"].as_str())
        .filter(|o| !o.is_empty())
        .collect();
    assert_eq!(outputs.first(), Some(&"tea time"), "{events:?}");

    // Resuming after the first event replays the rest, in order, ending with the same `done`.
    let first = events[0]["event_id"].as_str().unwrap().to_string();
    let watched = json(&p, &["watch", &id, "--after", &first, "--until-done"]).await;
    let ids = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|e| e["event_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&watched), ids(&events[1..]));
    assert!(watched.last().unwrap()["done"].is_object());
}

/// An agent that may write but asks first, as `deploy/processor.demo.toml`'s.
const CAREFUL: &str = r#"
[agents.careful]
role_prompt = "You are the demo."
model = "openai/gpt-4o"
tools = ["read", "write", "list"]
permissions = [{ tool = "write", decision = "ask" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_writes_a_file_after_asking_calls_each_tool_once_and_the_diff_shows_it() {
    let p = Product::start(CAREFUL).await;
    p.gateway
        .openai
        .set_fallback(fake_provider::scenario::demo());
    let id = created(&p, &["--agent", "careful", "--workspace", "demo"]).await;
    let events = json(
        &p,
        &[
            "prompt",
            &id,
            "Show me the loop",
            "--time-tool",
            "--client-tool",
            "lookup",
            "--auto",
            "looked up",
        ],
    )
    .await;

    let asked: Vec<&str> = events
        .iter()
        .filter_map(|e| e["permission_asked"]["tool"].as_str())
        .collect();
    assert_eq!(asked, ["write"], "one permission request, for the write");
    let mut completed: Vec<(String, String)> = Vec::new();
    for e in &events {
        let tool = &e["part_updated"]["tool"];
        if tool["state"]["status"] == "STATUS_COMPLETED" {
            let entry = (
                tool["tool"].as_str().unwrap().to_string(),
                tool["state"]["output"].as_str().unwrap().to_string(),
            );
            if !completed.contains(&entry) {
                completed.push(entry);
            }
        }
    }
    let names: Vec<&str> = completed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["write", "get_time", "lookup"], "{completed:?}");
    assert!(completed[0].1.contains(fake_provider::scenario::DEMO_FILE));
    assert_eq!(completed[2].1, "looked up");
    let done = events.last().unwrap();
    assert_eq!(done["done"]["finish"], "stop", "{done}");
    let steps = events
        .iter()
        .filter(|e| e["part_updated"]["step_finish"].is_object())
        .map(|e| e["part_updated"]["id"].as_str().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert_eq!(steps, 4, "three tool steps and the answer");

    let diff = json(&p, &["diff", &id]).await;
    let files: Vec<(&str, &str)> = diff[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["change"]["path"].as_str().unwrap(),
                f["change"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [(fake_provider::scenario::DEMO_FILE, "STATUS_ADDED")]
    );
}
