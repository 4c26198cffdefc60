//! The `GatewayService` routes, served with our own protobuf codec instead of the generated one.
//!
//! Two reasons. A `Stream` response gets a small encode buffer (it lives as long as the stream). And a request that is
//! not the message it claims to be (bytes that do not decode, a string field that is not UTF-8) is the caller's
//! mistake: [`codec`] reports it as `INVALID_ARGUMENT`, where tonic's own codec says `INTERNAL`. And a large
//! `Stream` or `Generate` request is handed over still encoded ([`Incoming`]), so its decoding runs off the async
//! worker that serves the connection's other streams.

use std::sync::Arc;

use llm_proto::codec::ProstCodec;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};
use service_kit::hand_wired::{BoxFuture, HandRoutes, HandWired, RouteFuture};
use tonic::{Request, Response, Status};

use crate::offload::Incoming;
use crate::rpc::{EventStream, GatewayRpc};

/// Initial size of a `Stream` response's encode buffer. tonic's generated code uses its default, 8 KiB, for every
/// call, held for the whole stream; a stream's messages are tens of bytes each (a text delta is ~30), written out
/// as they come, so 1 KiB holds dozens of them and the buffer is reused once they are sent (or grows if one is
/// larger). Saves ~7 KiB per open stream.
const STREAM_ENCODE_BUFFER: usize = 1024;

/// tonic's default encode buffer, for the unary methods.
const UNARY_ENCODE_BUFFER: usize = llm_proto::codec::DEFAULT_BUFFER;

/// `GatewayService` with every method served through [`codec`]; anything else (an unknown method) goes to the
/// generated router, which answers `UNIMPLEMENTED`.
pub(crate) type GatewayServer = HandWired<GatewayRoutes, GatewayServiceServer<GatewayRpc>>;

/// The service, requests up to `max_request_bytes`.
pub(crate) fn gateway_server(rpc: GatewayRpc, max_request_bytes: usize) -> GatewayServer {
    let rpc = Arc::new(rpc);
    let generated = service_kit::compressed!(
        GatewayServiceServer::from_arc(Arc::clone(&rpc))
            .max_decoding_message_size(max_request_bytes)
            .max_encoding_message_size(usize::MAX)
    );
    HandWired::new(
        GatewayRoutes {
            rpc,
            max_request_bytes,
        },
        generated,
    )
}

/// The methods served here.
#[derive(Clone)]
pub(crate) struct GatewayRoutes {
    rpc: Arc<GatewayRpc>,
    max_request_bytes: usize,
}

/// One of them.
pub(crate) enum Method {
    Stream,
    Generate,
    ListModels,
    GetModel,
    Embed,
    CountTokens,
}

type Handler<Req, Resp> =
    fn(Arc<GatewayRpc>, Request<Req>) -> BoxFuture<Result<Response<Resp>, Status>>;

impl HandRoutes for GatewayRoutes {
    const SERVICE: &'static str = "/llm.gateway.v1.GatewayService/";
    type Route = Method;

    fn pick(method: &str) -> Option<Method> {
        match method {
            "Stream" => Some(Method::Stream),
            "Generate" => Some(Method::Generate),
            "ListModels" => Some(Method::ListModels),
            "GetModel" => Some(Method::GetModel),
            "Embed" => Some(Method::Embed),
            "CountTokens" => Some(Method::CountTokens),
            _ => None,
        }
    }

    fn serve(&self, route: Method, req: http::Request<tonic::body::Body>) -> RouteFuture {
        let rpc = Arc::clone(&self.rpc);
        let max = self.max_request_bytes;
        match route {
            Method::Stream => Box::pin(async move {
                let mut grpc = service_kit::compressed!(
                    tonic::server::Grpc::new(codec::<_, Incoming<pb::StreamRequest>>(
                        STREAM_ENCODE_BUFFER
                    ))
                    .apply_max_message_size_config(Some(max), Some(usize::MAX))
                );
                Ok(grpc.server_streaming(StreamMethod(rpc), req).await)
            }),
            Method::Generate => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.generate_incoming(r).await })
            }),
            Method::ListModels => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.list_models(r).await })
            }),
            Method::GetModel => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.get_model(r).await })
            }),
            Method::Embed => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.embed_request(r).await })
            }),
            Method::CountTokens => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.count_tokens_incoming(r).await })
            }),
        }
    }
}

fn unary<Req, Resp>(
    rpc: Arc<GatewayRpc>,
    max: usize,
    req: http::Request<tonic::body::Body>,
    handler: Handler<Req, Resp>,
) -> RouteFuture
where
    Req: FromWire,
    Resp: prost::Message + Send + 'static,
{
    Box::pin(async move {
        let mut grpc = service_kit::compressed!(
            tonic::server::Grpc::new(codec::<Resp, Req>(UNARY_ENCODE_BUFFER))
                .apply_max_message_size_config(Some(max), Some(usize::MAX))
        );
        Ok(grpc.unary(UnaryMethod { rpc, handler }, req).await)
    })
}

/// A unary method, handed to tonic's unary machinery.
struct UnaryMethod<Req, Resp> {
    rpc: Arc<GatewayRpc>,
    handler: Handler<Req, Resp>,
}

impl<Req, Resp> tonic::server::UnaryService<Req> for UnaryMethod<Req, Resp> {
    type Response = Resp;
    type Future = BoxFuture<Result<Response<Resp>, Status>>;

    fn call(&mut self, request: Request<Req>) -> Self::Future {
        (self.handler)(Arc::clone(&self.rpc), request)
    }
}

/// The `Stream` method, handed to tonic's server-streaming machinery.
struct StreamMethod(Arc<GatewayRpc>);

impl tonic::server::ServerStreamingService<Incoming<pb::StreamRequest>> for StreamMethod {
    type Response = pb::StreamResponse;
    type ResponseStream = EventStream;
    type Future = BoxFuture<Result<Response<EventStream>, Status>>;

    fn call(&mut self, request: Request<Incoming<pb::StreamRequest>>) -> Self::Future {
        let rpc = Arc::clone(&self.0);
        Box::pin(async move { rpc.stream_incoming(request).await })
    }
}

/// The codec of every `GatewayService` method: encode buffers of `encode_buffer` bytes, requests made by
/// [`FromWire`]. The request's buffer keeps tonic's default size: it lives only until the request is decoded.
fn codec<E, D: FromWire>(encode_buffer: usize) -> ProstCodec<E, D> {
    ProstCodec::decoding_with(D::from_wire).encode_buffer(encode_buffer)
}

/// What the codec makes of a request's bytes.
pub(crate) trait FromWire: Sized + Send + 'static {
    /// The request from its bytes (all of `src`); bytes that are not the message are `INVALID_ARGUMENT`.
    fn from_wire(src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Self, Status>;
}

impl<M: prost::Message + Default + Send + 'static> FromWire for M {
    fn from_wire(src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Self, Status> {
        M::decode(src).map_err(|e| crate::offload::not_the_message(&e))
    }
}

/// A large request leaves the codec undecoded (the bytes are split off tonic's buffer, not copied), to be counted and
/// decoded off the async workers ([`crate::offload::generation`]).
impl<M: prost::Message + Default + Send + 'static> FromWire for Incoming<M> {
    fn from_wire(src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Self, Status> {
        use bytes::Buf as _;
        let len = src.remaining();
        if len >= crate::offload::LARGE_REQUEST_BYTES {
            return Ok(Incoming::Encoded(src.copy_to_bytes(len)));
        }
        M::from_wire(src).map(Incoming::Decoded)
    }
}
