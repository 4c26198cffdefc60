//! A session-processor replica as a real process, for tests that kill one (SIGKILL) mid-step. It is the service's
//! own `app::serve`, so it runs exactly the production code.

use session_processor::runtimes::Runtimes;

fn main() -> std::process::ExitCode {
    // The runtime as the binary picks it (`PROCESSOR_RUNTIMES`).
    let runtime = Runtimes::from_env()
        .map_err(|e| e.to_string())
        .and_then(|r| r.first().map_err(|e| e.to_string()));
    match runtime {
        Ok(rt) => rt.block_on(run()),
        Err(e) => {
            eprintln!("processor-replica: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> std::process::ExitCode {
    let _telemetry = match llm_telemetry::init("session-processor") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("processor-replica: telemetry: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let config = std::env::args().nth(1).map(std::path::PathBuf::from);
    match session_processor::app::serve(config.as_deref(), std::future::pending()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("processor-replica: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
