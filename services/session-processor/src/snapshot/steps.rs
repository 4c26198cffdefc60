//! Snapshots by step: the step ranges of a message, the first and latest snapshots, the session summary.

use std::sync::Arc;

use llm_proto::sessions as pb;

use crate::config::SnapshotConfig;
use crate::metrics::Metrics;
use crate::store::{Fence, Messages, Sessions, StoreError};
use crate::tools::Workspace;

use super::Repo;

/// Most bytes of file entries a session summary lists, so a session record (and a `ListSessions` page) stays small.
pub const SUMMARY_FILES_BYTES: usize = 64 * 1024;

/// The session summary of a list of changes (sorted by path): totals over every file, the first files up to
/// [`SUMMARY_FILES_BYTES`] listed.
pub fn summary(changes: Vec<pb::FileChange>) -> pb::SessionSummary {
    let additions = changes.iter().map(|c| c.additions).sum();
    let deletions = changes.iter().map(|c| c.deletions).sum();
    let (files, omitted) = first_within(changes, SUMMARY_FILES_BYTES, |c| {
        prost::encoding::message::encoded_len(3, c)
    });
    pb::SessionSummary {
        additions,
        deletions,
        files,
        files_omitted: omitted,
    }
}

/// The longest prefix of `items` whose `cost` adds up to at most `budget`, and how many were left out.
pub fn first_within<T>(items: Vec<T>, budget: usize, cost: impl Fn(&T) -> usize) -> (Vec<T>, u32) {
    let mut used = 0usize;
    let total = items.len();
    let kept: Vec<T> = items
        .into_iter()
        .take_while(|item| {
            used += cost(item);
            used <= budget
        })
        .collect();
    let omitted = u32::try_from(total - kept.len()).unwrap_or(u32::MAX);
    (kept, omitted)
}

/// One step's snapshots as its parts record them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRange {
    /// The step-start part's snapshot; empty when none was taken.
    pub start: String,
    /// The snapshot after the step (and its tools): the step-finish part's, else the patch part's `after`, else,
    /// when the step never finished and changed nothing, its start. Empty when unknown.
    pub end: String,
}

/// The steps of a message in order: each step-start part opens one.
pub fn steps(message: &pb::Message) -> Vec<StepRange> {
    let mut steps: Vec<(StepRange, bool)> = Vec::new();
    for part in &message.parts {
        match &part.kind {
            Some(pb::part::Kind::StepStart(s)) => steps.push((
                StepRange {
                    start: s.snapshot.clone(),
                    end: String::new(),
                },
                false,
            )),
            Some(pb::part::Kind::StepFinish(f)) => {
                if let Some((step, finished)) = steps.last_mut() {
                    *finished = true;
                    if !f.snapshot.is_empty() {
                        step.end.clone_from(&f.snapshot);
                    }
                }
            }
            Some(pb::part::Kind::Patch(p)) => {
                if let Some((step, _)) = steps.last_mut()
                    && !p.after.is_empty()
                {
                    step.end.clone_from(&p.after);
                }
            }
            _ => {}
        }
    }
    steps
        .into_iter()
        .map(|(mut step, finished)| {
            if step.end.is_empty() && !finished {
                step.end.clone_from(&step.start);
            }
            step
        })
        .collect()
}

/// The first and the latest snapshot over `messages` (in order); empty strings when there is none.
pub fn first_and_latest<'a>(
    messages: impl IntoIterator<Item = &'a pb::Message>,
) -> (String, String) {
    let mut first = String::new();
    let mut latest = String::new();
    for step in messages.into_iter().flat_map(steps) {
        if first.is_empty() && !step.start.is_empty() {
            first.clone_from(&step.start);
        }
        for point in [&step.start, &step.end] {
            if !point.is_empty() {
                latest.clone_from(point);
            }
        }
    }
    (first, latest)
}

/// The first snapshot of a session, read from its oldest messages.
pub async fn first_snapshot(
    messages: &Messages,
    session_id: &str,
) -> Result<Option<String>, StoreError> {
    let mut after: Option<String> = None;
    loop {
        let (page, next) = messages
            .list_messages(session_id, after.as_deref(), 16)
            .await?;
        let (first, _) = first_and_latest(&page);
        if !first.is_empty() {
            return Ok(Some(first));
        }
        match next {
            Some(n) => after = Some(n),
            None => return Ok(None),
        }
    }
}

/// Snapshots of one session's steps, for the run loop. Failures are logged and counted, never returned: a step runs
/// whether or not its workspace could be snapshotted.
pub struct StepSnapshots {
    repo: Repo,
    session_id: String,
    metrics: Arc<Metrics>,
}

impl StepSnapshots {
    /// Snapshots for a session with a workspace, when snapshots are on.
    pub fn new(
        config: &SnapshotConfig,
        metrics: Arc<Metrics>,
        session: &pb::Session,
        workspace: Option<&Workspace>,
    ) -> Option<Self> {
        let workspace = workspace?;
        if !config.enabled {
            return None;
        }
        Some(StepSnapshots {
            repo: Repo::new(config, &session.id, workspace.root())?,
            session_id: session.id.clone(),
            metrics,
        })
    }

    /// The snapshot at a step's start; empty when it could not be taken.
    pub async fn start(&self) -> String {
        self.track().await.unwrap_or_default()
    }

    /// The snapshot after a step and its tools, and the files that changed since `start`. `None` when the step has
    /// no start snapshot or this one could not be taken; the changes are empty when the diff failed.
    pub async fn finish(&self, start: &str) -> Option<(String, Vec<pb::FileChange>)> {
        if start.is_empty() {
            return None;
        }
        let after = self.track().await?;
        let changes = self.diff(start, &after).await.unwrap_or_default();
        Some((after, changes))
    }

    /// Stores the session summary: the changes from the session's first snapshot (read from `messages`) to
    /// `latest`, on the record in `sessions`. A failed diff keeps the previous summary.
    pub async fn update_summary(
        &self,
        (sessions, messages): (&Sessions, &Messages),
        latest: &str,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        let Some(first) = first_snapshot(messages, &self.session_id).await? else {
            return Ok(());
        };
        let Some(changes) = self.diff(&first, latest).await else {
            return Ok(());
        };
        let summary = summary(changes);
        sessions
            .update_session(&self.session_id, Some(fence), |s| {
                s.summary = Some(summary.clone());
            })
            .await?;
        Ok(())
    }

    async fn track(&self) -> Option<String> {
        match self.repo.track().await {
            Ok(tree) => Some(tree),
            Err(e) => {
                tracing::warn!(message = "workspace snapshot failed; the step runs without one", session_id = %self.session_id, kind = e.kind(), error = %e);
                self.metrics.snapshot_failure("track");
                None
            }
        }
    }

    async fn diff(&self, from: &str, to: &str) -> Option<Vec<pb::FileChange>> {
        match self.repo.changes(from, to).await {
            Ok(changes) => Some(changes),
            Err(e) => {
                tracing::warn!(message = "workspace diff failed", session_id = %self.session_id, kind = e.kind(), error = %e);
                self.metrics.snapshot_failure("diff");
                None
            }
        }
    }
}
