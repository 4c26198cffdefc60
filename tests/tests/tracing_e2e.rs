//! One trace per generation across both services: caller → processor (`session.prompt` → `session.step`) →
//! gateway (`chat {model}`) → provider request, collected by a real OTLP receiver from two service processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::TOKEN;
use e2e_tests::otlp::{OtlpReceiver, Span};
use e2e_tests::processor::PROCESSOR_TOKEN;
use e2e_tests::stack::{Stack, StackSetup, otel_env, push_list_files};
use fake_provider::FakeProvider;
use opentelemetry_proto::tonic::common::v1::any_value::Value;

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
    let chat2 = chats.iter().find(|c| c.span_id != chat1.span_id).unwrap();
    assert_eq!(finish_reasons(chat1), ["tool_calls"]);
    assert_eq!(finish_reasons(chat2), ["stop"]);
    assert_semconv_types(&of_trace);
}

/// `gen_ai.response.finish_reasons`, which must be an array of strings.
fn finish_reasons(span: &Span) -> Vec<String> {
    span.strings("gen_ai.response.finish_reasons")
        .unwrap_or_else(|| {
            panic!(
                "finish_reasons is not an array of strings: {:?}",
                span.value("gen_ai.response.finish_reasons")
            )
        })
}

/// The attribute types of the GenAI and OpenTelemetry conventions, as the receiver got them: counts and costs as
/// integers, durations as doubles, names as strings; no attribute an empty string (absent ones are left out); the
/// agent's name on the loop's span; the resource's version and per-process instance id.
fn assert_semconv_types(spans: &[&Span]) {
    let is_int = |s: &Span, key: &str| matches!(s.value(key), Some(Value::IntValue(_)));
    let string = |s: &Span, key: &str| match s.value(key) {
        Some(Value::StringValue(v)) => v.clone(),
        other => panic!("{key} on {} is not a string: {other:?}", s.name),
    };
    for span in spans {
        let name = &span.name;
        if name.starts_with("chat ") {
            for key in [
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.cache_read.input_tokens",
                "gen_ai.usage.cache_creation.input_tokens",
                "gen_ai.usage.reasoning.output_tokens",
                "llm.cost_nano_usd",
                "llm.attempts",
            ] {
                assert!(is_int(span, key), "{key} on {name}: {:?}", span.value(key));
            }
            assert!(
                matches!(
                    span.value("gen_ai.client.time_to_first_chunk"),
                    Some(Value::DoubleValue(_))
                ),
                "{name}"
            );
            assert_eq!(string(span, "gen_ai.agent.name"), "default");
            assert_eq!(string(span, "gen_ai.operation.name"), "chat");
        } else if name.starts_with("step ") {
            for key in [
                "llm.step",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
                "llm.cost_nano_usd",
            ] {
                assert!(is_int(span, key), "{key} on {name}: {:?}", span.value(key));
            }
        } else if name == "invoke_agent" {
            assert_eq!(string(span, "gen_ai.agent.name"), "default");
            assert_eq!(string(span, "gen_ai.operation.name"), "invoke_agent");
        } else if name.starts_with("POST ") {
            assert!(is_int(span, "llm.attempt"), "{name}");
        }
        for kv in &span.raw.attributes {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            assert!(
                !matches!(value, Some(Value::StringValue(v)) if v.is_empty()),
                "{} on {name} is an empty string: leave it out instead",
                kv.key
            );
        }
        assert!(
            matches!(span.resource_value("service.version"), Some(Value::StringValue(v)) if v == env!("CARGO_PKG_VERSION")),
            "{:?}",
            span.resource
        );
    }
    let instance = |service: &str| -> Vec<String> {
        let mut ids: Vec<String> = spans
            .iter()
            .filter(|s| s.service == service)
            .map(|s| match s.resource_value("service.instance.id") {
                Some(Value::StringValue(v)) if !v.is_empty() => v.clone(),
                other => panic!("service.instance.id: {other:?}"),
            })
            .collect();
        ids.dedup();
        ids
    };
    let (gateway, processor) = (instance("llm-gateway"), instance("session-processor"));
    assert_eq!(gateway.len(), 1, "one instance id per process: {gateway:?}");
    assert_eq!(processor.len(), 1, "{processor:?}");
    assert_ne!(gateway, processor, "each process has its own instance id");
}
