//! Accepts front-door connections (HTTP/1.1, and HTTP/2 with prior knowledge, on one plaintext port) and serves
//! them until shutdown; then stops accepting, lets responses in flight finish for up to the configured grace
//! period, and drops what is left.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::generate::Gateway;

/// How long a client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the front door on `listener` until `shutdown` resolves.
pub async fn serve(
    gateway: Gateway,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) {
    let grace = gateway.config().shutdown_grace;
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(connection(gateway.clone(), stream, stop.clone()));
                }
                Err(e) => {
                    // Accept errors are transient (EMFILE, aborted handshakes); pausing keeps one from spinning.
                    tracing::warn!(message = "http front door: accept failed", error = %e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    stop.cancel();
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!(
            message = "http front door: shutdown grace period over; dropping remaining responses"
        );
    }
}

async fn connection(gateway: Gateway, stream: TcpStream, stop: CancellationToken) {
    let service = hyper::service::service_fn(move |req| {
        let gateway = gateway.clone();
        async move { Ok::<_, Infallible>(crate::http::handle(&gateway, req).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(message = "http front door: connection ended with an error", error = %e);
    }
}
