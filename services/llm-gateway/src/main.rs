//! `llm-gateway`: loads the configuration, binds the listeners and serves until SIGTERM or SIGINT; SIGHUP reloads
//! the configuration file without dropping streams in flight.

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
pub(crate) async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let _telemetry = match llm_telemetry::init("llm-gateway") {
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
    service_kit::tls::install_crypto_provider();
    let config = llm_gateway::config::Config::load(
        args.config.as_deref(),
        &llm_gateway::config::ProcessEnv,
    )?;
    if args.check {
        print_check(&config);
        return Ok(());
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let metrics_listener = match config.metrics_listen {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await?),
        None => None,
    };
    let http_listener = match config.http_listen {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await?),
        None => None,
    };
    if http_listener.is_some() && config.tls.is_some() {
        tracing::warn!(
            message = "server.tls covers the gRPC listener only: the HTTP front door is plaintext, keep it on a private address or behind a TLS proxy"
        );
    }
    tracing::info!(
        message = "llm-gateway listening",
        addr = %listener.local_addr()?,
        metrics = ?metrics_listener.as_ref().and_then(|l| l.local_addr().ok()),
        http = ?http_listener.as_ref().and_then(|l| l.local_addr().ok()),
        tls = config.tls.as_ref().map(|t| if t.mutual() { "mutual" } else { "server" }),
        providers = ?config.providers.keys().collect::<Vec<_>>(),
        models = config.catalog.iter().count(),
    );
    let gateway = llm_gateway::generate::Gateway::new(config)?;
    // Metrics keep being served while in-flight streams drain, and stop once the server has.
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    let metrics_task = metrics_listener.map(|l| {
        tokio::spawn(llm_gateway::metrics::serve(
            gateway.metrics(),
            l,
            metrics_stop.clone().cancelled_owned(),
        ))
    });
    let reloader = tokio::spawn(reload_on_sighup(gateway.clone(), args.config.clone()));
    // One signal stops both listeners; each drains its in-flight streams for the grace period.
    let stop = tokio_util::sync::CancellationToken::new();
    let http_task = http_listener.map(|l| {
        tokio::spawn(llm_gateway::http::serve(
            gateway.clone(),
            l,
            stop.clone().cancelled_owned(),
        ))
    });
    let signal = {
        let stop = stop.clone();
        async move {
            service_kit::serve::shutdown_signal().await;
            stop.cancel();
        }
    };
    let served = llm_gateway::server::run(gateway, listener, signal).await;
    stop.cancel();
    if let Some(task) = http_task {
        let _ = task.await;
    }
    reloader.abort();
    metrics_stop.cancel();
    if let Some(task) = metrics_task {
        let _ = task.await;
    }
    served?;
    tracing::info!(message = "llm-gateway stopped");
    Ok(())
}

/// `--check`: the configuration loaded and its files checked; a one-line summary.
fn print_check(config: &llm_gateway::config::Config) {
    let tls = match &config.tls {
        None => "plaintext",
        Some(tls) if tls.mutual() => "mutual TLS",
        Some(_) => "TLS",
    };
    eprintln!(
        "configuration OK: {} providers, {} models, {tls}",
        config.providers.len(),
        config.catalog.iter().count()
    );
}

/// Reloads the configuration on every SIGHUP. A configuration that fails validation is logged (naming the key) and
/// the running one stays in force.
async fn reload_on_sighup(gateway: llm_gateway::generate::Gateway, path: Option<PathBuf>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(message = "cannot listen for SIGHUP; reloads are off", error = %e);
                return;
            }
        };
        while hup.recv().await.is_some() {
            tracing::info!(message = "SIGHUP: reloading the configuration");
            if let Err(e) = gateway.reload_from(path.as_deref(), &llm_gateway::config::ProcessEnv) {
                tracing::error!(
                    message = "configuration reload failed; keeping the running configuration",
                    error = %e,
                );
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (gateway, path);
    }
}
