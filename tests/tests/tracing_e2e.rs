//! One trace per generation across both services: caller → processor (`session.prompt` → `session.step`) →
//! gateway (`chat {model}`) → provider request, collected by a real OTLP receiver from two service processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use e2e_tests::otlp::{OtlpReceiver, Span};
use e2e_tests::processor::{PROCESSOR_TOKEN, prompt, redis_url};
use e2e_tests::{Bearer, TOKEN};
use fake_provider::openai_sse::ChatStream;
use fake_provider::{FakeProvider, Reply};
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const TRACE_ID: &str = "5b8aa5a2d2c872e8321cf37308d69df2";
const CALLER_SPAN: &str = "051581bf3cb55c13";

async fn spawn(
    bin: &str,
    config: &std::path::Path,
    envs: &[(&str, String)],
    ready: &str,
) -> (Child, String) {
    let mut cmd = Command::new(bin);
    cmd.arg(config).stderr(Stdio::piped()).kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("service exited before listening");
            if let Some(a) = line.strip_prefix(ready) {
                return a.to_string();
            }
        }
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_step_tool_conversation_is_one_trace_across_both_services() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    fake.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-t1")
            .tool_call("call_l1", "list", &["{}"])
            .finish("tool_calls", Some((100, 10))),
    ));
    fake.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-t2")
            .text(&["Two ", "files."])
            .finish("stop", Some((200, 5))),
    ));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/w")).unwrap();
    std::fs::write(dir.path().join("ws/w/a.txt"), "a").unwrap();
    let common = |name: &str| {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50".to_string()),
            ("OTEL_SERVICE_NAME", name.to_string()),
            ("RUST_LOG", "warn".to_string()),
        ]
    };
    let gw_config = dir.path().join("gateway.toml");
    std::fs::write(
        &gw_config,
        format!("[server]\nlisten = \"127.0.0.1:0\"\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\n", fake.base_url()),
    )
    .unwrap();
    let mut gw_env = common("llm-gateway");
    gw_env.push(("GATEWAY_AUTH_TOKENS", TOKEN.to_string()));
    let (_gw, gw_addr) = spawn(
        env!("CARGO_BIN_EXE_gateway_replica"),
        &gw_config,
        &gw_env,
        "llm-gateway listening on ",
    )
    .await;

    let sp_config = dir.path().join("processor.toml");
    let prefix = format!("e2e:{}:", session_processor::ids::new("trace"));
    std::fs::write(
        &sp_config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[gateway]\nurl = \"http://{gw_addr}\"\n[redis]\nprefix = \"{prefix}\"\n[titles]\nenabled = false\n[agents.default]\nmodel = \"openai/gpt-4o\"\ntools = [\"list\"]\n"
        ),
    )
    .unwrap();
    let mut sp_env = common("session-processor");
    sp_env.extend([
        ("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN.to_string()),
        ("GATEWAY_TOKEN", TOKEN.to_string()),
        ("REDIS_URL", redis_url()),
        (
            "PROCESSOR_WORKSPACE_ROOT",
            dir.path().join("ws").to_string_lossy().to_string(),
        ),
    ]);
    let (_sp, sp_addr) = spawn(
        env!("CARGO_BIN_EXE_processor_replica"),
        &sp_config,
        &sp_env,
        "session-processor listening on ",
    )
    .await;

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{sp_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c =
        SessionServiceClient::with_interceptor(channel, Bearer(Some(PROCESSOR_TOKEN.into())));
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let mut req = tonic::Request::new(prompt(&s.id, "How many files?"));
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{CALLER_SPAN}-01").parse().unwrap(),
    );
    let mut stream = c.prompt(req).await.unwrap().into_inner();
    while let Some(ev) = stream.message().await.unwrap() {
        if matches!(
            ev.event.and_then(|e| e.event),
            Some(spb::session_event::Event::Done(_))
        ) {
            break;
        }
    }

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
        Some(s.id.as_str())
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
