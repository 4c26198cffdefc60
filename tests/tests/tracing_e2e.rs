//! One trace per generation across both services: caller → processor (`SessionService/Prompt` server span →
//! `invoke_agent` → `step {n}` → `GatewayService/Stream` client span) → gateway (`GatewayService/Stream` server
//! span → `chat {model}`) → provider request, collected by a real OTLP receiver from two service processes; and the
//! gRPC call spans' final statuses on both sides (an unknown model, a cancelled stream).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::TOKEN;
use e2e_tests::otlp::{OtlpReceiver, Span, SpanKind, assert_rpc_span};
use e2e_tests::processor::{PROCESSOR_TOKEN, SessionsClient, client_at, create_session, prompt};
use e2e_tests::stack::{Stack, StackSetup, otel_env};
use fake_provider::openai_sse::ChatStream;
use fake_provider::{FakeProvider, Reply};
use llm_proto::sessions as spb;
use opentelemetry_proto::tonic::common::v1::any_value::Value;

const TRACE_ID: &str = "5b8aa5a2d2c872e8321cf37308d69df2";
const CALLER_SPAN: &str = "051581bf3cb55c13";
const PROMPT: &str = "llm.sessions.v1.SessionService/Prompt";
const STREAM: &str = "llm.gateway.v1.GatewayService/Stream";

/// A session in the workspace `w` (which holds one file).
fn in_workspace() -> spb::CreateSessionRequest {
    spb::CreateSessionRequest {
        workspace: "w".into(),
        ..Default::default()
    }
}

/// `message` in the caller's sampled trace `trace`, the caller's span [`CALLER_SPAN`].
fn in_trace<T>(trace: &str, message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{trace}-{CALLER_SPAN}-01").parse().unwrap(),
    );
    req
}

/// The two services, exporting to one OTLP receiver, the gateway calling `fake`; and a client of the processor.
struct Pair {
    _stack: Stack,
    client: SessionsClient,
}

