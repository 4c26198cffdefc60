//! `session-processor`: loads the configuration, connects to Redis and the gateway, and serves until SIGTERM/SIGINT.

use std::path::PathBuf;

use clap::Parser;

/// Runs LLM sessions with tools through llm-gateway, persisted in Redis.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Configuration file (TOML).
    #[arg(long, env = "PROCESSOR_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match serve(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(message = "session-processor failed", error = %e);
            eprintln!("session-processor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    session_processor::app::serve(args.config.as_deref(), shutdown_signal()).await
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
