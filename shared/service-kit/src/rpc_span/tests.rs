#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tonic::codegen::http::{HeaderMap, HeaderValue, Request, Response};
use tower::{Layer, Service, ServiceExt};
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

use super::*;

#[test]
fn a_path_splits_into_service_and_method() {
    assert_eq!(
        split_path("/llm.gateway.v1.GatewayService/Stream"),
        Some(("llm.gateway.v1.GatewayService", "Stream"))
    );
    for bad in ["", "/", "/Svc", "/Svc/", "//M", "Svc/M", "/a/b/c"] {
        assert_eq!(split_path(bad), None, "{bad:?}");
    }
}

#[test]
fn the_status_is_read_from_grpc_status() {
    let headers = |v: &'static str| {
        let mut h = HeaderMap::new();
        h.insert("grpc-status", HeaderValue::from_static(v));
        h
    };
    assert_eq!(status_in(&headers("0")), Some(0));
    assert_eq!(status_in(&headers("5")), Some(5));
    assert_eq!(status_in(&headers("16")), Some(16));
    for bad in ["", "x", "-1", "1234", " 5"] {
        assert_eq!(status_in(&headers(bad)), None, "{bad:?}");
    }
    assert_eq!(status_in(&HeaderMap::new()), None);
}

#[test]
fn a_server_counts_only_its_own_failures_as_errors_and_a_client_every_failure() {
    for code in 0..=16 {
        let server = matches!(code, 2 | 4 | 12 | 13 | 14 | 15);
        assert_eq!(is_error(Side::Server, code), server, "server, {code}");
        assert_eq!(is_error(Side::Client, code), code != 0, "client, {code}");
    }
    assert_eq!(code_name(0), "OK");
    assert_eq!(code_name(5), "NOT_FOUND");
    assert_eq!(code_name(16), "UNAUTHENTICATED");
    assert_eq!(code_name(17), "_OTHER");
    assert_eq!(code_name(-1), "_OTHER");
    assert_eq!(status_of_http(404), 12);
    assert_eq!(status_of_http(503), 14);
    assert_eq!(status_of_http(500), 2);
}

/// A span as the capturing subscriber saw it: its name, fields (integers as integers), parent and whether it ended.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    fields: BTreeMap<String, Value>,
    parent: Option<u64>,
    closed: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i64),
    Str(String),
}

impl Visit for Seen {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.insert(field.name().into(), Value::Int(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().into(), Value::Str(value.into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields
            .insert(field.name().into(), Value::Str(format!("{value:?}")));
    }
}

/// Every span, by id.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<BTreeMap<u64, Seen>>>);

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>>
    tracing_subscriber::Layer<S> for Capture
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut seen = Seen {
            name: attrs.metadata().name().into(),
            parent: ctx.span_scope(id).and_then(|mut s| {
                s.next();
                s.next().map(|p| p.id().into_u64())
            }),
            ..Seen::default()
        };
        attrs.record(&mut seen);
        self.0.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: Context<'_, S>,
    ) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(seen);
        }
    }

    fn on_close(&self, id: tracing::span::Id, _: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            seen.closed = true;
        }
    }
}

