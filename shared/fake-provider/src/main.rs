//! `fake-provider`: runs a scripted loopback provider for the demo and for
//! benchmarks.
//!
//! The first stdout line is `listening on http://ADDR`, flushed at once, so
//! a parent process can start it with `--listen 127.0.0.1:0` and learn the
//! port. Nothing is logged per request: benchmarks must not pay for it.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use fake_provider::{FakeProvider, scenario};

#[derive(Parser, Debug)]
#[command(version, about = "Loopback fake LLM provider (OpenAI Chat compatible)")]
struct Args {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// What to answer chat-completions requests with.
    #[arg(long, value_enum, default_value_t = Scenario::Demo)]
    scenario: Scenario,
    /// Number of text chunks per response (`paced` and `burst`).
    #[arg(long, default_value_t = 64)]
    chunks: usize,
    /// Milliseconds between chunks (`paced`); 0 sends them in a burst.
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Scenario {
    /// Two-turn tool loop when the caller offers `get_time`: text plus a
    /// call to it, then an answer quoting the tool result; a text answer
    /// (naming the tools offered) otherwise.
    Demo,
    /// `--chunks` text chunks, `--interval-ms` apart.
    Paced,
    /// `--chunks` text chunks with no pacing.
    Burst,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let provider = FakeProvider::bind(args.listen).await?;
    // Nobody reads the log of a standalone server, and a benchmark sends it
    // enough requests to make it the largest thing in memory.
    provider.keep_request_log(false);
    // The demo's provider has no key to check, and a benchmark's fake must cost nothing per request: this server
    // stands in for a provider; the tests' fakes are the ones that check requests.
    provider.skip_validation("a standalone demo or benchmark provider");
    provider.set_fallback(match args.scenario {
        Scenario::Demo => scenario::demo(),
        Scenario::Paced => scenario::paced(args.chunks, Duration::from_millis(args.interval_ms)),
        Scenario::Burst => scenario::paced(args.chunks, Duration::ZERO),
    });
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", provider.base_url())?;
        out.flush()?;
    }
    wait_for_signal().await?;
    provider.shutdown();
    Ok(())
}

/// Ctrl-C everywhere, and SIGTERM on Unix since that is what process
/// supervisors and test harnesses send.
async fn wait_for_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            res = tokio::signal::ctrl_c() => res,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
