//! Commands that show or create one thing: a session, its messages, its diagnostics, its diff, a tenant's spend.

use std::process::ExitCode;

use llm_proto::sessions as pb;

use super::format::{first_line, rfc3339, usd};
use super::{CliResult, Client, json};

pub(super) async fn get(
    client: &mut Client,
    session: String,
    json: Option<&json::Printer>,
) -> CliResult<()> {
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
pub(super) async fn diagnose(
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

pub(super) async fn diff(
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
    println!(
        "{} → {}: +{} -{} in {} files",
        snapshot_name(&d.from_snapshot),
        snapshot_name(&d.to_snapshot),
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

/// Git's hash of the empty tree: the snapshot of a workspace before its first file.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A workspace snapshot as people read it: its hash's first 12 characters, or `(empty workspace)`.
pub(super) fn snapshot_name(hash: &str) -> String {
    if hash == EMPTY_TREE {
        "(empty workspace)".to_string()
    } else {
        hash.chars().take(12).collect()
    }
}

/// `modified +3 -1 src/lib.rs`.
pub(super) fn change_line(f: &pb::FileChange) -> String {
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

pub(super) async fn messages(
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
                    Some(pb::part::Kind::Patch(patch)) => format!(
                        "patch {} → {}: {}",
                        snapshot_name(&patch.hash),
                        snapshot_name(&patch.after),
                        patch
                            .changes
                            .iter()
                            .map(|c| format!("{} +{} -{}", c.path, c.additions, c.deletions))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
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

pub(super) async fn create(
    client: &mut Client,
    agent: String,
    model: String,
    workspace: String,
    json: Option<&json::Printer>,
) -> CliResult<()> {
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
    Ok(())
}

pub(super) async fn spend(
    client: &mut Client,
    tenant: String,
    json: Option<&json::Printer>,
) -> CliResult<()> {
    let s = client
        .get_spend(pb::GetSpendRequest { tenant })
        .await?
        .into_inner();
    if let Some(out) = json {
        out.print("GetSpendResponse", &s)?;
        return Ok(());
    }
    println!("tenant {}", s.tenant);
    println!("spend  {}", usd(s.spend_nano_usd));
    if s.budget_nano_usd > 0 {
        println!("budget {}", usd(s.budget_nano_usd));
    } else {
        println!("budget none");
    }
    Ok(())
}
