//! Hooks through the real server: declarative hooks from config, and an external `HooksService` running in another
//! process (`hook-server`), each shown changing the request the provider receives; slow and failing hook services
//! under both policies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;
use tokio::io::{AsyncBufReadExt, BufReader};
use tonic::Code;
use tonic_types::StatusExt;

const GPT: &str = "openai/gpt-4o";
const MINI: &str = "openai/gpt-4o-mini";
const CLAUDE: &str = "anthropic/claude-sonnet-4-5";

/// A `hook-server` process; killed when dropped.
struct HookServer {
    _child: tokio::process::Child,
    url: String,
}

async fn hook_server(args: &[&str]) -> HookServer {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hook-server"))
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn hook-server");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::time::timeout(SHORT, BufReader::new(stdout).lines().next_line())
        .await
        .expect("hook-server starts in time")
        .expect("read hook-server stdout")
        .expect("hook-server printed its address");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected hook-server output: {line}"));
    HookServer {
        _child: child,
        url: format!("http://{addr}"),
    }
}

fn service(name: &str, url: &str, pattern: &str, policy: &str, timeout_ms: u64) -> String {
    format!(
        "[[hook_services]]\nname = \"{name}\"\nurl = \"{url}\"\nmatch = \"{pattern}\"\ntimeout_ms = {timeout_ms}\npolicy = \"{policy}\"\ntransforms = [\"system\", \"params\", \"headers\"]\n"
    )
}

fn with_system(model: &str, system: &str) -> pb::Generation {
    pb::Generation {
        system: vec![system.into()],
        ..generation(model, "hi")
    }
}

