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
use tokio::sync::watch;

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

fn find<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
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
