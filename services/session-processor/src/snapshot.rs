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

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::config::SnapshotConfig;
use crate::metrics::Metrics;
use crate::store::{Fence, Store, StoreError};
use crate::tools::Workspace;

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

/// One session's snapshot repository and the workspace it snapshots.
#[derive(Debug, Clone)]
pub struct Repo {
    git_dir: PathBuf,
    work_tree: PathBuf,
    max_file_bytes: u64,
    timeout: Duration,
    program: OsString,
}

impl Repo {
    /// The repository of `session_id` for the workspace at `work_tree`; `None` when the id cannot be a directory
    /// name. Nothing is created until the first snapshot.
    pub fn new(config: &SnapshotConfig, session_id: &str, work_tree: &Path) -> Option<Repo> {
        Some(Repo {
            git_dir: session_dir(config, session_id)?,
            work_tree: work_tree.to_path_buf(),
            max_file_bytes: config.max_file_bytes,
            timeout: config.timeout,
            program: OsString::from("git"),
        })
    }

    /// Uses `program` instead of `git` from PATH.
    pub fn with_program(mut self, program: impl Into<OsString>) -> Repo {
        self.program = program.into();
        self
    }

    /// The snapshot repository (the `--git-dir`).
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Snapshots the workspace now; returns the tree id.
    pub async fn track(&self) -> Result<String, SnapshotError> {
        tokio::time::timeout(self.timeout, self.track_inner())
            .await
            .map_err(|_| SnapshotError::Timeout(self.timeout))?
    }

    async fn track_inner(&self) -> Result<String, SnapshotError> {
        self.init().await?;
        match tokio::fs::remove_file(self.git_dir.join("index.lock")).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        let listed = self
            .git(
                &[
                    "ls-files",
                    "-z",
                    "--cached",
                    "--others",
                    "--exclude-standard",
                ],
                &[],
            )
            .await?;
        let (large, nested) = self.left_out(listed).await?;
        if large.is_empty() && nested.is_empty() {
            self.git(&["add", "-A"], &[]).await?;
        } else {
            // `:/` is the whole work tree whatever the current directory; `literal` keeps glob characters in names.
            let mut spec = b":/\0".to_vec();
            for path in large.iter().chain(&nested) {
                spec.extend_from_slice(b":(top,exclude,literal)");
                spec.extend_from_slice(path);
                spec.push(0);
            }
            let spec_file = self.git_dir.join("snapshot-pathspec");
            tokio::fs::write(&spec_file, &spec).await?;
            let from_file = path_arg("--pathspec-from-file=", &spec_file);
            self.git(&["add", "-A", "--pathspec-file-nul"], &[&from_file])
                .await?;
            if !large.is_empty() {
                // A tracked file that grew past the limit is dropped from the index, not kept at its old content.
                let mut spec = Vec::new();
                for path in &large {
                    spec.extend_from_slice(b":(top,literal)");
                    spec.extend_from_slice(path);
                    spec.push(0);
                }
                tokio::fs::write(&spec_file, &spec).await?;
                self.git(
                    &[
                        "rm",
                        "--cached",
                        "-r",
                        "-q",
                        "--ignore-unmatch",
                        "--pathspec-file-nul",
                    ],
                    &[&from_file],
                )
                .await?;
            }
        }
        let tree = self.git(&["write-tree"], &[]).await?;
        let tree = String::from_utf8_lossy(&tree).trim().to_string();
        if valid_snapshot_id(&tree) {
            Ok(tree)
        } else {
            Err(SnapshotError::Parse(format!("write-tree printed {tree:?}")))
        }
    }

    /// Paths to leave out of the snapshot: (regular files over the size limit, nested repositories). `listed` is
    /// `ls-files -z` output: tracked and untracked, not ignored; nested repositories end with `/`.
    async fn left_out(
        &self,
        listed: Vec<u8>,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>), SnapshotError> {
        let root = self.work_tree.clone();
        let limit = self.max_file_bytes;
        let sorted = tokio::task::spawn_blocking(move || {
            let mut large = Vec::new();
            let mut nested = Vec::new();
            for path in listed.split(|b| *b == 0).filter(|p| !p.is_empty()) {
                if let Some(dir) = path.strip_suffix(b"/") {
                    nested.push(dir.to_vec());
                    continue;
                }
                if let Ok(meta) = std::fs::symlink_metadata(root.join(OsStr::from_bytes(path)))
                    && meta.is_file()
                    && meta.len() > limit
                {
                    large.push(path.to_vec());
                }
            }
            (large, nested)
        })
        .await
        .map_err(|e| SnapshotError::Io(io::Error::other(e)))?;
        Ok(sorted)
    }

    /// Creates the bare repository when it does not exist yet (no template: no sample hooks, no description).
    async fn init(&self) -> Result<(), SnapshotError> {
        if tokio::fs::try_exists(self.git_dir.join("HEAD")).await? {
            return Ok(());
        }
        tokio::fs::create_dir_all(&self.git_dir).await?;
        let mut cmd = self.base_command();
        cmd.current_dir(&self.git_dir)
            .args(["init", "--bare", "--quiet", "--template="])
            .arg(&self.git_dir);
        self.run(cmd, "init").await.map(|_| ())
    }

