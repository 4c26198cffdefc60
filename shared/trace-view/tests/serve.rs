//! The receiver and the HTTP listener over real sockets: spans exported over OTLP/gRPC come back as a tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use tokio::net::TcpListener;
use trace_view::serve::{serve_http, serve_otlp};
use trace_view::store::Traces;

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn span(id: u8, parent: Option<u8>, name: &str, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![7; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: u64::from(id) * 1_000_000,
        end_time_unix_nano: 10_000_000,
        attributes,
        ..Default::default()
    }
}

fn export(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", service)],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[tokio::test]
async fn exported_spans_come_back_as_a_tree_by_trace_and_by_session() {
    let otlp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (otlp_addr, http_addr) = (otlp.local_addr().unwrap(), http.local_addr().unwrap());
    let traces = Arc::new(Mutex::new(Traces::new(10)));
    tokio::spawn(serve_otlp(otlp, traces.clone()));
    tokio::spawn(serve_http(http, traces));

    let mut client = TraceServiceClient::connect(format!("http://{otlp_addr}"))
        .await
        .unwrap();
    let session = vec![kv("gen_ai.conversation.id", "ses_42")];
    client
        .export(export(
            "session-processor",
            vec![span(1, None, "prompt", session)],
        ))
        .await
        .unwrap();
    let model = vec![kv("gen_ai.request.model", "openai/gpt-4o")];
    client
        .export(export(
            "llm-gateway",
            vec![span(2, Some(1), "chat gpt-4o", model)],
        ))
        .await
        .unwrap();

    let get = |path: &str| {
        let url = format!("http://{http_addr}{path}");
        async move {
            let r = reqwest::get(url).await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let trace = "07".repeat(16);
    let (status, list) = get("/traces").await;
    assert_eq!(status, 200);
    assert!(
        list.starts_with(&format!("{trace}  prompt  2 spans")),
        "{list}"
    );
    let expected = format!(
        "trace {trace}\nprompt  [session-processor] 9.000 ms  conversation.id=ses_42\n  chat gpt-4o  [llm-gateway] 8.000 ms  request.model=openai/gpt-4o\n"
    );
    assert_eq!(
        get(&format!("/traces/{trace}")).await,
        (200, expected.clone())
    );
    assert_eq!(get("/traces?session=ses_42").await, (200, expected));
    assert_eq!(get("/traces?session=ses_none").await.0, 404);
    assert_eq!(get("/traces/ffff").await.0, 404);
}
