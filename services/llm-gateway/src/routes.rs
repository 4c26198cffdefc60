//! The `GatewayService` routes, served with our own protobuf codec instead of the generated one.
//!
//! Two reasons. A `Stream` response gets a small encode buffer (it lives as long as the stream). And a request that is
//! not the message it claims to be (bytes that do not decode, a string field that is not UTF-8) is the caller's
//! mistake: [`codec`] reports it as `INVALID_ARGUMENT`, where tonic's own codec says `INTERNAL`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};
use service_kit::codec::ProstCodec;
use tonic::{Request, Response, Status};

use crate::rpc::{EventStream, GatewayRpc};

const SERVICE: &str = "/llm.gateway.v1.GatewayService/";

/// Initial size of a `Stream` response's encode buffer. tonic's generated code uses its default, 8 KiB, for every
/// call, held for the whole stream; a stream's messages are tens of bytes each (a text delta is ~30), written out
/// as they come, so 1 KiB holds dozens of them and the buffer is reused once they are sent (or grows if one is
/// larger). Saves ~7 KiB per open stream.
const STREAM_ENCODE_BUFFER: usize = 1024;

/// tonic's default encode buffer, for the unary methods.
const UNARY_ENCODE_BUFFER: usize = service_kit::codec::DEFAULT_BUFFER;

/// `GatewayService` with every method served through [`codec`]; anything else (an unknown method) goes to the
/// generated router, which answers `UNIMPLEMENTED`.
#[derive(Clone)]
pub(crate) struct GatewayServer {
    generated: GatewayServiceServer<GatewayRpc>,
    rpc: Arc<GatewayRpc>,
    max_request_bytes: usize,
}

impl GatewayServer {
    pub(crate) fn new(rpc: GatewayRpc, max_request_bytes: usize) -> GatewayServer {
        let rpc = Arc::new(rpc);
        GatewayServer {
            generated: service_kit::compressed!(
                GatewayServiceServer::from_arc(Arc::clone(&rpc))
                    .max_decoding_message_size(max_request_bytes)
                    .max_encoding_message_size(usize::MAX)
            ),
            rpc,
            max_request_bytes,
        }
    }
}

impl tonic::server::NamedService for GatewayServer {
    const NAME: &'static str =
        <GatewayServiceServer<GatewayRpc> as tonic::server::NamedService>::NAME;
}

type HttpResponse = http::Response<tonic::body::Body>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler<Req, Resp> =
    fn(Arc<GatewayRpc>, Request<Req>) -> BoxFuture<Result<Response<Resp>, Status>>;

impl tower::Service<http::Request<tonic::body::Body>> for GatewayServer {
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture<Result<HttpResponse, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let method = req.uri().path().strip_prefix(SERVICE).unwrap_or_default();
        let rpc = Arc::clone(&self.rpc);
        let max = self.max_request_bytes;
        match method {
            "Stream" => Box::pin(async move {
                let mut grpc = service_kit::compressed!(
                    tonic::server::Grpc::new(codec::<_, pb::StreamRequest>(STREAM_ENCODE_BUFFER))
                        .apply_max_message_size_config(Some(max), Some(usize::MAX))
                );
                Ok(grpc.server_streaming(StreamMethod(rpc), req).await)
            }),
            "Generate" => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.generate(r).await })
            }),
            "ListModels" => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.list_models(r).await })
            }),
            "GetModel" => unary(rpc, max, req, |rpc, r| {
                Box::pin(async move { rpc.get_model(r).await })
            }),
            _ => self.generated.call(req),
        }
    }
}

fn unary<Req, Resp>(
    rpc: Arc<GatewayRpc>,
    max: usize,
    req: http::Request<tonic::body::Body>,
    handler: Handler<Req, Resp>,
) -> BoxFuture<Result<HttpResponse, Infallible>>
where
    Req: prost::Message + Default + Send + 'static,
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

impl tonic::server::ServerStreamingService<pb::StreamRequest> for StreamMethod {
    type Response = pb::StreamResponse;
    type ResponseStream = EventStream;
    type Future = BoxFuture<Result<Response<EventStream>, Status>>;

    fn call(&mut self, request: Request<pb::StreamRequest>) -> Self::Future {
        let rpc = Arc::clone(&self.0);
        Box::pin(async move { <GatewayRpc as GatewayService>::stream(&rpc, request).await })
    }
}

/// The codec of every `GatewayService` method: encode buffers of `encode_buffer` bytes; a request that does not
/// decode is `INVALID_ARGUMENT`, the caller's mistake. The request's buffer keeps tonic's default size: it lives
/// only until the request is decoded.
fn codec<E, D>(encode_buffer: usize) -> ProstCodec<E, D> {
    ProstCodec::new()
        .encode_buffer(encode_buffer)
        .decode_error(|e| {
            crate::status::invalid(
                "request",
                &format!("not a valid protobuf message of this method: {e}"),
            )
        })
}
