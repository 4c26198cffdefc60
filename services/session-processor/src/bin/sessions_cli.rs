//! `sessions`: a command-line client for the session-processor. Creates sessions, sends prompts and shows the
//! conversation live (text, reasoning, tool calls, usage), answers client tools and permission requests, and lists
//! a session's persisted messages.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, Write};

use clap::{Parser, Subcommand};
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use pb::session_event::Event as SE;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

#[derive(Parser)]
#[command(about = "Talk to a session-processor")]
struct Args {
    /// Processor address.
    #[arg(long, env = "PROCESSOR_ADDR", default_value = "http://127.0.0.1:50052")]
    addr: String,
    /// Bearer token.
    #[arg(long, env = "PROCESSOR_TOKEN")]
    token: String,
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
    },
    /// List a session's messages and parts.
    Messages {
        /// Session id.
        session: String,
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let channel = tonic::transport::Endpoint::from_shared(args.addr.clone())?
        .connect()
        .await?;
    let mut client = SessionServiceClient::with_interceptor(
        channel,
        Bearer(format!("Bearer {}", args.token).parse()?),
    );
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
            println!("{}", s.id);
        }
        Command::Prompt {
            session,
            text,
            model,
            mut client_tools,
            auto,
            time_tool,
        } => {
            if time_tool {
                client_tools.push(TIME_TOOL.into());
            }
            prompt(&mut client, session, text, model, client_tools, auto).await?;
        }
        Command::Messages { session } => messages(&mut client, session).await?,
    }
    Ok(())
}

async fn prompt(
    client: &mut Client,
    session: String,
    text: String,
    model: String,
    client_tools: Vec<String>,
    auto: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let req = pb::PromptRequest {
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
    println!("> {text}");
    let mut stream = client.prompt(req).await?.into_inner();
    let mut control = client.clone();
    let mut streamed = std::collections::HashSet::new();
    while let Some(resp) = stream.message().await? {
        let Some(ev) = resp.event.and_then(|e| e.event) else {
            continue;
        };
        match ev {
            SE::PartDelta(d) => {
                print!("{}", d.delta);
                std::io::stdout().flush()?;
                streamed.insert(d.part_id);
            }
            SE::PartUpdated(p) => match p.kind {
                // A streamed block ended: finish its line.
                Some(pb::part::Kind::Text(t)) if t.ended_at.is_some() && streamed.remove(&p.id) => {
                    println!()
                }
                Some(pb::part::Kind::Tool(t)) => {
                    let s = t.state.unwrap_or_default();
                    match s.status() {
                        pb::tool_state::Status::Running => {
                            println!("[tool {} {}]", t.tool, s.input_json)
                        }
                        pb::tool_state::Status::Completed => {
                            println!("[tool {} → {}]", t.tool, first_line(&s.output))
                        }
                        pb::tool_state::Status::Error => {
                            println!("[tool {} failed: {}]", t.tool, s.error)
                        }
                        _ => {}
                    }
                }
                Some(pb::part::Kind::StepFinish(f)) => {
                    let t = f.tokens.unwrap_or_default();
                    println!(
                        "[step {}: in {} (+{} cached) out {} reasoning {}; {} nano-USD]",
                        f.reason, t.input, t.cache_read, t.output, t.reasoning, f.cost_nano_usd
                    );
                }
                Some(pb::part::Kind::Retry(r)) => println!("[retry {}]", r.attempt),
                _ => {}
            },
            SE::ToolCallAwaiting(a) => {
                let answer = match &auto {
                    _ if a.tool == TIME_TOOL => utc_now(),
                    Some(a) => a.clone(),
                    None => ask_line(&format!(
                        "client tool {}({}) — your answer: ",
                        a.tool, a.input_json
                    ))?,
                };
                println!("[client tool {} answered: {answer}]", a.tool);
                control
                    .submit_tool_result(pb::SubmitToolResultRequest {
                        session_id: session.clone(),
                        call_id: a.call_id,
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
                        permission_id: p.permission_id,
                        allow,
                    })
                    .await?;
            }
            SE::Error(e) => println!("[error: {}]", e.message),
            SE::Done(d) => {
                println!(
                    "[done: {}]",
                    if d.finish.is_empty() { "-" } else { &d.finish }
                );
                break;
            }
            _ => {}
        }
    }
    Ok(())
}

async fn messages(client: &mut Client, session: String) -> Result<(), Box<dyn std::error::Error>> {
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

fn ask_line(question: &str) -> std::io::Result<String> {
    print!("{question}");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}