async fn start_pair(otlp: &OtlpReceiver, fake: &FakeProvider) -> Pair {
    let env = |name: &str| {
        let mut env = otel_env(otlp.endpoint(), name);
        env.push(("RUST_LOG", "warn".to_string()));
        env
    };
    let stack = Stack::start(
        StackSetup {
            label: "trace",
            gateway_toml: format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n",
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
    let client = client_at(&stack.processor.addr, PROCESSOR_TOKEN).await;
    Pair {
        _stack: stack,
        client,
    }
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
    let mut pair = start_pair(&otlp, &fake).await;
    let c = &mut pair.client;
    let s = create_session(c, in_workspace()).await;
    // The stream ends after `done`, with its status.
    let mut stream = c
        .prompt(in_trace(TRACE_ID, prompt(&s.id, "How many files?")))
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}

    // Each service exports in its own batches: wait for the whole tree, not only the spans counted here (every
    // span's parent in, and the gateway's server span of every call of the processor's).
    let spans = otlp
        .wait_until(Duration::from_secs(20), |s| {
            s.iter().filter(|s| s.name == "chat openai/gpt-4o").count() >= 2
                && s.iter().filter(|s| s.name.starts_with("step ")).count() >= 2
                && s.iter().any(|s| s.name == "invoke_agent")
                && s.iter().any(|s| s.name == PROMPT)
                && whole_tree(s)
        })
        .await;
    let of_trace: Vec<_> = spans.iter().filter(|s| s.trace_id == TRACE_ID).collect();
    let call = of_trace
        .iter()
        .find(|s| s.name == PROMPT)
        .expect("the prompt's server span in the caller's trace");
    assert_eq!(call.service, "session-processor");
    assert_eq!(
        call.parent_id, CALLER_SPAN,
        "the caller's span is its parent"
    );
    assert_rpc_span(call, SpanKind::Server, PROMPT, 0, false);
    let root = of_trace
        .iter()
        .find(|s| s.name == "invoke_agent")
        .expect("the loop's span in the caller's trace");
    assert_eq!(root.service, "session-processor");
    assert_eq!(
        root.parent_id, call.span_id,
        "the loop runs under the prompt's call"
    );
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
        let (calling, served) = call_pair(&of_trace, &chat.parent_id);
        assert_eq!(calling.name, STREAM);
        let step = steps
            .iter()
            .find(|s| s.span_id == calling.parent_id)
            .expect("each gateway call is a child of a processor step");
        assert_eq!(served.span_id, chat.parent_id);
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
    let chat1 = chats
        .iter()
        .find(|c| call_pair(&of_trace, &c.parent_id).0.parent_id == first.span_id)
        .unwrap();
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
    // Every gateway call of the processor (the steps' streams, the loop's catalog lookups) is a client span whose
    // child is the gateway's server span of that call.
    for client in of_trace
        .iter()
        .filter(|s| s.kind() == SpanKind::Client && s.name.contains("Service/"))
    {
        let served = of_trace
            .iter()
            .find(|s| s.parent_id == client.span_id)
            .unwrap_or_else(|| panic!("the gateway's span of {}", client.name));
        call_pair(&of_trace, &served.span_id);
    }
    assert_semconv_types(&of_trace);
}

/// Every span of the caller's trace has its parent among `spans` (or is the caller's child), and every gateway call
/// of the processor has the gateway's span under it.
fn whole_tree(spans: &[Span]) -> bool {
    let of_trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == TRACE_ID).collect();
    let ids: std::collections::HashSet<&str> =
        of_trace.iter().map(|s| s.span_id.as_str()).collect();
    let parents: std::collections::HashSet<&str> =
        of_trace.iter().map(|s| s.parent_id.as_str()).collect();
    of_trace
        .iter()
        .all(|s| s.parent_id == CALLER_SPAN || ids.contains(s.parent_id.as_str()))
        && of_trace
            .iter()
            .filter(|s| s.kind() == SpanKind::Client && s.name.contains("Service/"))
            .all(|s| parents.contains(s.span_id.as_str()))
}

