//! The GetDiff API: workspace diffs of a session, an assistant message, or one step.
//!
//! The range comes from the snapshots the run loop stored on the parts (see [`crate::snapshot`]):
//! - the whole session: its first snapshot (the first step's start) → its latest one;
//! - one assistant message: its first step's start → its last step's end (the step-finish part, or its patch);
//! - one step (`step`, 1-based within the message): that step's start → its end.
//!
//! The files and line counts come from git on the session's snapshot repository; `include_patch` adds each text
//! file's unified diff, cut at [`PATCH_FILE_LIMIT`] per file and [`PATCH_TOTAL_LIMIT`] per response (`truncated`
//! marks every cut or dropped patch). Files are listed up to [`DIFF_FILES_BYTES`] of entries (`files_omitted` counts
//! the rest), so an answer stays under the API's 4 MiB response maximum.

use llm_proto::sessions as pb;
use tonic::{Response, Status};

use crate::api::status;
use crate::engine::Engine;
use crate::snapshot::{self, PATCH_FILE_LIMIT, PATCH_TOTAL_LIMIT, Repo, SnapshotError, StepRange};

/// Most bytes of file entries (without their patches) one answer lists; the rest are counted in `files_omitted`.
pub const DIFF_FILES_BYTES: usize = 512 * 1024;

fn snapshot_status(e: SnapshotError) -> Status {
    match e {
        SnapshotError::Missing(id) => Status::failed_precondition(format!(
            "snapshot {id} is not available on this replica (is the snapshot root shared like the workspace root?)"
        )),
        SnapshotError::Unavailable(e) => {
            Status::unavailable(format!("git is not available on this replica: {e}"))
        }
        SnapshotError::Timeout(d) => {
            Status::deadline_exceeded(format!("the diff took longer than {d:?}"))
        }
        e => {
            tracing::error!(message = "diff failed", error = %e);
            Status::internal(format!("diff failed: {e}"))
        }
    }
}

/// Serves `GetDiff` for a session the caller may see (the server checked the request and the tenant).
pub async fn get_diff(
    engine: &Engine,
    session: pb::Session,
    request: pb::GetDiffRequest,
) -> Result<Response<pb::GetDiffResponse>, Status> {
    if session.workspace.is_empty() {
        return Err(Status::failed_precondition(
            "the session has no workspace, so it has no diffs",
        ));
    }
    let (from, to) = if request.message_id.is_empty() {
        let (first, latest) = session_range(engine, &session.id).await?;
        if first.is_empty() {
            // No step has run with a snapshot yet: nothing changed.
            return Ok(Response::new(pb::GetDiffResponse::default()));
        }
        (first, latest)
    } else {
        message_range(engine, &session.id, &request.message_id, request.step).await?
    };
    let work_tree = crate::tools::workspace_dir(
        &engine.config().workspace_root,
        &session.tenant,
        &session.workspace,
    )
    .map_err(|m| Status::failed_precondition(format!("the session's workspace: {m}")))?;
    let repo = Repo::new(&engine.config().snapshots, &session.id, &work_tree).ok_or_else(|| {
        Status::failed_precondition("the session id cannot name a snapshot repository")
    })?;
    let changes = repo.changes(&from, &to).await.map_err(snapshot_status)?;
    let additions = changes.iter().map(|c| c.additions).sum();
    let deletions = changes.iter().map(|c| c.deletions).sum();
    // Entries up to DIFF_FILES_BYTES and patches up to PATCH_TOTAL_LIMIT: under the 4 MiB response maximum.
    let (changes, files_omitted) = snapshot::first_within(changes, DIFF_FILES_BYTES, |c| {
        prost::encoding::message::encoded_len(1, c) + 16
    });
    let mut budget = PATCH_TOTAL_LIMIT;
    let mut files = Vec::with_capacity(changes.len());
    for change in changes {
        let (patch, truncated) = if !request.include_patch || change.binary {
            (String::new(), false)
        } else if budget == 0 {
            (String::new(), true)
        } else {
            let limit = budget.min(PATCH_FILE_LIMIT);
            let (patch, cut) = repo
                .patch(&from, &to, &change.path, limit)
                .await
                .map_err(snapshot_status)?;
            budget -= patch.len();
            (patch, cut)
        };
        files.push(pb::FileDiff {
            change: Some(change),
            patch,
            truncated,
        });
    }
    Ok(Response::new(pb::GetDiffResponse {
        from_snapshot: from,
        to_snapshot: to,
        files,
        additions,
        deletions,
        files_omitted,
    }))
}

/// The session's first and latest snapshots, over every message.
async fn session_range(engine: &Engine, session_id: &str) -> Result<(String, String), Status> {
    let mut first = String::new();
    let mut latest = String::new();
    let mut after: Option<String> = None;
    loop {
        let (page, next) = engine
            .store()
            .messages()
            .list_messages(session_id, after.as_deref(), 200)
            .await
            .map_err(status::storage)?;
        let (f, l) = snapshot::first_and_latest(&page);
        if first.is_empty() {
            first = f;
        }
        if !l.is_empty() {
            latest = l;
        }
        match next {
            Some(n) => after = Some(n),
            None => return Ok((first, latest)),
        }
    }
}

/// The range of one assistant message (`step` 0) or one of its steps.
async fn message_range(
    engine: &Engine,
    session_id: &str,
    message_id: &str,
    step: u32,
) -> Result<(String, String), Status> {
    let message = engine
        .store()
        .messages()
        .get_message(session_id, message_id)
        .await
        .map_err(status::storage)?
        .ok_or_else(|| status::message_not_found(message_id))?;
    if message.role() != pb::Role::Assistant {
        return Err(status::invalid(
            "message_id",
            "names a user message; diffs belong to assistant messages",
        ));
    }
    let steps = snapshot::steps(&message);
    let no_snapshot = || {
        Status::failed_precondition(
            "no workspace snapshot was recorded for it (snapshots were off or failed)",
        )
    };
    if step == 0 {
        let from = steps
            .iter()
            .map(|s| s.start.as_str())
            .find(|s| !s.is_empty())
            .ok_or_else(no_snapshot)?;
        let to = steps
            .iter()
            .flat_map(|s: &StepRange| [s.start.as_str(), s.end.as_str()])
            .rfind(|s| !s.is_empty())
            .ok_or_else(no_snapshot)?;
        return Ok((from.to_string(), to.to_string()));
    }
    let index = usize::try_from(step - 1).unwrap_or(usize::MAX);
    let range = steps.get(index).ok_or_else(|| {
        Status::not_found(format!(
            "step {step} not found: message {message_id} has {} step(s)",
            steps.len()
        ))
    })?;
    if range.start.is_empty() || range.end.is_empty() {
        return Err(no_snapshot());
    }
    Ok((range.start.clone(), range.end.clone()))
}
