//! The `sessions` CLI of the session-processor, built inside this package from the same source, so end-to-end tests
//! can run it as a real process (`CARGO_BIN_EXE_sessions_cli`); `CARGO_BIN_EXE_*` only names binaries of the
//! package under test.

#[path = "../../../services/session-processor/src/bin/sessions_cli/main.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
