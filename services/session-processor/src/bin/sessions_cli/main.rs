//! `sessions`: a command-line client for the session-processor. Creates sessions, sends prompts and shows the
//! conversation live (text, reasoning, tool calls, usage), answers client tools and permission requests, lists a
//! session's persisted messages, shows a session, its workspace diff and its diagnostics, compacts it, and shows a
//! tenant's spend.
//!
//! `--json` prints JSON Lines for scripts instead (`sessions_cli/json.rs`). The token is never printed, not even by
//! `--help` (which would otherwise show `PROCESSOR_TOKEN`'s value).
//!
//! Exit codes: 0 on success; `diagnose` exits 1 when the session is not healthy (a check failed); 2 when a command
//! fails (connection, RPC error, bad input).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use pb::session_event::Event as SE;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

#[path = "json.rs"]
mod json;

#[derive(Parser)]
#[command(about = "Talk to a session-processor")]
struct Args {
    /// Processor address.
    #[arg(long, env = "PROCESSOR_ADDR", default_value = "http://127.0.0.1:50052")]
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
        /// Offer a `get_time` client tool that this CLI answers itself with the current UTC time.
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
    /// Show a tenant's spend and budget.
    Spend {
        /// Tenant; the token's own tenant when omitted.
        #[arg(long, default_value = "")]
        tenant: String,
    },
}

/// The client tool this CLI can answer itself.
const TIME_TOOL: &str = "get_time";

type Client = SessionServiceClient<InterceptedService<Channel, Bearer>>;

