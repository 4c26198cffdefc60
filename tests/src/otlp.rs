//! A real OTLP trace receiver (the OTLP/gRPC `TraceService`) on a loopback port, collecting every span the services
//! export, so tests can assert span trees, parent links across services, and attributes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
pub use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use tokio::sync::watch;
use trace_view::store::{hex, service_name};

/// One received span with the service that exported it.
#[derive(Debug, Clone)]
pub struct Span {
    /// `service.name` of the exporting resource.
    pub service: String,
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
    /// Hex parent span id (empty for a root).
    pub parent_id: String,
    /// Span name.
    pub name: String,
    /// The raw span, for attributes and status.
    pub raw: OtlpSpan,
    /// The exporting resource's attributes (`service.name`, `service.version`, `service.instance.id`, ...).
    pub resource: Vec<KeyValue>,
}

impl Span {
    /// A string, integer, double or bool attribute rendered as a string.
    pub fn attr(&self, key: &str) -> Option<String> {
        self.raw
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| {
                Some(match kv.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(s) => s.clone(),
                    Value::IntValue(i) => i.to_string(),
                    Value::DoubleValue(d) => d.to_string(),
                    Value::BoolValue(b) => b.to_string(),
                    other => format!("{other:?}"),
                })
            })
    }
}

impl Span {
    /// An attribute's value with its OTLP type (string, int, double, bool, array), for asserting types.
    pub fn value(&self, key: &str) -> Option<&Value> {
        find(&self.raw.attributes, key)
    }

    /// A string-array attribute (such as `gen_ai.response.finish_reasons`); None when absent or of another type.
    pub fn strings(&self, key: &str) -> Option<Vec<String>> {
        match self.value(key)? {
            Value::ArrayValue(a) => a
                .values
                .iter()
                .map(|v| match &v.value {
                    Some(Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// A resource attribute's value with its OTLP type.
    pub fn resource_value(&self, key: &str) -> Option<&Value> {
        find(&self.resource, key)
    }
}

impl Span {
    /// An integer attribute; `None` when absent, a panic when it has another type (integers must be integers).
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.value(key)? {
            Value::IntValue(i) => Some(*i),
            other => panic!("{key} on {} is not an integer: {other:?}", self.name),
        }
    }

    /// A string attribute; `None` when absent, a panic when it has another type.
    pub fn string(&self, key: &str) -> Option<&str> {
        match self.value(key)? {
            Value::StringValue(s) => Some(s),
            other => panic!("{key} on {} is not a string: {other:?}", self.name),
        }
    }

    /// The span's kind.
    pub fn kind(&self) -> SpanKind {
        SpanKind::try_from(self.raw.kind).unwrap_or(SpanKind::Unspecified)
    }

    /// Whether the span's status is an error.
    pub fn is_error(&self) -> bool {
        self.raw
            .status
            .as_ref()
            .is_some_and(|s| s.code == StatusCode::Error as i32)
    }
}

/// Asserts that `span` is a gRPC call span per the OpenTelemetry RPC conventions: named `path` (`package.Service/
/// Method`) with `kind`, `rpc.system`, `rpc.service` and `rpc.method` as strings, `rpc.grpc.status_code` the integer
/// `code`, `server.address` a string and `server.port` an integer (when present), and the error status with
/// `error.type` (the code's name) exactly when `error`.
pub fn assert_rpc_span(span: &Span, kind: SpanKind, path: &str, code: i64, error: bool) {
    let (service, method) = path.split_once('/').expect("package.Service/Method");
    assert_eq!(span.name, path);
    assert_eq!(span.kind(), kind, "{path}");
    assert_eq!(span.string("rpc.system"), Some("grpc"), "{path}");
    assert_eq!(span.string("rpc.service"), Some(service), "{path}");
    assert_eq!(span.string("rpc.method"), Some(method), "{path}");
    assert_eq!(span.int("rpc.grpc.status_code"), Some(code), "{path}");
    assert!(
        span.string("server.address").is_some_and(|a| !a.is_empty()),
        "{path}"
    );
    assert!(span.int("server.port").is_some_and(|p| p > 0), "{path}");
    if kind == SpanKind::Server {
        assert!(
            span.string("network.peer.address")
                .is_some_and(|a| !a.is_empty()),
            "{path}"
        );
        assert!(
            span.int("network.peer.port").is_some_and(|p| p > 0),
            "{path}"
        );
    }
    assert_eq!(
        span.is_error(),
        error,
        "{path} with code {code}: error status"
    );
    assert_eq!(
        span.string("error.type").is_some(),
        error,
        "{path} with code {code}: error.type"
    );
}

fn find<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

#[derive(Clone)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    changed: watch::Sender<usize>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        for rs in request.into_inner().resource_spans {
            let resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
            let service = service_name(&resource);
            for ss in rs.scope_spans {
                for s in ss.spans {
                    spans.push(Span {
                        service: service.clone(),
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent_id: hex(&s.parent_span_id),
                        name: s.name.clone(),
                        raw: s,
                        resource: resource.clone(),
                    });
                }
            }
        }
        let n = spans.len();
        drop(spans);
        self.changed.send_replace(n);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A running OTLP receiver.
pub struct OtlpReceiver {
    /// Its address.
    pub addr: std::net::SocketAddr,
    collector: Collector,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl OtlpReceiver {
    /// Starts a receiver on `127.0.0.1:0`.
    pub async fn start() -> OtlpReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind otlp receiver");
        let addr = listener.local_addr().expect("addr");
        let (changed, _) = watch::channel(0);
        let collector = Collector {
            spans: Arc::default(),
            changed,
        };
        let svc = TraceServiceServer::new(collector.clone());
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
        });
        OtlpReceiver {
            addr,
            collector,
            server,
        }
    }

    /// The endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.collector
            .spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits (on export notifications, not by polling) until `done` holds for the received spans.
    pub async fn wait_until(&self, timeout: Duration, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let mut rx = self.collector.changed.subscribe();
        let wait = async {
            loop {
                let spans = self.spans();
                if done(&spans) {
                    return spans;
                }
                if rx.changed().await.is_err() {
                    return self.spans();
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(spans) => spans,
            Err(_) => {
                let spans = self.spans();
                let names: Vec<String> = spans
                    .iter()
                    .map(|s| format!("{}:{}", s.service, s.name))
                    .collect();
                panic!("spans did not arrive in {timeout:?}; received {names:?}");
            }
        }
    }
}
