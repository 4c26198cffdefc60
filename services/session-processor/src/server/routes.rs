//! The `SessionService` calls that stream a session's events (`Prompt`, `Subscribe`, `Compact`), served with a codec
//! that writes each event straight from the form this replica keeps it in ([`Outgoing`]): a delta from the ring costs
//! no message to be made, encoded and freed. Every other call, and an unknown method, goes to the generated server.
//! Requests decode as the generated code decodes them (the codec of `llm_proto::codec`), with the same size limit and
//! compression, so a caller cannot tell the two apart.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use llm_proto::codec::ProstCodec;
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_server::SessionServiceServer;
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};
use tonic::{Request, Response, Status};

use super::{OutgoingStream, Sessions};
use crate::event_wire::Outgoing;

const SERVICE: &str = "/llm.sessions.v1.SessionService/";

/// `SessionService`: the streaming calls served here, the rest by the generated server.
#[derive(Clone)]
pub(super) struct SessionServer {
    generated: SessionServiceServer<Sessions>,
    sessions: Arc<Sessions>,
    max_request_bytes: usize,
}

impl SessionServer {
    pub(super) fn new(sessions: Sessions, max_request_bytes: usize) -> SessionServer {
        let sessions = Arc::new(sessions);
        SessionServer {
            generated: service_kit::compressed!(
                SessionServiceServer::from_arc(Arc::clone(&sessions))
                    .max_decoding_message_size(max_request_bytes)
            ),
            sessions,
            max_request_bytes,
        }
    }
}

impl tonic::server::NamedService for SessionServer {
    const NAME: &'static str =
        <SessionServiceServer<Sessions> as tonic::server::NamedService>::NAME;
}

type HttpResponse = http::Response<tonic::body::Body>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler<Req> =
    fn(Arc<Sessions>, Request<Req>) -> BoxFuture<Result<Response<OutgoingStream>, Status>>;

impl tower::Service<http::Request<tonic::body::Body>> for SessionServer {
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture<Result<HttpResponse, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let method = req.uri().path().strip_prefix(SERVICE).unwrap_or_default();
        let sessions = Arc::clone(&self.sessions);
        let max = self.max_request_bytes;
        match method {
            "Prompt" => streaming::<pb::PromptRequest>(sessions, max, req, |s, r| {
                Box::pin(async move { s.prompt_events(r).await })
            }),
            "Subscribe" => streaming::<pb::SubscribeRequest>(sessions, max, req, |s, r| {
                Box::pin(async move { s.subscribe_events(r).await })
            }),
            "Compact" => streaming::<pb::CompactRequest>(sessions, max, req, |s, r| {
                Box::pin(async move { s.compact_events(r).await })
            }),
            _ => self.generated.call(req),
        }
    }
}

/// Serves one streaming call through tonic's server-streaming machinery with [`EventCodec`].
fn streaming<Req>(
    sessions: Arc<Sessions>,
    max: usize,
    req: http::Request<tonic::body::Body>,
    handler: Handler<Req>,
) -> BoxFuture<Result<HttpResponse, Infallible>>
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
        Encoder::buffer_settings(&self.generated)
    }
}
