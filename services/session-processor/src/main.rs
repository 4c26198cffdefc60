//! `session-processor`: loads the configuration, connects to Redis and the gateway, and serves until SIGTERM/SIGINT.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use session_processor::config::{Config, ProcessEnv};

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
    let config = Arc::new(Config::load(args.config.as_deref(), &ProcessEnv)?);
    let store =
        session_processor::store::Store::connect(&config.redis_url, &config.redis_prefix).await?;
    store.ping().await?;
    let gateway =
        session_processor::run_loop::gateway_client(&config.gateway_url, &config.gateway_token)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(message = "session-processor listening", addr = %listener.local_addr()?, agents = ?config.agents.keys().collect::<Vec<_>>());
    let engine = session_processor::run_loop::Engine::new(store, gateway, config);
    session_processor::server::run(engine, listener, shutdown_signal()).await?;
    Ok(())
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
