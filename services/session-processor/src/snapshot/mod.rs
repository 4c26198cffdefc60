//! Workspace snapshots: a git tree of a session's workspace at each step start and end, kept outside the workspace,
//! and the diffs between them (patch parts, the session summary, `GetDiff`).
//!
//! Each session has its own bare repository under the snapshot root (`<root>/<session id>`); the workspace is only
//! ever its `--work-tree`, so no `.git` appears in the workspace. Every git command runs with a cleared environment:
//! no system or user configuration (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, `HOME` pointing at the
//! snapshot repository), no hooks (`core.hooksPath=/dev/null`), no automatic gc, no line-ending conversion, and the
//! index file inside the snapshot repository. A snapshot is `git add -A` into that index followed by
//! `git write-tree`: the tree id is the snapshot id. Nothing is committed and no ref is written; objects are never
//! collected (`gc.auto=0`), and the whole repository goes when the session is deleted (see [`sweep`]).
//!
//! What a snapshot holds:
//! - Files the workspace's own `.gitignore` files ignore are left out (git's usual rules, including `.gitignore`
//!   in subdirectories). Tracked files are never "un-ignored" after the fact: a file snapshotted before a
//!   `.gitignore` line covered it stays tracked, as in any git repository.
//! - Files larger than `snapshots.max_file_bytes` are left out, so a model that writes a huge artifact does not make
//!   every step hash it. A file that grows past the limit disappears from later snapshots (it reads as deleted),
//!   and one that shrinks under it reappears (added).
//! - Nested repositories (a directory with its own `.git`) are left out entirely; git could only record them as an
//!   opaque commit pointer, and one without a commit would fail the whole snapshot.
//! - Symbolic links are recorded as links (their target text); nothing outside the workspace is ever read.
//!
//! Failures never fail the user's step: when git is missing, fails or runs past `snapshots.timeout_ms`, the run
//! loop logs it, counts it in `session_processor_snapshot_failures_total`, leaves the step's snapshot empty and
//! writes no patch part. A killed git may leave `index.lock` behind; the next snapshot removes it (the session's
//! lease makes its loop the only writer of the repository).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::SnapshotConfig;

/// Largest unified diff returned for one file.
pub const PATCH_FILE_LIMIT: usize = 1024 * 1024;
/// Largest sum of unified diffs in one `GetDiff` response, so the answer fits a client's default 4 MiB message limit.
pub const PATCH_TOTAL_LIMIT: usize = 3 * 1024 * 1024;

/// PATH for git when the processor itself has none.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Why a snapshot or a diff failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// git could not be started (not installed, not on PATH).
    #[error("git cannot be started: {0}")]
    Unavailable(io::Error),
    /// git ran and failed.
    #[error("`git {command}` failed ({status}): {stderr}")]
    Git {
        /// The subcommand.
        command: String,
        /// Its exit status.
        status: String,
        /// The start of its standard error.
        stderr: String,
    },
    /// The operation ran past `snapshots.timeout_ms`; its git process was killed.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The snapshot repository could not be read or written.
    #[error("snapshot repository: {0}")]
    Io(#[from] io::Error),
    /// git printed something this module does not understand.
    #[error("unexpected git output: {0}")]
    Parse(String),
    /// A snapshot id that is not in this session's repository (never taken here, or the repository is gone).
    #[error("snapshot {0} is not available")]
    Missing(String),
}

impl SnapshotError {
    /// A short, closed label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            SnapshotError::Unavailable(_) => "unavailable",
            SnapshotError::Git { .. } => "git",
            SnapshotError::Timeout(_) => "timeout",
            SnapshotError::Io(_) => "io",
            SnapshotError::Parse(_) => "parse",
            SnapshotError::Missing(_) => "missing",
        }
    }
}

/// True for a string that can be a session's directory name: the id alphabet, never `.` or `..`.
fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// True for a git object id (SHA-1 or SHA-256 hex), the only form of snapshot id passed to git.
pub fn valid_snapshot_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The snapshot repository directory of a session; `None` for an id that cannot be a directory name.
pub fn session_dir(config: &SnapshotConfig, session_id: &str) -> Option<PathBuf> {
    valid_session_id(session_id).then(|| config.root.join(session_id))
}

mod repo;
mod steps;
mod sweep;

pub use repo::Repo;
pub use steps::{
    SUMMARY_FILES_BYTES, StepRange, StepSnapshots, first_and_latest, first_snapshot, first_within,
    steps, summary,
};
pub use sweep::{sweep, sweep_forever};

#[cfg(test)]
mod tests;
