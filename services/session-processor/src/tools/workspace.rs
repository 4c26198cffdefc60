//! The session's workspace directory, where each tenant's workspaces live, and the path confinement every file tool
//! goes through.
//!
//! # Layout
//!
//! Under the workspace root (`workspaces.root`):
//! - `<root>/<name>`: workspace `<name>` of the unnamed tenant (`server.auth_tokens`; every session in a
//!   single-tenant deployment), where workspaces have always lived;
//! - `<root>/@tenants/<tenant>/<name>`: workspace `<name>` of tenant `<tenant>`.
//!
//! `@` cannot appear in a workspace name, so no workspace of the unnamed tenant can be or reach `@tenants` (nor the
//! default snapshot root `@snapshots`). [`workspace_dir`] is the one place that maps a session to its directory.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// The directory under the workspace root that holds named tenants' workspaces (one directory per tenant).
pub const TENANTS_DIR: &str = "@tenants";
/// Longest workspace name.
pub const MAX_WORKSPACE_NAME: usize = 128;

/// True for a workspace name: 1 to [`MAX_WORKSPACE_NAME`] characters of `[A-Za-z0-9._-]` starting with a letter or
/// digit; a single directory name, never a path, never hidden (`.git`) and never read as an option (`-rf`) by a
/// command that is handed it.
pub fn valid_workspace_name(name: &str) -> bool {
    name.len() <= MAX_WORKSPACE_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The directory of `tenant`'s workspace `name` under `root` (see the module docs); `""` is the unnamed tenant.
/// Pure: touches nothing. Refuses a name that is not a workspace name and a tenant that is not a tenant name.
pub fn workspace_dir(root: &Path, tenant: &str, name: &str) -> Result<PathBuf, String> {
    if !valid_workspace_name(name) {
        return Err(format!("`{name}` is not a workspace name"));
    }
    if tenant.is_empty() {
        return Ok(root.join(name));
    }
    if !crate::names::valid_tenant_name(tenant) {
        return Err(format!("`{tenant}` is not a tenant name"));
    }
    Ok(root.join(TENANTS_DIR).join(tenant).join(name))
}

/// A confined root directory: tools may only touch paths that resolve inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Canonical (absolute, symlink-free), so confinement checks can compare canonical paths component-wise.
    root: PathBuf,
}

impl Workspace {
    /// Opens the workspace at `root`, creating the directory if it is missing, and canonicalizes it.
    pub fn open(root: &Path) -> io::Result<Workspace> {
        std::fs::create_dir_all(root)?;
        let root = std::fs::canonicalize(root)?;
        if !std::fs::metadata(&root)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace root {} is not a directory", root.display()),
            ));
        }
        Ok(Workspace { root })
    }

    /// Opens (creating it when missing) `tenant`'s workspace `name` under `root` ([`workspace_dir`]). Each
    /// directory from the root down is created without following links, and a symbolic link anywhere on that way
    /// is refused: a link planted there could otherwise lead into another tenant's workspace.
    pub fn for_session(root: &Path, tenant: &str, name: &str) -> io::Result<Workspace> {
        let dir = workspace_dir(root, tenant, name)
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        std::fs::create_dir_all(root)?;
        let mut current = std::fs::canonicalize(root)?;
        let rel = dir.strip_prefix(root).map_err(io::Error::other)?;
        for part in rel.components() {
            current.push(part);
            match std::fs::symlink_metadata(&current) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("{} is a symbolic link", current.display()),
                    ));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match std::fs::create_dir(&current) {
                        Ok(()) => {}
                        // Created meanwhile by a concurrent open: checked again below.
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let workspace = Workspace::open(&current)?;
        if workspace.root != current {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} leads through a symbolic link", current.display()),
            ));
        }
        Ok(workspace)
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a model-supplied, workspace-relative path to an absolute path inside the workspace.
    ///
    /// Refused: absolute paths, `..` that climbs above the root, NUL bytes, and any path whose existing part leads
    /// outside the root through a symbolic link (each existing component is canonicalized, so a symlink anywhere
    /// in the chain is followed and checked), as well as dangling symlinks (their target could be created outside).
    /// `..` is applied lexically before anything touches the disk: `a/../b` is `b` even when `a` is a symlink,
    /// which can only keep a path inside, never take it out. Components after the last existing one are appended
    /// as they are; they cannot be symlinks because they do not exist yet. An empty path or `.` is the root.
    ///
    /// The result is checked at resolution time only; see the module docs about races.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        let refuse = |reason: String| ToolError::OutsideWorkspace {
            path: rel.to_owned(),
            reason,
        };
        if rel.contains('\0') {
            return Err(refuse("the path contains a NUL byte".to_owned()));
        }
        let parts = lexical_parts(rel).map_err(refuse)?;

        let mut current = self.root.clone();
        for (index, part) in parts.iter().enumerate() {
            let candidate = current.join(part);
            match std::fs::symlink_metadata(&candidate) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let shown = shown_prefix(&parts[..=index]);
                    let target = std::fs::canonicalize(&candidate).map_err(|_| {
                        refuse(format!(
                            "`{shown}` is a symbolic link that does not resolve (dangling or looping)"
                        ))
                    })?;
                    if !target.starts_with(&self.root) {
                        return Err(refuse(format!(
                            "`{shown}` is a symbolic link to a location outside the workspace"
                        )));
                    }
                    current = target;
                }
                // `current` is canonical and `part` is a plain name that is not a symlink, so this stays canonical.
                Ok(_) => current = candidate,
                // Nothing from here on exists (or a file sits where a directory is expected, which the tool's own
                // operation will report): the rest cannot contain symlinks, so append it unchanged.
                Err(_) => {
                    for rest in &parts[index..] {
                        current.push(rest);
                    }
                    return Ok(current);
                }
            }
        }
        Ok(current)
    }

    /// `path` as the model should see it: relative to the root, `.` for the root itself.
    pub(crate) fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }
}

/// Splits `rel` into plain names with `.` dropped and `..` applied; errors name the problem for the model.
fn lexical_parts(rel: &str) -> Result<Vec<&OsStr>, String> {
    let path = Path::new(rel);
    if path.is_absolute() {
        return Err("absolute paths are not allowed".to_owned());
    }
    let mut parts: Vec<&OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => parts.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err("`..` goes above the workspace root".to_owned());
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err("absolute paths are not allowed".to_owned());
            }
        }
    }
    Ok(parts)
}

/// The first components of a path, joined for an error message.
fn shown_prefix(parts: &[&OsStr]) -> String {
    let joined: PathBuf = parts.iter().collect();
    joined.to_string_lossy().into_owned()
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
