//! A Python client generated from `proto/` at test time (grpcio-tools) creates a session, prompts it and reads the
//! persisted messages through the real processor, gateway and Redis.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::clients::{INSTALL, missing_package, python3};
use e2e_tests::processor::{PROCESSOR_TOKEN, Product};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_client_generated_from_the_protos_drives_a_session() {
    let p = Product::start("").await;
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-py")
            .text(&["Hello ", "from the ", "fake provider."])
            .finish("stop", Some((12, 6))),
    ));
    let out = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/client_test.py");
    let output = tokio::process::Command::new(python3())
        .arg(script)
        .env("PROCESSOR_ADDR", p.addr.to_string())
        .env("PROCESSOR_TOKEN", PROCESSOR_TOKEN)
        .env("OUT_DIR", out.path())
        .env("PYTHONOPTIMIZE", "2")
        .output()
        .await
        .unwrap_or_else(|e| panic!("python3 did not start ({e}); {INSTALL}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python client failed{}:\n{stdout}\n{stderr}",
        missing_package(&stderr)
    );
    // Every check ran and held, in order: a check skipped (or an `assert` optimised away) fails here.
    let ran: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok: "))
        .collect();
    assert_eq!(
        ran,
        [
            "create_session",
            "prompt_ends_with_done",
            "prompt_streams_text",
            "list_messages_roles",
            "answer_persisted",
            "answer_finish",
            "answer_cost",
            "no_token_unauthenticated",
        ],
        "{stdout}\n{stderr}"
    );
}
