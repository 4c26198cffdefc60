//! `session-processor`: loads the configuration, connects to Redis and the gateway, and serves until SIGTERM/SIGINT;
//! `--check` validates the configuration and exits.

use std::path::PathBuf;

use clap::Parser;
use session_processor::runtimes::Runtimes;

/// jemalloc, not glibc's malloc: a prompt allocates and frees a few hundred small objects on the runtime threads,
/// and jemalloc's per-thread caches take them with fewer cycles and less memory kept per open session
/// (docs/architecture.md, "Memory"; measured in docs/benchmarks.md). Tuned, when ever needed, through
/// `_RJEM_MALLOC_CONF` (docs/operations.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runs LLM sessions with tools through llm-gateway, persisted in Redis.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Configuration file (TOML).
    #[arg(long, env = "PROCESSOR_CONFIG")]
    config: Option<PathBuf>,
    /// Validate the configuration (the file, the environment, the TLS files) and exit: 0 when it is valid, 1 with
    /// the offending key otherwise. Connects to nothing.
    #[arg(long)]
    check: bool,
}

fn main() -> std::process::ExitCode {
    // The runtime comes first (`session_processor::runtimes`): with one per core, this thread runs the first.
    session_processor::runtimes::run_main("session-processor", run)
}

async fn run(runtimes: Runtimes) -> std::process::ExitCode {
    // Logs to stderr; spans over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set. Dropped last, so spans flush.
    let _telemetry = match llm_telemetry::init("session-processor") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("session-processor: telemetry: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match serve(Args::parse(), runtimes).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(message = "session-processor failed", error = %e);
            eprintln!("session-processor: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(
    args: Args,
    runtimes: Runtimes,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if args.check {
        let summary = session_processor::app::check(args.config.as_deref())?;
        eprintln!("configuration OK: {summary}, {}", runtimes.describe());
        return Ok(());
    }
    session_processor::app::serve(
        args.config.as_deref(),
        service_kit::serve::shutdown_signal(),
    )
    .await
}
