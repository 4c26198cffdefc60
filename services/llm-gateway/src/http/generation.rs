//! The one way the HTTP front door runs a generation: the same validation, tracing span, trace propagation and
//! [`Gateway::stream`] as the gRPC `Stream` and `Generate` methods, so hooks, retries, fallbacks, timeouts, metrics
//! and cost are the same whichever door a call came in by.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use http::HeaderMap;
use llm_proto::gateway as pb;

use crate::generate::Gateway;
use crate::http::errors::{ApiError, Class};
use crate::protocol::Protocol;

/// A started generation's events, `stream_start` first.
pub type Events = Pin<Box<dyn Stream<Item = pb::StreamResponse> + Send>>;

/// A generation that produced its first event.
pub struct Started {
    /// Its events, `stream_start` first.
    pub events: Events,
    /// The wire protocol of the provider serving it: whose error objects the door may relay as they are.
    pub protocol: Option<Protocol>,
    /// The provider's rate-limit and request-id headers, relayed on the door's response.
    pub headers: Vec<(String, String)>,
}

/// Validates and starts `generation`, and waits for its first event past `stream_start`, so a generation that
/// failed before any output (every retry and fallback spent) is an error status rather than a stream that opens
/// and fails at once. The first events are handed back in the stream.
pub async fn start(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    headers: &HeaderMap,
    generation: pb::Generation,
) -> Result<Started, ApiError> {
    use pb::stream_response::Event as E;
    let config = gateway.config();
    let generation = crate::offload::validated(Some(generation), &config.limits)
        .await
        .map_err(|s| ApiError::from_status(&s))?;
    let metadata = tonic::metadata::MetadataMap::from_headers(headers.clone());
    let mut traced = crate::rpc::start_traced(gateway, generation, &metadata, caller)
        .await
        .map_err(|e| ApiError::from_start(&e))?;
    let mut head = Vec::with_capacity(2);
    let mut protocol = None;
    let mut relayed = Vec::new();
    loop {
        let Some(ev) = traced.next().await else {
            return Err(ApiError::new(
                Class::Internal,
                "the generation ended without a result",
            ));
        };
        match &ev.event {
            Some(E::StreamStart(s)) => {
                protocol = Protocol::from_name(&s.protocol);
                relayed = s
                    .provider_headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                head.push(ev);
            }
            Some(E::Error(e)) => {
                let e = crate::convert::error_from_pb(e);
                return Err(ApiError::from_provider(&e, protocol));
            }
            _ => {
                head.push(ev);
                break;
            }
        }
    }
    Ok(Started {
        events: Box::pin(futures::stream::iter(head).chain(traced)),
        protocol,
        headers: relayed,
    })
}

/// Runs `events` to the end and folds them into one reply, or the error that ended them (from a provider speaking
/// `protocol`).
pub async fn collect(
    mut events: Events,
    protocol: Option<Protocol>,
) -> Result<pb::GenerateResponse, ApiError> {
    use pb::stream_response::Event as E;
    let mut collector = crate::convert::Collector::default();
    while let Some(ev) = events.next().await {
        if let Some(E::Error(e)) = &ev.event {
            let e = crate::convert::error_from_pb(e);
            return Err(ApiError::from_provider(&e, protocol));
        }
        collector.push(ev).map_err(|s| ApiError::from_status(&s))?;
    }
    collector.finish().map_err(|s| ApiError::from_status(&s))
}
