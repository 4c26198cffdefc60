//! The floor: the most trivial relay that does the gateway's job shape, and nothing else.
//!
//! It serves the gateway's own `llm.gateway.v1.GatewayService/Stream`, sends an OpenAI Chat request to one upstream
//! with the same HTTP client settings as the gateway's transport (reqwest, `TCP_NODELAY`, the same pool), splits the
//! response body into SSE frames at blank lines and sends each frame's `data:` as one `TextDelta` message, without
//! decoding it. No auth, no validation, no hooks, no catalog, no retries, no metrics. Like the gateway, it streams
//! without a task or a channel between the provider socket and the caller, so the comparison is about the work done
//! per event, not the plumbing.
//!
//! Every figure of the gateway in docs/benchmarks.md is reported beside this relay's, measured in the same run.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures::Stream;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// The floor relay's service.
#[derive(Debug, Clone)]
pub struct Floor {
    client: reqwest::Client,
    url: String,
}

impl Floor {
    /// A relay to `{base_url}/v1/chat/completions`.
    pub fn new(base_url: &str) -> Result<Floor, reqwest::Error> {
        // The gateway's transport settings (services/llm-gateway/src/adapter/transport/mod.rs), minus the redirect policy
        // and timeouts, which cost nothing per event.
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .tcp_keepalive(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(Floor {
            client,
            url: format!("{}/v1/chat/completions", base_url.trim_end_matches('/')),
        })
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, Status>> + Send + 'static>>;

/// The body of the upstream request: the model and the user's text, streamed with usage.
fn request_body(generation: &pb::Generation) -> Vec<u8> {
    let messages: Vec<serde_json::Value> = generation
        .messages
        .iter()
        .map(|m| {
            let text: String = m
                .parts
                .iter()
                .filter_map(|p| match &p.kind {
                    Some(pb::part::Kind::Text(t)) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            serde_json::json!({"role": "user", "content": text})
        })
        .collect();
    serde_json::json!({
        "model": generation.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
    .to_string()
    .into_bytes()
}

/// One relayed response: its body, the bytes of an unfinished frame, and frames not yet sent.
struct Relay {
    response: reqwest::Response,
    buf: BytesMut,
    ready: VecDeque<pb::StreamResponse>,
    ended: bool,
}

impl Relay {
    /// Moves every complete frame in `buf` to `ready`, as a `TextDelta` holding the frame's data.
    fn split(&mut self) {
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let frame = self.buf.split_to(end + 2);
            let line = &frame[..end];
            let data = line.strip_prefix(b"data: ").unwrap_or(line);
            self.ready.push_back(pb::StreamResponse {
                event: Some(pb::stream_response::Event::TextDelta(pb::TextDelta {
                    id: "0".to_owned(),
                    delta: String::from_utf8_lossy(data).into_owned(),
                })),
            });
        }
    }
}

async fn next(mut relay: Relay) -> Option<(Result<pb::StreamResponse, Status>, Relay)> {
    loop {
        if let Some(message) = relay.ready.pop_front() {
            return Some((Ok(message), relay));
        }
        if relay.ended {
            return None;
        }
        match relay.response.chunk().await {
            Ok(Some(chunk)) => {
                relay.buf.extend_from_slice(chunk.chunk());
                relay.split();
            }
            Ok(None) => relay.ended = true,
            Err(e) => {
                relay.ended = true;
                return Some((Err(Status::unavailable(e.to_string())), relay));
            }
        }
    }
}

#[tonic::async_trait]
impl GatewayService for Floor {
    type StreamStream = Events;

    async fn stream(
        &self,
        request: Request<pb::StreamRequest>,
    ) -> Result<Response<Events>, Status> {
        let generation = request
            .into_inner()
            .generation
            .ok_or_else(|| Status::invalid_argument("generation: required"))?;
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(request_body(&generation))
            .send()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(Status::unavailable(format!(
                "upstream answered {}",
                response.status()
            )));
        }
        let relay = Relay {
            response,
            buf: BytesMut::with_capacity(4096),
            ready: VecDeque::new(),
            ended: false,
        };
        Ok(Response::new(Box::pin(futures::stream::unfold(
            relay, next,
        ))))
    }

    async fn generate(
        &self,
        _request: Request<pb::GenerateRequest>,
    ) -> Result<Response<pb::GenerateResponse>, Status> {
        Err(Status::unimplemented("the floor relay only streams"))
    }

    async fn list_models(
        &self,
        _request: Request<pb::ListModelsRequest>,
    ) -> Result<Response<pb::ListModelsResponse>, Status> {
        Err(Status::unimplemented("the floor relay has no catalog"))
    }

    async fn get_model(
        &self,
        _request: Request<pb::GetModelRequest>,
    ) -> Result<Response<pb::GetModelResponse>, Status> {
        Err(Status::unimplemented("the floor relay has no catalog"))
    }

    async fn embed(
        &self,
        _request: Request<pb::EmbedRequest>,
    ) -> Result<Response<pb::EmbedResponse>, Status> {
        Err(Status::unimplemented("the floor relay only streams"))
    }

    async fn count_tokens(
        &self,
        _request: Request<pb::CountTokensRequest>,
    ) -> Result<Response<pb::CountTokensResponse>, Status> {
        Err(Status::unimplemented("the floor relay only streams"))
    }
}

/// Serves the floor on `listener` until `shutdown` resolves, with the gateway's stream limit and `TCP_NODELAY`.
pub async fn serve(
    floor: Floor,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .max_concurrent_streams(10_000)
        .add_service(GatewayServiceServer::new(floor).max_encoding_message_size(usize::MAX))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

#[cfg(test)]
#[path = "floor_tests.rs"]
mod tests;
