//! The `llm-gateway` binary, built inside this package from its own `main.rs`, so end-to-end tests can run the real
//! server process, signals and all (`CARGO_BIN_EXE_gateway_main`); `CARGO_BIN_EXE_*` only names binaries of the
//! package under test.

#[path = "../../../services/llm-gateway/src/main.rs"]
mod gateway;

fn main() -> std::process::ExitCode {
    gateway::main()
}
