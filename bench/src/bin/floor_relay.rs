//! `floor-relay`: the floor relay (bench::floor) as its own process, so the load generator can read its RSS and CPU
//! the way it reads the gateway's.
//!
//! The first stdout line is `listening on ADDR`, flushed at once. Stops on SIGTERM or Ctrl-C.
// A benchmark binary: printing its address is its interface.
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::net::SocketAddr;

use clap::Parser;

#[derive(Parser)]
#[command(about = "The floor relay: SSE frames in, one gRPC message out per frame")]
struct Args {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Base URL of the OpenAI-compatible upstream, without `/v1`.
    #[arg(long)]
    upstream: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let floor = bench::floor::Floor::new(&args.upstream)?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", listener.local_addr()?)?;
        out.flush()?;
    }
    let shutdown = async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => return,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    bench::floor::serve(floor, listener, shutdown).await?;
    Ok(())
}
