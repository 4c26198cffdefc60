//! One trace per generation across both services: caller → processor (`session.prompt` → `session.step`) →
//! gateway (`chat {model}`) → provider request, collected by a real OTLP receiver from two service processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::TOKEN;
use e2e_tests::otlp::OtlpReceiver;
use e2e_tests::processor::PROCESSOR_TOKEN;
use e2e_tests::stack::{Stack, StackSetup, otel_env, push_list_files};
use fake_provider::FakeProvider;

const TRACE_ID: &str = "5b8aa5a2d2c872e8321cf37308d69df2";
const CALLER_SPAN: &str = "051581bf3cb55c13";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_step_tool_conversation_is_one_trace_across_both_services() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    push_list_files(&fake);
    let env = |name: &str| {
        let mut env = otel_env(otlp.endpoint(), name);
        env.push(("RUST_LOG", "warn".to_string()));
        env
    };
    let stack = Stack::start(
        StackSetup {
            label: "trace",
            gateway_toml: format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\n",
                fake.base_url()
            ),
            gateway_token: TOKEN,
            processor_token: PROCESSOR_TOKEN,
            gateway_env: env("llm-gateway"),
            processor_env: env("session-processor"),
            gateway_ready: &[],
            processor_ready: &[],
        },
        env!("CARGO_BIN_EXE_gateway_replica"),
        env!("CARGO_BIN_EXE_processor_replica"),
    )
    .await;
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let (session_id, _) = stack.ask_how_many_files(Some(&traceparent)).await;

    let spans = otlp
        .wait_until(Duration::from_secs(20), |s| {
            s.iter().filter(|s| s.name == "chat openai/gpt-4o").count() >= 2
                && s.iter().filter(|s| s.name.starts_with("step ")).count() >= 2
                && s.iter().any(|s| s.name == "invoke_agent")
        })
        .await;
    let of_trace: Vec<_> = spans.iter().filter(|s| s.trace_id == TRACE_ID).collect();
    let root = of_trace
        .iter()
        .find(|s| s.name == "invoke_agent")
        .expect("the loop's span in the caller's trace");
    assert_eq!(root.service, "session-processor");
    assert_eq!(root.parent_id, CALLER_SPAN);
    let steps: Vec<_> = of_trace
        .iter()
        .filter(|s| s.name.starts_with("step "))
        .collect();
    assert_eq!(steps.len(), 2);
    for step in &steps {
        assert_eq!(
            step.parent_id, root.span_id,
            "steps are children of the loop"
        );
    }
    let chats: Vec<_> = of_trace
        .iter()
        .filter(|s| s.name == "chat openai/gpt-4o")
        .collect();
    assert_eq!(chats.len(), 2, "one gateway generation per step");
    for chat in &chats {
        assert_eq!(chat.service, "llm-gateway");
        let step = steps
            .iter()
            .find(|s| s.span_id == chat.parent_id)
            .expect("each generation is a child of a processor step");
        assert_eq!(
            step.attr("llm.cost_nano_usd"),
            chat.attr("llm.cost_nano_usd"),
            "the step carries its generation's cost"
        );
        let http = of_trace
            .iter()
            .find(|s| s.parent_id == chat.span_id)
            .expect("provider request span");
        assert_eq!(http.name, "POST /chat/completions");
    }
    let first = steps
        .iter()
        .find(|s| s.attr("llm.step").as_deref() == Some("1"))
        .unwrap();
    // gpt-4o: 100 in + 10 out = 250 000 + 100 000 nano-USD.
    assert_eq!(first.attr("llm.cost_nano_usd").as_deref(), Some("350000"));
    assert_eq!(
        first.attr("gen_ai.usage.input_tokens").as_deref(),
        Some("100")
    );
    assert_eq!(first.attr("llm.finish").as_deref(), Some("tool_calls"));
    let chat1 = chats.iter().find(|c| c.parent_id == first.span_id).unwrap();
    assert_eq!(
        chat1.attr("gen_ai.usage.input_tokens").as_deref(),
        Some("100")
    );
    assert_eq!(
        chat1.attr("gen_ai.usage.output_tokens").as_deref(),
        Some("10")
    );
    assert_eq!(
        chat1.attr("gen_ai.conversation.id").as_deref(),
        Some(session_id.as_str())
    );
}
