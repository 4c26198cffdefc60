//! A session-processor replica as a real process, for tests that kill one (SIGKILL) mid-step. It is the service's
//! own `app::serve`, so it runs exactly the production code.

fn main() -> std::process::ExitCode {
    // The runtime as the binary picks it (`PROCESSOR_RUNTIMES`).
    session_processor::runtimes::run_main("processor-replica", |_| run())
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
