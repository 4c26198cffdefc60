//! llm-gateway as a real process with its production telemetry (OTLP export when `OTEL_EXPORTER_OTLP_ENDPOINT` is
//! set), for tests that need spans or metrics from a separate service process. Usage: `gateway_replica <config.toml>`;
//! prints `llm-gateway listening on <addr>` on stderr once bound, and `llm-gateway metrics on <addr>` first when the
//! configuration has `server.metrics_listen`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _telemetry = match llm_telemetry::init("llm-gateway") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gateway_replica: telemetry: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway_replica: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).map(std::path::PathBuf::from);
    let config =
        llm_gateway::config::Config::load(path.as_deref(), &llm_gateway::config::ProcessEnv)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let metrics_listener = match config.metrics_listen {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await?),
        None => None,
    };
    let gateway = llm_gateway::generate::Gateway::new(config)?;
    if let Some(l) = metrics_listener {
        eprintln!("llm-gateway metrics on {}", l.local_addr()?);
        // Served for the life of the process: the test kills it, so there is nothing to drain.
        tokio::spawn(llm_gateway::metrics::serve(
            gateway.metrics(),
            l,
            std::future::pending(),
        ));
    }
    eprintln!("llm-gateway listening on {}", listener.local_addr()?);
    // SIGTERM ends the process; dropping the telemetry guard on the way out flushes spans.
    let shutdown = async {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            term.recv().await;
        }
    };
    llm_gateway::server::run(gateway, listener, shutdown).await?;
    Ok(())
}
