//! The real `llm-gateway` process with the front door turned on by `GATEWAY_HTTP_LISTEN`: it serves there, and on
//! SIGTERM a response in flight runs to its end before the process exits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::OPENAI_KEY;
use fake_provider::{FakeProvider, Reply};
use http_body_util::BodyExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_the_front_door_and_drains_it_on_sigterm() {
    let fake = FakeProvider::start().await.unwrap();
    // About a second of events, so SIGTERM lands mid-stream.
    fake.push(Reply::fixture("openai_chat/text.sse").pace(Duration::from_millis(80)));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nshutdown_grace_ms = 15000\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n",
        fake.base_url()
    );
    let mut door = e2e_tests::front_door::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_gateway_main")),
        &config,
        &[("E2E_OPENAI_KEY", OPENAI_KEY)],
    )
    .await;
    let resp = door
        .post_json(
            "/v1/chat/completions",
            &[],
            br#"{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"user","content":"Hi"}]}"#,
        )
        .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("chat.completion.chunk"),
        "{first:?}"
    );

    let pid = door.process.child.id().unwrap();
    e2e_tests::service::wait_until_caught(pid, 15).await;
    let pid = pid.to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());

    let rest = body.collect().await.unwrap().to_bytes();
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.ends_with("data: [DONE]\n\n"),
        "the stream was cut: {rest}"
    );
    let exit = tokio::time::timeout(Duration::from_secs(20), door.process.child.wait())
        .await
        .expect("the gateway exits after the drain")
        .unwrap();
    assert!(
        exit.success(),
        "{exit:?}\n{}",
        door.process.lines().join("\n")
    );
}
