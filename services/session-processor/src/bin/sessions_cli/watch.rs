//! A prompt or a compaction watched live: events printed as they come, client tools and permissions answered.

use std::io::{BufRead, Write};

use llm_proto::sessions as pb;
use pb::session_event::Event as SE;

use super::format::{first_line, pretty_json, rfc3339};
use super::{CliResult, Client, TIME_TOOL, json};

/// What `prompt` sends.
pub(super) struct Ask {
    pub(super) session: String,
    pub(super) text: String,
    pub(super) model: String,
    pub(super) client_tools: Vec<String>,
    pub(super) auto: Option<String>,
    /// The CLI answers `get_time` itself (`--time-tool`).
    pub(super) time_tool: bool,
    pub(super) format: Option<pb::OutputFormat>,
}

pub(super) async fn prompt(
    client: &mut Client,
    ask: Ask,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    let Ask {
        session,
        text,
        model,
        client_tools,
        auto,
        time_tool,
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
        let Some(ev) = unwrap_event(resp.event, json)? else {
            continue;
        };
        match &ev {
            SE::MessageUpdated(m) if !m.structured_output_json.is_empty() => {
                answers.insert(m.id.clone(), m.structured_output_json.clone());
            }
            SE::ToolCallAwaiting(a) => {
                let answers = Answers {
                    auto: auto.as_deref(),
                    time_tool,
                };
                answer_tool(&mut control, &session, a, answers, json).await?
            }
            SE::PermissionAsked(p) => {
                answer_permission(&mut control, &session, p, auto.is_some()).await?
            }
            SE::Done(d) if structured => match answers.get(&d.message_id) {
                Some(json) => println!("[structured output]\n{}", pretty_json(json)),
                None => println!("[no structured output]"),
            },
            _ => {}
        }
        if shown.finished(&ev, json)? {
            break;
        }
    }
    Ok(())
}

/// What the CLI printed of a running loop so far. `part_updated` replaces a part by id, so a part published again
/// in the same state (or any event the caller already saw) prints nothing new.
#[derive(Default)]
pub(super) struct Shown {
    /// Text and reasoning parts whose deltas are on the current line.
    streamed: std::collections::HashSet<String>,
    /// The line printed last for each part.
    pub(super) lines: std::collections::HashMap<String, String>,
}

impl Shown {
    /// Shows `ev` for people (JSON lines were printed already) and tells whether the run ended.
    fn finished(&mut self, ev: &SE, json: Option<&json::Printer>) -> std::io::Result<bool> {
        match json {
            Some(_) => Ok(matches!(ev, SE::Done(_))),
            None => self.show(ev),
        }
    }

    /// Prints one session event the way the CLI shows a running loop; true on `done`.
    pub(super) fn show(&mut self, ev: &SE) -> std::io::Result<bool> {
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
pub(super) fn part_line(p: &pb::Part) -> Option<String> {
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

/// Asks on stderr (stdout carries the conversation, or JSON lines) and reads the answer from stdin.
fn ask_line(question: &str) -> std::io::Result<String> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// `sessions watch`: a session's events as Subscribe delivers them, from `after` (an event id) or from now on,
/// until interrupted or, with `until_done`, until the next `done`.
pub(super) async fn follow(
    client: &mut Client,
    session: String,
    after: String,
    until_done: bool,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    if json.is_none() {
        eprintln!("watching {session} (Ctrl-C to stop)");
    }
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: session,
            after_event_id: after,
        })
        .await?
        .into_inner();
    let mut shown = Shown::default();
    while let Some(resp) = stream.message().await? {
        let Some(ev) = unwrap_event(resp.event, json)? else {
            continue;
        };
        if json.is_none() {
            match &ev {
                SE::ToolCallAwaiting(a) => println!(
                    "[client tool {} awaits an answer: {}]",
                    a.tool, a.input_json
                ),
                SE::PermissionAsked(p) => println!(
                    "[permission asked: {} {} ({})]",
                    p.tool, p.input_json, p.reason
                ),
                _ => {}
            }
        }
        if shown.finished(&ev, json)? && until_done {
            break;
        }
    }
    Ok(())
}

pub(super) async fn compact(
    client: &mut Client,
    session: String,
    model: String,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    let mut stream = client
        .compact(pb::CompactRequest {
            session_id: session,
            model,
        })
        .await?
        .into_inner();
    let mut shown = Shown::default();
    while let Some(resp) = stream.message().await? {
        let Some(ev) = unwrap_event(resp.event, json)? else {
            continue;
        };
        if shown.finished(&ev, json)? {
            break;
        }
    }
    Ok(())
}

/// How the CLI answers client tool calls.
#[derive(Clone, Copy)]
pub(super) struct Answers<'a> {
    /// `--auto`'s fixed answer.
    pub(super) auto: Option<&'a str>,
    /// `--time-tool`: `get_time` answered with the current UTC time.
    pub(super) time_tool: bool,
}

/// Answers a client tool call: the time tool itself (with `--time-tool`), `--auto`'s fixed answer, or a line the
/// person types.
pub(super) async fn answer_tool(
    control: &mut Client,
    session: &str,
    a: &pb::ToolCallAwaiting,
    answers: Answers<'_>,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    let answer = match answers.auto {
        _ if answers.time_tool && a.tool == TIME_TOOL => utc_now(),
        Some(a) => a.to_string(),
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
            session_id: session.to_string(),
            call_id: a.call_id.clone(),
            output: answer,
            is_error: false,
        })
        .await?;
    Ok(())
}

/// Answers a permission request: yes under `--auto`, else what the person types.
pub(super) async fn answer_permission(
    control: &mut Client,
    session: &str,
    p: &pb::PermissionAsked,
    auto: bool,
) -> CliResult<()> {
    if auto {
        eprintln!(
            "[permission for {} {} allowed by --auto]",
            p.tool, p.input_json
        );
    }
    let allow = auto
        || ask_line(&format!(
            "allow {} {} ({})? [y/N] ",
            p.tool, p.input_json, p.reason
        ))?
        .starts_with('y');
    control
        .reply_permission(pb::ReplyPermissionRequest {
            session_id: session.to_string(),
            permission_id: p.permission_id.clone(),
            allow,
        })
        .await?;
    Ok(())
}

/// The event a stream message carries, printed first under `--json`.
fn unwrap_event(
    event: Option<pb::SessionEvent>,
    json: Option<&json::Printer>,
) -> CliResult<Option<SE>> {
    let Some(event) = event else {
        return Ok(None);
    };
    if let Some(out) = json {
        out.print("SessionEvent", &event)?;
    }
    Ok(event.event)
}
