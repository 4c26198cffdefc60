//! `sessions`: a command-line client for the session-processor. Creates sessions, sends prompts and shows the
//! conversation live (text, reasoning, tool calls, usage), answers client tools and permission requests, follows a
//! session live from any event (`watch`), lists a session's persisted messages, shows a session, its workspace diff
//! and its diagnostics, compacts it, and shows a tenant's spend.
//!
//! `--json` prints JSON Lines for scripts instead (`sessions_cli/json.rs`). The token is never printed, not even by
//! `--help` (which would otherwise show `PROCESSOR_TOKEN`'s value).
//!
//! Exit codes: 0 on success; `diagnose` exits 1 when the session is not healthy (a check failed); 2 when a command
//! fails (connection, RPC error, bad input).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use service_kit::auth::BearerInterceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

#[path = "connect.rs"]
mod connect;
#[path = "format.rs"]
mod format;
#[path = "json.rs"]
mod json;
#[path = "views.rs"]
mod views;
#[path = "watch.rs"]
mod watch;

#[derive(Parser)]
#[command(about = "Talk to a session-processor")]
struct Args {
    /// Processor address, `host:port` or `http(s)://host:port` (`make up` writes it to `.tools/up/env`).
    #[arg(long, env = "PROCESSOR_ADDR", default_value = "127.0.0.1:50052")]
    addr: String,
    /// Bearer token (its value is never shown, not even here).
    #[arg(long, env = "PROCESSOR_TOKEN", hide_env_values = true)]
    token: String,
    /// Print JSON Lines for scripts: one API message per line (the session, each message, each event, ...) in the
    /// API's JSON mapping with the `.proto` field names.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a session and print its id.
    Create {
        /// Agent name.
        #[arg(long, default_value = "")]
        agent: String,
        /// Default model (`provider/model`).
        #[arg(long, default_value = "")]
        model: String,
        /// Workspace directory name (enables the file tools).
        #[arg(long, default_value = "")]
        workspace: String,
    },
    /// Send a prompt and watch the session until it is idle.
    Prompt {
        /// Session id.
        session: String,
        /// The prompt text.
        text: String,
        /// Model for this prompt.
        #[arg(long, default_value = "")]
        model: String,
        /// Declare a client tool `name` (input: any JSON object); you answer its calls at the terminal.
        #[arg(long = "client-tool")]
        client_tools: Vec<String>,
        /// Answer client tools and permission requests automatically with this text / allow.
        #[arg(long)]
        auto: Option<String>,
        /// Offer a `get_time` client tool that this CLI answers itself with the current UTC time (without it, a
        /// tool of that name is answered like any other client tool).
        #[arg(long)]
        time_tool: bool,
        /// Ask for a structured answer matching the JSON Schema in this file (an object schema); the validated JSON
        /// is printed when the loop is done.
        #[arg(long, value_name = "FILE")]
        format_schema: Option<std::path::PathBuf>,
        /// How many invalid structured answers the model may correct (with `--format-schema`; server default 2).
        #[arg(long, value_name = "N", requires = "format_schema")]
        retry_count: Option<u32>,
    },
    /// List a session's messages and parts.
    Messages {
        /// Session id.
        session: String,
    },
    /// Show a session: status (including a pending retry), totals, budget and the files its workspace changed.
    Get {
        /// Session id.
        session: String,
    },
    /// Check a session's stored invariants; exits 1 when a check fails.
    Diagnose {
        /// Session id.
        session: String,
    },
    /// Show what the model changed in the session's workspace (whole session, one message, or one step).
    Diff {
        /// Session id.
        session: String,
        /// Only this assistant message.
        #[arg(long = "message", value_name = "ID")]
        message: Option<String>,
        /// Only this 1-based step of `--message`.
        #[arg(long, value_name = "N", requires = "message")]
        step: Option<u32>,
        /// Print the unified diff of each file.
        #[arg(long)]
        patch: bool,
    },
    /// Compact an idle session's history now and watch the summary being written.
    Compact {
        /// Session id.
        session: String,
        /// Model that writes the summary (`provider/model`); the session's current model when empty.
        #[arg(long, default_value = "")]
        model: String,
    },
    /// Follow a session's events live (as Subscribe delivers them) until interrupted.
    Watch {
        /// Session id.
        session: String,
        /// Resume after this event id (printed by `--json` as each event's `id`); from now on when omitted.
        #[arg(long, value_name = "EVENT_ID", default_value = "")]
        after: String,
        /// Stop after the next `done` event instead of following the session on.
        #[arg(long)]
        until_done: bool,
    },
    /// Show a tenant's spend and budget.
    Spend {
        /// Tenant; the token's own tenant when omitted.
        #[arg(long, default_value = "")]
        tenant: String,
    },
}

/// The client tool this CLI can answer itself.
const TIME_TOOL: &str = "get_time";

type Client = SessionServiceClient<InterceptedService<Channel, BearerInterceptor>>;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

#[tokio::main]
pub(crate) async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> CliResult<ExitCode> {
    let channel = connect::connect(&args.addr).await?;
    let mut client =
        SessionServiceClient::with_interceptor(channel, BearerInterceptor::new(&args.token)?);
    let json = match args.json {
        true => Some(json::Printer::new()?),
        false => None,
    };
    let json = json.as_ref();
    match args.command {
        Command::Create {
            agent,
            model,
            workspace,
        } => views::create(&mut client, agent, model, workspace, json).await?,
        Command::Prompt {
            session,
            text,
            model,
            mut client_tools,
            auto,
            time_tool,
            format_schema,
            retry_count,
        } => {
            if time_tool {
                client_tools.push(TIME_TOOL.into());
            }
            let format = match format_schema {
                Some(path) => Some(pb::OutputFormat {
                    r#type: pb::output_format::Type::JsonSchema as i32,
                    schema_json: std::fs::read_to_string(&path)
                        .map_err(|e| format!("{}: {e}", path.display()))?,
                    retry_count,
                }),
                None => None,
            };
            let ask = watch::Ask {
                session,
                text,
                model,
                client_tools,
                auto,
                time_tool,
                format,
            };
            watch::prompt(&mut client, ask, json).await?;
        }
        Command::Messages { session } => views::messages(&mut client, session, json).await?,
        Command::Get { session } => views::get(&mut client, session, json).await?,
        Command::Diagnose { session } => return views::diagnose(&mut client, session, json).await,
        Command::Diff {
            session,
            message,
            step,
            patch,
        } => views::diff(&mut client, session, message, step, patch, json).await?,
        Command::Compact { session, model } => {
            watch::compact(&mut client, session, model, json).await?
        }
        Command::Watch {
            session,
            after,
            until_done,
        } => watch::follow(&mut client, session, after, until_done, json).await?,
        Command::Spend { tenant } => views::spend(&mut client, tenant, json).await?,
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