/// The system prompt an OpenAI Chat request carries (the adapter joins the sections with blank lines).
fn openai_system(req: &fake_provider::Recorded) -> String {
    let body = req.json();
    assert_eq!(body["messages"][0]["role"], "system", "{body}");
    body["messages"][0]["content"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declarative_hooks_change_the_provider_request_for_matching_models_only() {
    let h = Harness::start_with(
        r#"
[[hooks]]
name = "acme"
match = "openai/*"
system_prefix = "You work for ACME."
headers = { "x-team" = "search" }
params.set = { temperature = 0.3 }
params.default = { max_output_tokens = 77 }
"#,
    )
    .await;
    h.openai
        .set_fallback(Reply::fixture("openai_chat/text.sse"));
    h.anthropic
        .set_fallback(Reply::fixture("anthropic/text.sse"));

    // `set` overrides the caller's temperature; `default` fills the unset max_output_tokens; the caller cannot
    // replace a hook's header.
    let g = pb::Generation {
        sampling: Some(pb::Sampling {
            temperature: Some(1.0),
            ..Default::default()
        }),
        extra_headers: [("x-team".to_string(), "caller".to_string())]
            .into_iter()
            .collect(),
        ..with_system(GPT, "Be terse.")
    };
    h.stream(g).await.unwrap();
    let req = &h.openai.requests()[0];
    assert_eq!(openai_system(req), "You work for ACME.\n\nBe terse.");
    let body = req.json();
    assert_eq!(body["temperature"], 0.3);
    assert_eq!(body["max_tokens"], 77);
    assert_eq!(req.header("x-team"), Some("search"));

    // A caller's own max_output_tokens is kept: defaults only fill.
    let g = pb::Generation {
        sampling: Some(pb::Sampling {
            max_output_tokens: Some(55),
            ..Default::default()
        }),
        ..with_system(GPT, "Be terse.")
    };
    h.stream(g).await.unwrap();
    assert_eq!(h.openai.requests()[1].json()["max_tokens"], 55);

    // Another provider's model is untouched.
    h.stream(with_system(CLAUDE, "Be terse.")).await.unwrap();
    let req = &h.anthropic.requests()[0];
    assert_eq!(req.header("x-team"), None);
    let body = req.json();
    assert!(!body.to_string().contains("ACME"), "{body}");
    assert!(body.get("temperature").is_none(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_service_in_another_process_changes_the_request_after_the_declarative_hooks() {
    let hook = hook_server(&[
        "--header",
        "x-hook=yes",
        "--temperature",
        "0.25",
        "--system-prefix",
        "HOOK PREFIX",
    ])
    .await;
    let h = Harness::start_with(&format!(
        "[[hooks]]\nmatch = \"openai/*\"\nsystem_prefix = \"DECLARATIVE\"\nparams.set = {{ temperature = 0.9 }}\n\n{}",
        service("policy", &hook.url, "openai/*", "fail_closed", 2000)
    ))
    .await;
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let lines = render(&h.stream(with_system(GPT, "caller")).await.unwrap());
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    let req = &h.openai.requests()[0];
    // System transform: declarative prefix first, then the service, which saw it and put its own before.
    assert_eq!(openai_system(req), "HOOK PREFIX\n\nDECLARATIVE\n\ncaller");
    // Params: the service ran after the declarative `set` and won.
    assert_eq!(req.json()["temperature"], 0.25);
    // Headers.
    assert_eq!(req.header("x-hook"), Some("yes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_hook_times_out_and_each_policy_decides() {
    let slow = hook_server(&["--delay-ms", "3000", "--system-prefix", "SLOW"]).await;
    // Same slow service twice: fail_open for gpt-4o, fail_closed for gpt-4o-mini.
    let h = Harness::start_with(&format!(
        "{}\n{}",
        service("open", &slow.url, GPT, "fail_open", 150),
        service("closed", &slow.url, MINI, "fail_closed", 150),
    ))
    .await;
    h.openai
        .set_fallback(Reply::fixture("openai_chat/text.sse"));

    let started = Instant::now();
    let lines = render(&h.stream(with_system(GPT, "caller")).await.unwrap());
    let took = started.elapsed();
    assert!(
        lines.last().unwrap().starts_with("step_finish"),
        "{lines:#?}"
    );
    // Given up after 150 ms; the service's other transforms were skipped rather than waited for again, and the
    // generation went ahead unchanged.
    assert!(took >= Duration::from_millis(150), "{took:?}");
    // Well short of the service's 3 s delay: it was not waited for (how short is the benchmarks' business).
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(openai_system(&h.openai.requests()[0]), "caller");

    let started = Instant::now();
    let err = h
        .client()
        .await
        .stream(pb::StreamRequest {
            generation: Some(with_system(MINI, "caller")),
        })
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(
        err.message(),
        "hook `closed` (system transform) timed out after 150ms"
    );
    let info = err.get_error_details().error_info().cloned().unwrap();
    assert_eq!(info.reason, "HOOK_UNAVAILABLE");
    assert_eq!(info.metadata["hook"], "closed");
    assert_eq!(
        h.openai.requests().len(),
        1,
        "nothing sent for the refused one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_follows_its_policy() {
    let failing = hook_server(&["--fail", "--header", "x-hook=yes"]).await;
    let h = Harness::start_with(&format!(
        "{}\n{}",
        service("lenient", &failing.url, GPT, "fail_open", 2000),
        service("strict", &failing.url, MINI, "fail_closed", 2000),
    ))
    .await;
    h.openai
        .set_fallback(Reply::fixture("openai_chat/text.sse"));

    let lines = render(&h.stream(with_system(GPT, "caller")).await.unwrap());
    assert!(
        lines.last().unwrap().starts_with("step_finish"),
        "{lines:#?}"
    );
    let req = &h.openai.requests()[0];
    assert_eq!(req.header("x-hook"), None);
    assert_eq!(openai_system(req), "caller");

    let err = h
        .client()
        .await
        .stream(pb::StreamRequest {
            generation: Some(with_system(MINI, "caller")),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        err.message(),
        "hook `strict` (system transform) refused the generation: hook-server: system blocked by policy"
    );
    assert_eq!(
        err.get_error_details().error_info().unwrap().reason,
        "HOOK_FAILED"
    );
    assert_eq!(h.openai.requests().len(), 1);

    let metrics = h.scrape_metrics().await;
    for line in [
        "llm_gateway_hook_failures_total{hook=\"lenient\",transform=\"system\",policy=\"fail_open\"} 1",
        "llm_gateway_hook_failures_total{hook=\"strict\",transform=\"system\",policy=\"fail_closed\"} 1",
        "llm_gateway_rejected_total{reason=\"hook\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line}\n{metrics}"
        );
    }
    assert!(
        !metrics.contains("transform=\"headers\""),
        "a failed fail_open service is not called again in the same generation: {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_again_for_a_fallback_model_with_its_own_matches() {
    let h = Harness::start_with(
        r#"
[[hooks]]
match = "anthropic/*"
headers = { "x-fallback-tag" = "claude" }
system_prefix = "CLAUDE ONLY"

[[hooks]]
match = "openai/*"
headers = { "x-primary-tag" = "gpt" }
"#,
    )
    .await;
    h.openai.set_fallback(Reply::json(
        503,
        r#"{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}"#,
    ));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let g = pb::Generation {
        fallback_models: vec![CLAUDE.into()],
        ..with_system(GPT, "caller")
    };
    let lines = render(&h.stream(g).await.unwrap());
    assert!(lines[0].contains(CLAUDE), "{lines:#?}");
    let primary = &h.openai.requests()[0];
    assert_eq!(primary.header("x-primary-tag"), Some("gpt"));
    assert_eq!(openai_system(primary), "caller");
    let fallback = &h.anthropic.requests()[0];
    assert_eq!(fallback.header("x-fallback-tag"), Some("claude"));
    assert_eq!(fallback.header("x-primary-tag"), None);
    let system = fallback.json()["system"].to_string();
    assert!(
        system.find("CLAUDE ONLY").unwrap() < system.find("caller").unwrap(),
        "{system}"
    );
}
