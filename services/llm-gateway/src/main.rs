//! `llm-gateway`: loads the configuration, binds the listener and serves until SIGTERM or SIGINT.

use std::path::PathBuf;

use clap::Parser;

/// Stateless gRPC gateway to LLM providers.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Configuration file (TOML). Without one, the defaults and the environment are used.
    #[arg(long, env = "GATEWAY_CONFIG")]
    config: Option<PathBuf>,
    /// Validate the configuration and exit.
    #[arg(long)]
    check: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let _telemetry = match llm_gateway::telemetry::init("llm-gateway") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("llm-gateway: telemetry: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match serve(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(message = "llm-gateway failed", error = %e);
            eprintln!("llm-gateway: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = llm_gateway::config::Config::load(
        args.config.as_deref(),
        &llm_gateway::config::ProcessEnv,
    )?;
    if args.check {
        eprintln!(
            "configuration OK: {} providers, {} models",
            config.providers.len(),
            config.catalog.iter().count()
        );
        return Ok(());
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(
        message = "llm-gateway listening",
        addr = %listener.local_addr()?,
        providers = ?config.providers.keys().collect::<Vec<_>>(),
        models = config.catalog.iter().count(),
    );
    let gateway = llm_gateway::generate::Gateway::new(config)?;
    llm_gateway::server::run(gateway, listener, shutdown_signal()).await?;
    tracing::info!(message = "llm-gateway stopped");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
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
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
