//! `trace-view`: see the crate docs. Prints its two addresses, then serves until stopped.
#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};

use clap::Parser;
use tokio::net::TcpListener;
use trace_view::serve::{serve_http, serve_otlp};
use trace_view::store::Traces;

#[derive(Parser)]
#[command(about = "Receive OTLP traces and print them as trees over HTTP")]
struct Args {
    /// Where the services export spans (their OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long, default_value = "127.0.0.1:4317")]
    otlp_listen: String,
    /// Where `curl` reads the traces.
    #[arg(long, default_value = "127.0.0.1:16687")]
    http_listen: String,
    /// Traces kept in memory; the oldest go first.
    #[arg(long, default_value_t = 500)]
    max_traces: usize,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let otlp = TcpListener::bind(&args.otlp_listen).await?;
    let http = TcpListener::bind(&args.http_listen).await?;
    println!(
        "trace-view: OTLP on {}, traces at http://{}/traces",
        otlp.local_addr()?,
        http.local_addr()?
    );
    let traces = Arc::new(Mutex::new(Traces::new(args.max_traces)));
    let grpc = tokio::spawn(serve_otlp(otlp, traces.clone()));
    tokio::select! {
        r = serve_http(http, traces) => r,
        r = grpc => match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(std::io::Error::other(e)),
            Err(e) => Err(std::io::Error::other(e)),
        },
    }
}