    /// The files that differ between two snapshots, sorted by path.
    pub async fn changes(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<pb::FileChange>, SnapshotError> {
        tokio::time::timeout(self.timeout, self.changes_inner(from, to))
            .await
            .map_err(|_| SnapshotError::Timeout(self.timeout))?
    }

    async fn changes_inner(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<pb::FileChange>, SnapshotError> {
        self.check_ids(from, to).await?;
        if from == to {
            return Ok(Vec::new());
        }
        let out = self
            .git(
                &[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--raw",
                    "--numstat",
                    "--no-renames",
                    from,
                    to,
                ],
                &[],
            )
            .await;
        match out {
            Ok(out) => parse_changes(&out),
            Err(e) => Err(self.explain(e, from, to).await),
        }
    }

    /// The unified diff of one file between two snapshots, cut at `limit` bytes (at a line end when there is one);
    /// the flag is true when it was cut.
    pub async fn patch(
        &self,
        from: &str,
        to: &str,
        path: &str,
        limit: usize,
    ) -> Result<(String, bool), SnapshotError> {
        tokio::time::timeout(self.timeout, self.patch_inner(from, to, path, limit))
            .await
            .map_err(|_| SnapshotError::Timeout(self.timeout))?
    }

    async fn patch_inner(
        &self,
        from: &str,
        to: &str,
        path: &str,
        limit: usize,
    ) -> Result<(String, bool), SnapshotError> {
        self.check_ids(from, to).await?;
        let mut cmd = self.command();
        cmd.env("GIT_LITERAL_PATHSPECS", "1")
            .args([
                "diff-tree",
                "-r",
                "-p",
                "--no-renames",
                "--no-color",
                from,
                to,
                "--",
            ])
            .arg(path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().map_err(SnapshotError::Unavailable)?;
        let mut bytes = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            stdout
                .take(limit as u64 + 1)
                .read_to_end(&mut bytes)
                .await?;
        }
        let cut = bytes.len() > limit;
        if cut {
            // The rest is not wanted: stop git instead of draining it.
            let _ = child.kill().await;
        } else {
            let status = child.wait().await?;
            if !status.success() {
                return Err(SnapshotError::Git {
                    command: "diff-tree -p".into(),
                    status: status.to_string(),
                    stderr: String::new(),
                });
            }
        }
        Ok((cut_text(bytes, limit), cut))
    }

    /// Both ids well-formed and present in the repository.
    async fn check_ids(&self, from: &str, to: &str) -> Result<(), SnapshotError> {
        for id in [from, to] {
            if !valid_snapshot_id(id) {
                return Err(SnapshotError::Missing(id.to_string()));
            }
        }
        if !tokio::fs::try_exists(self.git_dir.join("HEAD")).await? {
            return Err(SnapshotError::Missing(from.to_string()));
        }
        Ok(())
    }

    /// Turns a failed diff into [`SnapshotError::Missing`] when one of its snapshots is not in the repository.
    async fn explain(&self, e: SnapshotError, from: &str, to: &str) -> SnapshotError {
        if !matches!(e, SnapshotError::Git { .. }) {
            return e;
        }
        for id in [from, to] {
            let spec = format!("{id}^{{tree}}");
            if self.git(&["cat-file", "-e", &spec], &[]).await.is_err() {
                return SnapshotError::Missing(id.to_string());
            }
        }
        e
    }

    /// git with a cleared environment and fixed configuration (see the module docs), without repository flags.
    fn base_command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into()),
            )
            .env("HOME", &self.git_dir)
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_INDEX_FILE", self.git_dir.join("index"))
            .kill_on_drop(true);
        for setting in [
            "core.hooksPath=/dev/null",
            "core.autocrlf=false",
            "core.safecrlf=false",
            "core.fsmonitor=false",
            "core.untrackedCache=false",
            "core.excludesFile=/dev/null",
            "core.quotePath=false",
            "gc.auto=0",
            "maintenance.auto=false",
            "safe.directory=*",
            "init.defaultBranch=snapshots",
            "advice.addEmbeddedRepo=false",
            "advice.addIgnoredFile=false",
        ] {
            cmd.arg("-c").arg(setting);
        }
        cmd
    }

    /// git on this repository and work tree.
    fn command(&self) -> Command {
        let mut cmd = self.base_command();
        cmd.arg(path_arg("--git-dir=", &self.git_dir))
            .arg(path_arg("--work-tree=", &self.work_tree))
            .current_dir(&self.git_dir);
        cmd
    }

    /// Runs `git <args> <extra>` and returns its standard output.
    async fn git(&self, args: &[&str], extra: &[&OsStr]) -> Result<Vec<u8>, SnapshotError> {
        let mut cmd = self.command();
        cmd.args(args).args(extra);
        self.run(cmd, args.first().copied().unwrap_or_default())
            .await
    }

    async fn run(&self, mut cmd: Command, name: &str) -> Result<Vec<u8>, SnapshotError> {
        cmd.stdin(std::process::Stdio::null());
        let out = cmd.output().await.map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound && !self.git_dir.exists() {
                SnapshotError::Io(e)
            } else {
                SnapshotError::Unavailable(e)
            }
        })?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(SnapshotError::Git {
                command: name.to_string(),
                status: out.status.to_string(),
                stderr: stderr
                    .chars()
                    .take(500)
                    .collect::<String>()
                    .trim()
                    .to_string(),
            })
        }
    }
}