/// The processor's client span and the gateway's server span of one gateway call, found from the server span's id
/// (`served_id`), both checked against the conventions (a successful call).
fn call_pair<'a>(spans: &[&'a Span], served_id: &str) -> (&'a Span, &'a Span) {
    let served = *spans
        .iter()
        .find(|s| s.span_id == served_id)
        .expect("the gateway's server span of the call");
    assert_eq!(served.service, "llm-gateway");
    assert_rpc_span(served, SpanKind::Server, &served.name, 0, false);
    let calling = *spans
        .iter()
        .find(|s| s.span_id == served.parent_id)
        .expect("the processor's client span is the parent of the gateway's");
    assert_eq!(calling.service, "session-processor");
    assert_rpc_span(calling, SpanKind::Client, &served.name, 0, false);
    (calling, served)
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

/// The attribute types of the GenAI, RPC and OpenTelemetry conventions, as the receiver got them: counts, costs,
/// status codes and ports as integers, durations as doubles, names as strings; no attribute an empty string (absent ones are left out); the
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
        } else if name.contains("Service/") {
            for key in ["rpc.grpc.status_code", "server.port"] {
                assert!(is_int(span, key), "{key} on {name}: {:?}", span.value(key));
            }
            for key in ["rpc.system", "rpc.service", "rpc.method", "server.address"] {
                string(span, key);
            }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_spans_end_with_an_unknown_models_and_a_cancelled_streams_status() {
    const UNKNOWN_TRACE: &str = "6e0c63257de34c926f9efcd03927272e";
    const CANCEL_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    // The stream stalls after its first text, until the caller aborts it.
    fake.push(
        Reply::sse(
            ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-c")
                .text(&["Hel", "lo"])
                .finish("stop", Some((5, 1))),
        )
        .stall_after(2),
    );
    let mut pair = start_pair(&otlp, &fake).await;
    let c = &mut pair.client;

    // An unknown default model: the processor's GetModel gets NOT_FOUND (an error of its client span, not of the
    // gateway's server span); the caller gets INVALID_ARGUMENT (not an error of the processor's server span).
    let unknown = spb::CreateSessionRequest {
        default_model: "openai/no-such-model".into(),
        ..in_workspace()
    };
    let refused = c
        .create_session(in_trace(UNKNOWN_TRACE, unknown))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    // A prompt whose caller lets go of its stream after the first text, then aborts the loop: each call span says
    // CANCELLED, an error only of the client's span.
    let s = create_session(c, in_workspace()).await;
    let mut stream = c
        .prompt(in_trace(CANCEL_TRACE, prompt(&s.id, "Say hello")))
        .await
        .unwrap()
        .into_inner();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(ev) = stream.message().await.unwrap() {
            if matches!(
                ev.event.and_then(|e| e.event),
                Some(spb::session_event::Event::PartDelta(_))
            ) {
                return;
            }
        }
        panic!("the prompt's stream ended before its first text");
    })
    .await
    .expect("the first text within 20 s");
    drop(stream);
    c.abort(spb::AbortRequest {
        session_id: s.id.clone(),
    })
    .await
    .unwrap();

    let code = |s: &Span| s.int("rpc.grpc.status_code");
    let spans = otlp
        .wait_until(Duration::from_secs(20), |spans| {
            let of = |trace: &str, name: &str, c: i64| {
                spans
                    .iter()
                    .any(|s| s.trace_id == trace && s.name == name && code(s) == Some(c))
            };
            of(
                UNKNOWN_TRACE,
                "llm.sessions.v1.SessionService/CreateSession",
                3,
            ) && of(CANCEL_TRACE, PROMPT, 1)
                && spans
                    .iter()
                    .filter(|s| {
                        s.trace_id == CANCEL_TRACE && s.name == STREAM && code(s) == Some(1)
                    })
                    .count()
                    == 2
        })
        .await;
    let one = |trace: &str, name: &str, kind: SpanKind| -> &Span {
        let mut found = spans
            .iter()
            .filter(|s| s.trace_id == trace && s.name == name && s.kind() == kind);
        let span = found
            .next()
            .unwrap_or_else(|| panic!("{kind:?} span {name} in {trace}"));
        assert!(
            found.next().is_none(),
            "one {kind:?} span {name} in {trace}"
        );
        span
    };

    let create = one(
        UNKNOWN_TRACE,
        "llm.sessions.v1.SessionService/CreateSession",
        SpanKind::Server,
    );
    assert_rpc_span(
        create,
        SpanKind::Server,
        "llm.sessions.v1.SessionService/CreateSession",
        3,
        false,
    );
    let get_model = "llm.gateway.v1.GatewayService/GetModel";
    let asked = one(UNKNOWN_TRACE, get_model, SpanKind::Client);
    assert_rpc_span(asked, SpanKind::Client, get_model, 5, true);
    assert_eq!(asked.string("error.type"), Some("NOT_FOUND"));
    assert_eq!(
        asked.parent_id, create.span_id,
        "asked while the session was created"
    );
    let answered = one(UNKNOWN_TRACE, get_model, SpanKind::Server);
    assert_rpc_span(answered, SpanKind::Server, get_model, 5, false);
    assert_eq!(answered.parent_id, asked.span_id);

    let prompted = one(CANCEL_TRACE, PROMPT, SpanKind::Server);
    assert_rpc_span(prompted, SpanKind::Server, PROMPT, 1, false);
    let streamed = one(CANCEL_TRACE, STREAM, SpanKind::Client);
    assert_rpc_span(streamed, SpanKind::Client, STREAM, 1, true);
    assert_eq!(streamed.string("error.type"), Some("CANCELLED"));
    let served = one(CANCEL_TRACE, STREAM, SpanKind::Server);
    assert_rpc_span(served, SpanKind::Server, STREAM, 1, false);
    assert_eq!(served.parent_id, streamed.span_id);
}
