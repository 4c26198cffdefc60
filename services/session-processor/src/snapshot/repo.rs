//! A session's snapshot repository: taking a snapshot, and the changes and patches between two.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llm_proto::sessions as pb;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::config::SnapshotConfig;

use super::{FALLBACK_PATH, SnapshotError, session_dir, valid_snapshot_id};

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
pub(super) fn cut_text(mut bytes: Vec<u8>, limit: usize) -> String {
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