/// `<flag><path>` as one argument, without going through UTF-8.
fn path_arg(flag: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(flag);
    arg.push(path);
    arg
}

/// At most `limit` bytes of text: cut at the last line end within the limit when there is one, invalid UTF-8
/// replaced.
fn cut_text(mut bytes: Vec<u8>, limit: usize) -> String {
    if bytes.len() > limit {
        bytes.truncate(limit);
        if let Some(end) = bytes.iter().rposition(|b| *b == b'\n') {
            bytes.truncate(end + 1);
        }
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Parses `diff-tree -r -z --raw --numstat` output: the raw records (`:<modes> <ids> <status>`, path) first, then
/// the numstat records (`<added>\t<deleted>\t<path>`, `-` for binary files).
fn parse_changes(out: &[u8]) -> Result<Vec<pb::FileChange>, SnapshotError> {
    use pb::file_change::Status;
    let mut tokens = out.split(|b| *b == 0).peekable();
    let mut changes: std::collections::BTreeMap<String, pb::FileChange> = Default::default();
    while let Some(meta) = tokens.next_if(|t| t.starts_with(b":")) {
        let path = tokens
            .next()
            .ok_or_else(|| SnapshotError::Parse("a raw record without a path".into()))?;
        let status = match meta.rsplit(|b| *b == b' ').next().and_then(|s| s.first()) {
            Some(b'A') => Status::Added,
            Some(b'D') => Status::Deleted,
            // M, and T (a file became a symlink or the other way round): same path, other content.
            _ => Status::Modified,
        };
        let path = String::from_utf8_lossy(path).into_owned();
        changes.insert(
            path.clone(),
            pb::FileChange {
                path,
                status: status as i32,
                ..Default::default()
            },
        );
    }
    for record in tokens.filter(|t| !t.is_empty()) {
        let mut fields = record.splitn(3, |b| *b == b'\t');
        let (Some(added), Some(deleted), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(SnapshotError::Parse(format!(
                "numstat record {:?}",
                String::from_utf8_lossy(record)
            )));
        };
        let path = String::from_utf8_lossy(path);
        let Some(change) = changes.get_mut(path.as_ref()) else {
            continue;
        };
        let number = |f: &[u8]| {
            std::str::from_utf8(f)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
        };
        match (number(added), number(deleted)) {
            (Some(a), Some(d)) => {
                change.additions = a;
                change.deletions = d;
            }
            _ => change.binary = true,
        }
    }
    Ok(changes.into_values().collect())
}

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
pub async fn first_snapshot(store: &Store, session_id: &str) -> Result<Option<String>, StoreError> {
    let mut after: Option<String> = None;
    loop {
        let (page, next) = store
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

    /// Stores the session summary: the changes from the session's first snapshot to `latest`. A failed diff keeps
    /// the previous summary.
    pub async fn update_summary(
        &self,
        store: &Store,
        latest: &str,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        let Some(first) = first_snapshot(store, &self.session_id).await? else {
            return Ok(());
        };
        let Some(changes) = self.diff(&first, latest).await else {
            return Ok(());
        };
        let summary = summary(changes);
        store
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

/// Deletes the snapshot repositories of sessions that no longer exist; returns how many went. Only directories
/// named like session ids are considered, so anything else under the root is left alone.
pub async fn sweep(config: &SnapshotConfig, store: &Store) -> Result<usize, SnapshotError> {
    let root = &config.root;
    let mut entries = match tokio::fs::read_dir(root).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut removed = 0;
    while let Some(entry) = entries.next_entry().await? {
        let Some(name) = entry.file_name().to_str().map(String::from) else {
            continue;
        };
        if !valid_session_id(&name) || !entry.file_type().await?.is_dir() {
            continue;
        }
        match store.get_session(&name).await {
            Ok(None) => {
                tokio::fs::remove_dir_all(entry.path()).await?;
                removed += 1;
            }
            Ok(Some(_)) => {}
            Err(e) => {
                // Unsure: keep it; the next sweep decides.
                tracing::warn!(message = "snapshot sweep cannot read a session", session_id = %name, error = %e);
            }
        }
    }
    Ok(removed)
}

/// Runs [`sweep`] every `interval` until `stop` is cancelled, so a deleted session's snapshots go from every
/// replica's snapshot root, including roots that are not shared.
pub async fn sweep_forever(
    config: SnapshotConfig,
    store: Store,
    interval: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match sweep(&config, &store).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(message = "removed snapshots of deleted sessions", count = n),
            Err(e) => tracing::warn!(message = "snapshot sweep failed", error = %e),
        }
    }
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
