#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::time::Duration;

use http_body::{Body, Frame};
use http_body_util::{BodyExt, StreamBody};
use tonic::codegen::Bytes;
use tonic::codegen::http::{Request, Response};
use tower::{Layer, Service, ServiceExt};

use super::{CallDeadline, DeadlineLayer, parse_grpc_timeout};

#[test]
fn grpc_timeout_values_parse_per_the_protocol() {
    for (text, want) in [
        ("1H", Some(Duration::from_secs(3600))),
        ("2M", Some(Duration::from_secs(120))),
        ("30S", Some(Duration::from_secs(30))),
        ("250m", Some(Duration::from_millis(250))),
        ("99999999u", Some(Duration::from_micros(99_999_999))),
        ("7n", Some(Duration::from_nanos(7))),
        ("0m", Some(Duration::ZERO)),
    ] {
        assert_eq!(parse_grpc_timeout(text.as_bytes()), want, "{text}");
    }
    // More than 8 digits, no digits, no unit, an unknown unit, a sign, spaces.
    for text in [
        "123456789m",
        "m",
        "",
        "5",
        "5x",
        "-5m",
        "+5m",
        " 5m",
        "5 m",
        "5ms",
    ] {
        assert_eq!(parse_grpc_timeout(text.as_bytes()), None, "{text:?}");
    }
}

fn request(timeout: Option<&str>) -> Request<()> {
    let mut b = Request::builder().uri("/pkg.Svc/Method");
    if let Some(t) = timeout {
        b = b.header("grpc-timeout", t);
    }
    b.body(()).unwrap()
}

type Frames = futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>;

fn streaming(frames: Frames) -> Response<StreamBody<Frames>> {
    Response::new(StreamBody::new(frames))
}

#[tokio::test]
async fn a_handler_slower_than_the_deadline_gets_a_trailers_only_deadline_exceeded() {
    let inner = tower::service_fn(|req: Request<()>| async move {
        // The header is consumed here, the instant passed on.
        assert!(req.headers().get("grpc-timeout").is_none());
        assert!(req.extensions().get::<CallDeadline>().is_some());
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(streaming(Box::pin(futures::stream::empty())))
    });
    let mut svc = DeadlineLayer.layer(inner);
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(request(Some("20m")))
        .await
        .unwrap();
    assert_eq!(res.headers()["grpc-status"], "4");
    assert_eq!(res.headers()["content-type"], "application/grpc");
    assert!(res.into_body().is_end_stream());
}

#[tokio::test]
async fn a_stream_still_open_at_the_deadline_ends_with_deadline_exceeded_trailers() {
    let inner = tower::service_fn(|_req: Request<()>| async move {
        let first = futures::stream::once(async { Ok(Frame::data(Bytes::from_static(b"one"))) });
        let frames: Frames = Box::pin(futures::StreamExt::chain(first, futures::stream::pending()));
        Ok::<_, Infallible>(streaming(frames))
    });
    let mut svc = DeadlineLayer.layer(inner);
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(request(Some("30m")))
        .await
        .unwrap();
    let mut body = res.into_body();
    let data = body.frame().await.unwrap().unwrap();
    assert_eq!(data.into_data().unwrap(), Bytes::from_static(b"one"));
    let trailers = body
        .frame()
        .await
        .unwrap()
        .unwrap()
        .into_trailers()
        .unwrap();
    assert_eq!(trailers["grpc-status"], "4");
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn without_a_timeout_the_body_passes_through_untouched() {
    let inner = tower::service_fn(|_req: Request<()>| async move {
        let mut trailers = tonic::codegen::http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let frames: Frames = Box::pin(futures::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"x"))),
            Ok(Frame::trailers(trailers)),
        ]));
        Ok::<_, Infallible>(streaming(frames))
    });
    let mut svc = DeadlineLayer.layer(inner);
    for timeout in [None, Some("not-a-timeout"), Some("10S")] {
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(request(timeout))
            .await
            .unwrap();
        let collected = res.into_body().collect().await.unwrap();
        assert_eq!(
            collected.trailers().unwrap()["grpc-status"],
            "0",
            "{timeout:?}"
        );
        assert_eq!(collected.to_bytes(), Bytes::from_static(b"x"));
    }
}