#[derive(Clone)]
struct Bearer(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
        Ok(req)
    }
}

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
    let channel = tonic::transport::Endpoint::from_shared(args.addr.clone())?
        .connect()
        .await?;
    let mut client = SessionServiceClient::with_interceptor(
        channel,
        Bearer(format!("Bearer {}", args.token).parse()?),
    );
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
        } => {
            let s = client
                .create_session(pb::CreateSessionRequest {
                    agent,
                    default_model: model,
                    workspace,
                    ..Default::default()
                })
                .await?
                .into_inner()
                .session
                .ok_or("no session returned")?;
            match json {
                Some(out) => out.print("Session", &s)?,
                None => println!("{}", s.id),
            }
        }
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
            let ask = Ask {
                session,
                text,
                model,
                client_tools,
                auto,
                format,
            };
            prompt(&mut client, ask, json).await?;
        }
        Command::Messages { session } => messages(&mut client, session, json).await?,
        Command::Get { session } => get(&mut client, session, json).await?,
        Command::Diagnose { session } => return diagnose(&mut client, session, json).await,
        Command::Diff {
            session,
            message,
            step,
            patch,
        } => diff(&mut client, session, message, step, patch, json).await?,
        Command::Compact { session, model } => {
            let mut stream = client
                .compact(pb::CompactRequest {
                    session_id: session,
                    model,
                })
                .await?
                .into_inner();
            let mut shown = Shown::default();
            while let Some(resp) = stream.message().await? {
                let Some(event) = resp.event else {
                    continue;
                };
                if let Some(out) = json {
                    out.print("SessionEvent", &event)?;
                }
                let Some(ev) = event.event else {
                    continue;
                };
                let done = match json {
                    Some(_) => matches!(ev, SE::Done(_)),
                    None => shown.show(&ev)?,
                };
                if done {
                    break;
                }
            }
        }
        Command::Spend { tenant } => {
            let s = client
                .get_spend(pb::GetSpendRequest { tenant })
                .await?
                .into_inner();
            if let Some(out) = json {
                out.print("GetSpendResponse", &s)?;
                return Ok(ExitCode::SUCCESS);
            }
            println!("tenant {}", s.tenant);
            println!("spend  {}", usd(s.spend_nano_usd));
            if s.budget_nano_usd > 0 {
                println!("budget {}", usd(s.budget_nano_usd));
            } else {
                println!("budget none");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `prompt` sends.
struct Ask {
    session: String,
    text: String,
    model: String,
    client_tools: Vec<String>,
    auto: Option<String>,
    format: Option<pb::OutputFormat>,
}

async fn prompt(client: &mut Client, ask: Ask, json: Option<&json::Printer>) -> CliResult<()> {
    let Ask {
        session,
        text,
        model,
        client_tools,
        auto,
        format,
    } = ask;
    let structured = format.is_some() && json.is_none();
    let req = pb::PromptRequest {
        format,
        session_id: session.clone(),
        parts: vec![pb::PromptPart {
            kind: Some(pb::prompt_part::Kind::Text(text.clone())),
        }],
        model,
        client_tools: client_tools
            .iter()
            .map(|name| pb::ClientTool {
                name: name.clone(),
                description: format!("{name} (answered by the person at the terminal)"),
                input_schema_json: r#"{"type":"object"}"#.into(),
            })
            .collect(),
        ..Default::default()
    };
    if json.is_none() {
        println!("> {text}");
    }
    let mut stream = client.prompt(req).await?.into_inner();
    let mut control = client.clone();
    let mut shown = Shown::default();
    // The structured answer of each assistant message, from its `message_updated` events.
    let mut answers: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    while let Some(resp) = stream.message().await? {
        let Some(event) = resp.event else {
            continue;
        };
        if let Some(out) = json {
            out.print("SessionEvent", &event)?;
        }
        let Some(ev) = event.event else {
            continue;
        };
        match &ev {
            SE::MessageUpdated(m) if !m.structured_output_json.is_empty() => {
                answers.insert(m.id.clone(), m.structured_output_json.clone());
            }
            SE::ToolCallAwaiting(a) => {
                let answer = match &auto {
                    _ if a.tool == TIME_TOOL => utc_now(),
                    Some(a) => a.clone(),
                    None => ask_line(&format!(
                        "client tool {}({}) — your answer: ",
                        a.tool, a.input_json
                    ))?,
                };
                if json.is_none() {
                    println!("[client tool {} answered: {answer}]", a.tool);
                }
                control
                    .submit_tool_result(pb::SubmitToolResultRequest {
                        session_id: session.clone(),
                        call_id: a.call_id.clone(),
                        output: answer,
                        is_error: false,
                    })
                    .await?;
            }
            SE::PermissionAsked(p) => {
                let allow = match &auto {
                    Some(_) => true,
                    None => ask_line(&format!(
                        "allow {} {} ({})? [y/N] ",
                        p.tool, p.input_json, p.reason
                    ))?
                    .starts_with('y'),
                };
                control
                    .reply_permission(pb::ReplyPermissionRequest {
                        session_id: session.clone(),
                        permission_id: p.permission_id.clone(),
                        allow,
                    })
                    .await?;
            }
            SE::Done(d) if structured => match answers.get(&d.message_id) {
                Some(json) => println!("[structured output]\n{}", pretty_json(json)),
                None => println!("[no structured output]"),
            },
            _ => {}
        }
        let done = match json {
            Some(_) => matches!(ev, SE::Done(_)),
            None => shown.show(&ev)?,
        };
        if done {
            break;
        }
    }
    Ok(())
}

/// What the CLI printed of a running loop so far. `part_updated` replaces a part by id, so a part published again
/// in the same state (or any event the caller already saw) prints nothing new.
#[derive(Default)]
struct Shown {
    /// Text and reasoning parts whose deltas are on the current line.
    streamed: std::collections::HashSet<String>,
    /// The line printed last for each part.
    lines: std::collections::HashMap<String, String>,
}

impl Shown {
    /// Prints one session event the way the CLI shows a running loop; true on `done`.
    fn show(&mut self, ev: &SE) -> std::io::Result<bool> {
        match ev {
            SE::PartDelta(d) => {
                print!("{}", d.delta);
                std::io::stdout().flush()?;
                self.streamed.insert(d.part_id.clone());
            }
            SE::PartUpdated(p) => {
                // A streamed block ended: finish its line.
                if matches!(&p.kind, Some(pb::part::Kind::Text(t)) if t.ended_at.is_some())
                    && self.streamed.remove(&p.id)
                {
                    println!();
                }
                if let Some(line) = part_line(p)
                    && self.lines.get(&p.id) != Some(&line)
                {
                    println!("{line}");
                    self.lines.insert(p.id.clone(), line);
                }
            }
            SE::Status(st) if st.kind() == pb::session_status::Kind::Retry => println!(
                "[retry {} at {}: {}]",
                st.attempt,
                st.next_attempt_at.map(rfc3339).unwrap_or_default(),
                st.message
            ),
            SE::Error(e) => println!("[error: {}]", e.message),
            SE::Done(d) => {
                let stopped = d.stopped_by().as_str_name();
                let stopped = stopped
                    .strip_prefix("STOP_REASON_")
                    .unwrap_or(stopped)
                    .to_lowercase();
                println!(
                    "[done: {}; stopped by {stopped}]",
                    if d.finish.is_empty() { "-" } else { &d.finish }
                );
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    }
}

/// The line a part shows as, when it shows as one.
fn part_line(p: &pb::Part) -> Option<String> {
    match &p.kind {
        Some(pb::part::Kind::Tool(t)) => {
            let s = t.state.clone().unwrap_or_default();
            match s.status() {
                pb::tool_state::Status::Running => {
                    Some(format!("[tool {} {}]", t.tool, s.input_json))
                }
                pb::tool_state::Status::Completed => {
                    Some(format!("[tool {} → {}]", t.tool, first_line(&s.output)))
                }
                pb::tool_state::Status::Error => {
                    Some(format!("[tool {} failed: {}]", t.tool, s.error))
                }
                _ => None,
            }
        }
        Some(pb::part::Kind::StepFinish(f)) => {
            let t = f.tokens.unwrap_or_default();
            Some(format!(
                "[step {} ({}): in {} (+{} cached) out {} reasoning {}; {} nano-USD]",
                f.reason, f.model, t.input, t.cache_read, t.output, t.reasoning, f.cost_nano_usd
            ))
        }
        Some(pb::part::Kind::Compaction(c)) => Some(format!(
            "[compaction{}]",
            if c.auto { " (automatic)" } else { "" }
        )),
        Some(pb::part::Kind::Retry(r)) => Some(format!("[retry {}]", r.attempt)),
        _ => None,
    }
}

async fn get(client: &mut Client, session: String, json: Option<&json::Printer>) -> CliResult<()> {
    let s = client
        .get_session(pb::GetSessionRequest {
            session_id: session,
        })
        .await?
        .into_inner()
        .session
        .ok_or("no session returned")?;
    if let Some(out) = json {
        return out.print("Session", &s);
    }
    let or_dash = |v: &str| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.to_string()
        }
    };
    println!("id        {}", s.id);
    println!("title     {}", or_dash(&s.title));
    println!("agent     {}", or_dash(&s.agent));
    println!("model     {}", or_dash(&s.default_model));
    println!("workspace {}", or_dash(&s.workspace));
    println!("tenant    {}", or_dash(&s.tenant));
    let status = s.status.clone().unwrap_or_default();
    match status.kind() {
        pb::session_status::Kind::Retry => println!(
            "status    retry (attempt {}, next at {}): {}",
            status.attempt,
            status.next_attempt_at.map(rfc3339).unwrap_or_default(),
            status.message
        ),
        kind => println!(
            "status    {}",
            kind.as_str_name()
                .trim_start_matches("KIND_")
                .to_lowercase()
        ),
    }
    println!(
        "created   {}",
        s.created_at.map(rfc3339).unwrap_or_default()
    );
    println!(
        "updated   {}",
        s.updated_at.map(rfc3339).unwrap_or_default()
    );
    println!(
        "cost      {} ({} nano-USD)",
        usd(s.cost_nano_usd),
        s.cost_nano_usd
    );
    if s.budget_nano_usd > 0 {
        println!("budget    {}", usd(s.budget_nano_usd));
    }
    let t = s.tokens.unwrap_or_default();
    println!(
        "tokens    input {} output {} reasoning {} cache_read {} cache_write {}",
        t.input, t.output, t.reasoning, t.cache_read, t.cache_write
    );
    if let Some(summary) = &s.summary {
        println!(
            "changes   +{} -{} in {} files",
            summary.additions,
            summary.deletions,
            summary.files.len()
        );
        for f in &summary.files {
            println!("  {}", change_line(f));
        }
    }
    Ok(())
}

/// Prints every check and the counters; exit code 0 when healthy, 1 when not.
async fn diagnose(
    client: &mut Client,
    session: String,
    json: Option<&json::Printer>,
) -> CliResult<ExitCode> {
    let r = client
        .diagnose(pb::DiagnoseRequest {
            session_id: session,
        })
        .await?
        .into_inner();
    if let Some(out) = json {
        out.print("DiagnoseResponse", &r)?;
        return Ok(if r.healthy {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    println!(
        "session {}: {}",
        r.session_id,
        if r.healthy { "healthy" } else { "NOT HEALTHY" }
    );
    for c in &r.checks {
        if c.ok {
            println!("  ok      {}", c.name);
        } else {
            println!("  FAILED  {}: {}", c.name, c.detail);
        }
    }
    println!("retries                {}", r.retries);
    println!("fallbacks              {}", r.fallbacks);
    println!("storage write failures {}", r.storage_write_failures);
    if r.storage_write_failures > 0 {
        println!(
            "last storage failure   {} {}",
            r.last_storage_failure_at.map(rfc3339).unwrap_or_default(),
            r.last_storage_failure
        );
    }
    match &r.last_error {
        Some(e) => println!(
            "last error             {} on {}: {}",
            e.kind()
                .as_str_name()
                .trim_start_matches("KIND_")
                .to_lowercase(),
            r.last_error_message_id,
            e.message
        ),
        None => println!("last error             -"),
    }
    if r.lease_held {
        println!("lease                  held by {}", r.lease_holder);
    } else {
        println!("lease                  free");
    }
    Ok(if r.healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn diff(
    client: &mut Client,
    session: String,
    message: Option<String>,
    step: Option<u32>,
    patch: bool,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    let d = client
        .get_diff(pb::GetDiffRequest {
            session_id: session,
            message_id: message.unwrap_or_default(),
            step: step.unwrap_or(0),
            include_patch: patch,
        })
        .await?
        .into_inner();
    if let Some(out) = json {
        return out.print("GetDiffResponse", &d);
    }
    let short = |h: &str| h.chars().take(12).collect::<String>();
    println!(
        "{} → {}: +{} -{} in {} files",
        short(&d.from_snapshot),
        short(&d.to_snapshot),
        d.additions,
        d.deletions,
        d.files.len()
    );
    for f in &d.files {
        let Some(change) = &f.change else { continue };
        println!("{}", change_line(change));
        if patch && !f.patch.is_empty() {
            print!("{}", f.patch);
            if !f.patch.ends_with('\n') {
                println!();
            }
            if f.truncated {
                println!("[patch truncated]");
            }
        }
    }
    Ok(())
}

/// `modified +3 -1 src/lib.rs`.
fn change_line(f: &pb::FileChange) -> String {
    let status = f
        .status()
        .as_str_name()
        .trim_start_matches("STATUS_")
        .to_lowercase();
    if f.binary {
        format!("{status:<8} binary {}", f.path)
    } else {
        format!("{status:<8} +{} -{} {}", f.additions, f.deletions, f.path)
    }
}

/// Nano-USD as dollars.
fn usd(nano: i64) -> String {
    format!("${:.6}", nano as f64 / 1e9)
}

/// JSON indented for reading; the text as is when it is not JSON.
fn pretty_json(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| json.to_string())
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn rfc3339(t: prost_types::Timestamp) -> String {
    std::time::SystemTime::try_from(t)
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_default()
}

async fn messages(
    client: &mut Client,
    session: String,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    let mut token = String::new();
    loop {
        let page = client
            .list_messages(pb::ListMessagesRequest {
                session_id: session.clone(),
                page_size: 100,
                page_token: token,
            })
            .await?
            .into_inner();
        for m in &page.messages {
            if let Some(out) = json {
                out.print("Message", m)?;
                continue;
            }
            println!(
                "{} {:?} {} cost={} {}",
                m.id,
                m.role(),
                m.model,
                m.cost_nano_usd,
                m.finish
            );
            for p in &m.parts {
                let line = match &p.kind {
                    Some(pb::part::Kind::Text(t)) => format!("text: {}", first_line(&t.text)),
                    Some(pb::part::Kind::Reasoning(r)) => {
                        format!("reasoning: {}", first_line(&r.text))
                    }
                    Some(pb::part::Kind::Tool(t)) => {
                        let s = t.state.clone().unwrap_or_default();
                        format!(
                            "tool {} {:?} {}",
                            t.tool,
                            s.status(),
                            first_line(if s.error.is_empty() {
                                &s.output
                            } else {
                                &s.error
                            })
                        )
                    }
                    Some(pb::part::Kind::StepStart(_)) => "step-start".into(),
                    Some(pb::part::Kind::StepFinish(f)) => {
                        format!("step-finish {} {} nano-USD", f.reason, f.cost_nano_usd)
                    }
                    Some(other) => format!("{other:?}"),
                    None => "?".into(),
                };
                println!("  {} {line}", p.id);
            }
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    Ok(())
}

/// `HH:MM:SS UTC`, the answer of the CLI's own `get_time` tool.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{:02}:{:02}:{:02} UTC",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

fn first_line(s: &str) -> &str {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(100) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

/// Asks on stderr (stdout carries the conversation, or JSON lines) and reads the answer from stdin.
fn ask_line(question: &str) -> std::io::Result<String> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