impl Capture {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    /// The one span named `name`.
    fn span(&self, name: &str) -> (u64, Seen) {
        let spans = self.0.lock().unwrap();
        let mut found = spans.iter().filter(|(_, s)| s.name == name);
        let (id, seen) = found.next().unwrap_or_else(|| panic!("no {name} span"));
        assert!(found.next().is_none(), "one {name} span");
        (*id, seen.clone())
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

fn int(seen: &Seen, key: &str) -> Option<i64> {
    match seen.fields.get(key)? {
        Value::Int(i) => Some(*i),
        other => panic!("{key} is not an integer: {other:?}"),
    }
}

fn string(seen: &Seen, key: &str) -> Option<String> {
    match seen.fields.get(key)? {
        Value::Str(s) => Some(s.clone()),
        other => panic!("{key} is not a string: {other:?}"),
    }
}

type Frames = futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>;
type TestBody = StreamBody<Frames>;

/// A body of one message and then trailers with `grpc-status: code`, or (`None`) one message and no end.
fn body(code: Option<&'static str>) -> TestBody {
    let message = futures::stream::once(async { Ok(Frame::data(Bytes::from_static(b"m"))) });
    StreamBody::new(match code {
        Some(code) => {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static(code));
            message
                .chain(futures::stream::once(async {
                    Ok(Frame::trailers(trailers))
                }))
                .boxed()
        }
        None => message.chain(futures::stream::pending()).boxed(),
    })
}

const SERVED: &[&str] = &["test.v1.Echo"];

/// A service whose handler opens a span of its own and answers with `answer()`.
fn answering(
    answer: fn() -> Response<TestBody>,
) -> impl Service<Request<()>, Response = Response<TestBody>, Error = Infallible, Future = impl Send>
+ Clone {
    tower::service_fn(move |_req: Request<()>| async move {
        let _handler = tracing::info_span!("handler").entered();
        Ok::<_, Infallible>(answer())
    })
}

/// A server of [`SERVED`] over [`answering`].
fn server(
    answer: fn() -> Response<TestBody>,
) -> SpanService<
    impl Service<Request<()>, Response = Response<TestBody>, Error = Infallible, Future = impl Send>
    + Clone,
> {
    ServerSpanLayer::new(SERVED).layer(answering(answer))
}

fn request(path: &str) -> Request<()> {
    let mut req = Request::new(());
    *req.uri_mut() = format!("http://gateway.example:50051{path}")
        .parse()
        .unwrap();
    req
}

/// One call of `path` to a [`server`] answering `answer()`, its response read to the end.
async fn serve_to_end(answer: fn() -> Response<TestBody>, path: &str) {
    let res = server(answer).oneshot(request(path)).await.unwrap();
    drain(res.into_body()).await;
}

/// Reads `body` to its end.
async fn drain<B: http_body::Body + Unpin>(mut body: B) {
    while body.frame().await.is_some() {}
}

#[tokio::test]
async fn a_server_span_ends_with_the_status_in_the_trailers() {
    let capture = Capture::default();
    let _guard = capture.install();
    let res = server(|| Response::new(body(Some("5"))))
        .oneshot(request("/test.v1.Echo/Say"))
        .await
        .unwrap();
    let (id, open) = capture.span("grpc");
    assert!(!open.closed, "the call is not over before its body");
    assert_eq!(
        capture.span("handler").1.parent,
        Some(id),
        "the handler runs inside the call's span"
    );
    drain(res.into_body()).await;
    let (_, seen) = capture.span("grpc");
    assert!(seen.closed);
    assert_eq!(
        string(&seen, "otel.name").as_deref(),
        Some("test.v1.Echo/Say")
    );
    assert_eq!(string(&seen, "otel.kind").as_deref(), Some("server"));
    assert_eq!(string(&seen, "rpc.system").as_deref(), Some("grpc"));
    assert_eq!(
        string(&seen, "rpc.service").as_deref(),
        Some("test.v1.Echo")
    );
    assert_eq!(string(&seen, "rpc.method").as_deref(), Some("Say"));
    assert_eq!(int(&seen, "rpc.grpc.status_code"), Some(5));
    assert_eq!(
        string(&seen, "server.address").as_deref(),
        Some("gateway.example")
    );
    assert_eq!(int(&seen, "server.port"), Some(50051));
    // NOT_FOUND is the caller's mistake: not an error of the server's span.
    assert_eq!(string(&seen, "otel.status_code"), None);
    assert_eq!(string(&seen, "error.type"), None);
}

#[tokio::test]
async fn a_server_failure_is_an_error_of_its_span() {
    let capture = Capture::default();
    let _guard = capture.install();
    serve_to_end(|| Response::new(body(Some("13"))), "/test.v1.Echo/Say").await;
    let (_, seen) = capture.span("grpc");
    assert_eq!(int(&seen, "rpc.grpc.status_code"), Some(13));
    assert_eq!(string(&seen, "otel.status_code").as_deref(), Some("ERROR"));
    assert_eq!(string(&seen, "error.type").as_deref(), Some("INTERNAL"));
}

#[tokio::test]
async fn a_stream_the_caller_cancels_ends_its_span_as_cancelled() {
    let capture = Capture::default();
    let _guard = capture.install();
    let res = server(|| Response::new(body(None)))
        .oneshot(request("/test.v1.Echo/Stream"))
        .await
        .unwrap();
    let mut body = res.into_body();
    assert!(body.frame().await.is_some(), "the first message");
    assert!(!capture.span("grpc").1.closed);
    drop(body);
    let (_, seen) = capture.span("grpc");
    assert!(seen.closed, "dropping the body ends the span");
    assert_eq!(int(&seen, "rpc.grpc.status_code"), Some(1));
    assert_eq!(string(&seen, "otel.status_code"), None);
}

#[tokio::test]
async fn a_trailers_only_answer_takes_its_status_from_the_headers() {
    let capture = Capture::default();
    let _guard = capture.install();
    let trailers_only = || {
        let mut res = Response::new(StreamBody::new(futures::stream::empty().boxed()));
        res.headers_mut()
            .insert("grpc-status", HeaderValue::from_static("4"));
        res
    };
    serve_to_end(trailers_only, "/test.v1.Echo/Say").await;
    let (_, seen) = capture.span("grpc");
    assert_eq!(int(&seen, "rpc.grpc.status_code"), Some(4));
    assert_eq!(
        string(&seen, "error.type").as_deref(),
        Some("DEADLINE_EXCEEDED")
    );
}

#[tokio::test]
async fn calls_of_services_the_server_does_not_name_are_not_traced() {
    let capture = Capture::default();
    let _guard = capture.install();
    serve_to_end(
        || Response::new(body(Some("0"))),
        "/grpc.health.v1.Health/Check",
    )
    .await;
    assert_eq!(capture.count(), 1, "only the handler's own span");
}

#[tokio::test]
async fn a_client_span_is_a_child_of_the_current_span_and_every_failure_is_an_error() {
    let capture = Capture::default();
    let _guard = capture.install();
    let res = ClientSpanLayer::new(Some(("gateway".into(), 443)))
        .layer(answering(|| Response::new(body(Some("5")))))
        .oneshot(request("/test.v1.Echo/Say"))
        .instrument(tracing::info_span!("step"))
        .await
        .unwrap();
    drain(res.into_body()).await;
    let (step_id, _) = capture.span("step");
    let (_, seen) = capture.span("grpc");
    assert_eq!(seen.parent, Some(step_id));
    assert_eq!(string(&seen, "otel.kind").as_deref(), Some("client"));
    assert_eq!(int(&seen, "rpc.grpc.status_code"), Some(5));
    assert_eq!(string(&seen, "otel.status_code").as_deref(), Some("ERROR"));
    assert_eq!(string(&seen, "error.type").as_deref(), Some("NOT_FOUND"));
    assert_eq!(string(&seen, "server.address").as_deref(), Some("gateway"));
    assert_eq!(int(&seen, "server.port"), Some(443));
}

#[tokio::test]
async fn a_client_that_gives_up_before_the_answer_records_cancelled() {
    let capture = Capture::default();
    let _guard = capture.install();
    let mut svc = ClientSpanLayer::new(None).layer(tower::service_fn(|_req: Request<()>| {
        futures::future::pending::<Result<Response<TestBody>, Infallible>>()
    }));
    let call = svc.call(request("/test.v1.Echo/Say"));
    drop(call);
    let (_, seen) = capture.span("grpc");
    assert!(seen.closed);
    assert_eq!(int(&seen, "rpc.grpc.status_code"), Some(1));
    assert_eq!(string(&seen, "error.type").as_deref(), Some("CANCELLED"));
    assert_eq!(string(&seen, "server.address"), None, "no single target");
}
