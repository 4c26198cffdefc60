//! The `SessionService` calls that stream a session's events (`Prompt`, `Subscribe`, `Compact`), served with a codec
//! that writes each event straight from the form this replica keeps it in ([`Outgoing`]): a delta from the ring costs
//! no message to be made, encoded and freed. Every other call, and an unknown method, goes to the generated server.
//! Requests decode as the generated code decodes them (the codec of `llm_proto::codec`), with the same size limit and
//! compression, so a caller cannot tell the two apart.

use std::marker::PhantomData;
use std::sync::Arc;

use llm_proto::codec::ProstCodec;
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_server::SessionServiceServer;
use service_kit::hand_wired::{BoxFuture, HandRoutes, HandWired, RouteFuture};
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};
use tonic::{Request, Response, Status};

use super::{OutgoingStream, Sessions};
use crate::event_wire::Outgoing;

/// The `SessionService` these routes and the generated server serve together.
pub(super) type SessionServer = HandWired<StreamingRoutes, SessionServiceServer<Sessions>>;

/// The service: the streaming calls here, the rest by the generated server, requests up to `max_request_bytes`.
pub(super) fn session_server(sessions: Sessions, max_request_bytes: usize) -> SessionServer {
    let sessions = Arc::new(sessions);
    let generated = service_kit::compressed!(
        SessionServiceServer::from_arc(Arc::clone(&sessions))
            .max_decoding_message_size(max_request_bytes)
    );
    HandWired::new(
        StreamingRoutes {
            sessions,
            max_request_bytes,
        },
        generated,
    )
}

/// The calls that stream a session's events.
#[derive(Clone)]
pub(super) struct StreamingRoutes {
    sessions: Arc<Sessions>,
    max_request_bytes: usize,
}

/// One of them.
pub(super) enum Streaming {
    Prompt,
    Subscribe,
    Compact,
}

type Handler<Req> =
    fn(Arc<Sessions>, Request<Req>) -> BoxFuture<Result<Response<OutgoingStream>, Status>>;

impl HandRoutes for StreamingRoutes {
    const SERVICE: &'static str = "/llm.sessions.v1.SessionService/";
    type Route = Streaming;

    fn pick(method: &str) -> Option<Streaming> {
        match method {
            "Prompt" => Some(Streaming::Prompt),
            "Subscribe" => Some(Streaming::Subscribe),
            "Compact" => Some(Streaming::Compact),
            _ => None,
        }
    }

    fn serve(&self, route: Streaming, req: http::Request<tonic::body::Body>) -> RouteFuture {
        let sessions = Arc::clone(&self.sessions);
        let max = self.max_request_bytes;
        match route {
            Streaming::Prompt => streaming::<pb::PromptRequest>(sessions, max, req, |s, r| {
                Box::pin(async move { s.prompt_events(r).await })
            }),
            Streaming::Subscribe => {
                streaming::<pb::SubscribeRequest>(sessions, max, req, |s, r| {
                    Box::pin(async move { s.subscribe_events(r).await })
                })
            }
            Streaming::Compact => streaming::<pb::CompactRequest>(sessions, max, req, |s, r| {
                Box::pin(async move { s.compact_events(r).await })
            }),
        }
    }
}

/// Serves one streaming call through tonic's server-streaming machinery with [`EventCodec`].
fn streaming<Req>(
    sessions: Arc<Sessions>,
    max: usize,
    req: http::Request<tonic::body::Body>,
    handler: Handler<Req>,
) -> RouteFuture
where
    Req: prost::Message + Default + Send + 'static,
{
    Box::pin(async move {
        let mut grpc = service_kit::compressed!(
            tonic::server::Grpc::new(EventCodec::<Req>::default())
                .apply_max_message_size_config(Some(max), Some(usize::MAX))
        );
        Ok(grpc
            .server_streaming(StreamingMethod { sessions, handler }, req)
            .await)
    })
}

/// A streaming method, handed to tonic.
struct StreamingMethod<Req> {
    sessions: Arc<Sessions>,
    handler: Handler<Req>,
}

impl<Req: Send + 'static> tonic::server::ServerStreamingService<Req> for StreamingMethod<Req> {
    type Response = Outgoing;
    type ResponseStream = OutgoingStream;
    type Future = BoxFuture<Result<Response<OutgoingStream>, Status>>;

    fn call(&mut self, request: Request<Req>) -> Self::Future {
        (self.handler)(Arc::clone(&self.sessions), request)
    }
}

/// Requests decoded by the generated code's codec; each event written by [`Outgoing::encode_response`] into the
/// response's buffer, which starts as small as that codec's.
struct EventCodec<Req> {
    generated: ProstCodec<pb::SessionEvent, Req>,
    request: PhantomData<fn() -> Req>,
}

impl<Req: prost::Message + Default> Default for EventCodec<Req> {
    fn default() -> Self {
        EventCodec {
            generated: ProstCodec::new(),
            request: PhantomData,
        }
    }
}

impl<Req> Clone for EventCodec<Req> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Req> Copy for EventCodec<Req> {}

impl<Req: Send + 'static> Codec for EventCodec<Req> {
    type Encode = Outgoing;
    type Decode = Req;
    type Encoder = Self;
    type Decoder = ProstCodec<pb::SessionEvent, Req>;

    fn encoder(&mut self) -> Self {
        *self
    }

    fn decoder(&mut self) -> Self::Decoder {
        self.generated
    }
}

impl<Req> Encoder for EventCodec<Req> {
    type Item = Outgoing;
    type Error = Status;

    fn encode(&mut self, item: Outgoing, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // `EncodeBuf` grows as needed, so writing cannot run out of room.
        item.encode_response(dst);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        // The generated codec's starting size, with a smaller yield threshold.
        BufferSettings::new(llm_proto::codec::SMALL_BUFFER, EVENT_YIELD_THRESHOLD)
    }
}

/// Bytes of events encoded before a stream hands its buffer to HTTP/2 though more are ready: a stream behind its
/// events (a slow caller, a busy replica) encodes what is ready into one buffer, which keeps the room of its largest
/// batch for as long as the stream lasts; a few dozen deltas a frame still batch the writes.
const EVENT_YIELD_THRESHOLD: usize = 4 * 1024;
