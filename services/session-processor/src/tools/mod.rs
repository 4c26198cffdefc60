//! Built-in workspace tools (read, write, edit, list, grep, bash), the permission rules that gate them, and doom-loop
//! detection (docs/architecture.md "Tools").
//!
//! How the run loop uses this module:
//! 1. Offer [`builtin_specs`] to the model, minus the tools [`PermissionRules::tool_enabled`] says are always denied
//!    (by default that removes `bash`).
//! 2. On each tool call, feed [`DoomLoopDetector::record`] first; a detected loop goes to the agent's
//!    [`DoomPolicy`]. Then ask [`PermissionRules::decide`]; `Ask` becomes a permission request, `Deny` a tool error.
//! 3. Run an allowed call with [`run_builtin`]. It never panics: bad JSON, schema violations, path escapes and I/O
//!    failures all come back as [`ToolOutcome::Err`], a tool error the model reads and can correct.
//!
//! Confinement: every path goes through [`Workspace::resolve`], which refuses absolute paths, `..` above the root,
//! and symbolic links (of any existing ancestor) that lead outside. Resolution and use are separate system calls, so
//! a process racing to swap a directory for a symlink between them could still escape; the built-in tools never do
//! that, but a `bash` command of a session sharing the workspace could. `bash` itself runs in the processor's
//! [`sandbox::Sandbox`]: by default Linux namespaces in which only its own workspace exists (and is writable), as an
//! unprivileged user, under resource limits and with a scrubbed environment (see [`sandbox`]).
mod bash;
mod doom_loop;
mod fs_tools;
mod glob;
mod permissions;
pub mod sandbox;
mod schema;
mod workspace;

use std::sync::Arc;

pub use doom_loop::{DoomLoop, DoomLoopDetector, DoomLoopKind, DoomPolicy, REPEAT_COUNT};
pub use permissions::{Decision, PermissionRules, RuleConfig};
pub use sandbox::{BashLimits, Sandbox};
pub use schema::{builtin_specs, validate_input};
pub use workspace::{
    MAX_WORKSPACE_NAME, TENANTS_DIR, Workspace, valid_workspace_name, workspace_dir,
};

/// A tool as offered to the model: its name, what it does, and the JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    /// Name the model calls the tool by.
    pub name: String,
    /// Model-facing description: what the tool does and how its output looks.
    pub description: String,
    /// JSON Schema (an object schema) the call's input must satisfy.
    pub input_schema: serde_json::Value,
}

/// The result of a tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The tool ran; its output.
    Ok(String),
    /// A tool error the model sees (bad input, refused path, failed command...), not a failure of the session.
    Err(String),
}

impl ToolOutcome {
    /// True for [`ToolOutcome::Err`].
    pub fn is_err(&self) -> bool {
        matches!(self, ToolOutcome::Err(_))
    }

    /// The text for the model, whichever the variant.
    pub fn text(&self) -> &str {
        match self {
            ToolOutcome::Ok(text) | ToolOutcome::Err(text) => text,
        }
    }
}

/// Why a built-in tool refused or failed; its `Display` is the message the model sees.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The path is absolute, climbs above the workspace root, or leads outside through a symbolic link.
    #[error(
        "refused path `{path}`: {reason}; tools can only use paths inside the workspace, relative to its root"
    )]
    OutsideWorkspace {
        /// The path as the model gave it.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The input is well-formed but cannot be acted on (text not found, a directory where a file is needed...).
    #[error("{0}")]
    Invalid(String),
    /// An operating-system error while doing the work.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Bounds on what one tool call may consume or return, and the sandbox `bash` runs in.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Longest output handed to the model; longer output is cut with a note saying so. Default 64 KiB.
    pub max_output_bytes: usize,
    /// Most file bytes one `read` returns (it stops early and says where to continue). Default 1 MiB.
    pub max_read_bytes: usize,
    /// What one `bash` command may use (the agent's `[agents.<name>.bash]` over `[tools.bash]`).
    pub bash: BashLimits,
    /// The processor's sandbox (one per process, probed once, shared by every agent).
    pub sandbox: Arc<Sandbox>,
}

impl Default for Limits {
    /// The defaults, with a sandbox of default settings of its own (probed on first `bash` call).
    fn default() -> Self {
        Limits {
            max_output_bytes: 64 * 1024,
            max_read_bytes: 1024 * 1024,
            bash: BashLimits::default(),
            sandbox: Arc::new(Sandbox::default()),
        }
    }
}

/// Runs the built-in tool `name` on `input_json` inside `ws`.
///
/// The input is first validated against the tool's schema ([`validate_input`]); invalid JSON, a schema violation,
/// an unknown tool name, a refused path or a failing operation all become [`ToolOutcome::Err`] naming the problem.
/// Permission checks are the caller's job ([`PermissionRules::decide`]); this function only executes. Output of
/// either variant is cut to [`Limits::max_output_bytes`].
pub async fn run_builtin(
    ws: &Workspace,
    name: &str,
    input_json: &str,
    limits: &Limits,
) -> ToolOutcome {
    let Some(spec) = builtin_specs().into_iter().find(|spec| spec.name == name) else {
        let names: Vec<String> = builtin_specs().into_iter().map(|spec| spec.name).collect();
        return ToolOutcome::Err(format!(
            "unknown tool `{name}`; the built-in tools are: {}",
            names.join(", ")
        ));
    };
    let input = match validate_input(&spec.input_schema, input_json) {
        Ok(input) => input,
        Err(problem) => {
            return ToolOutcome::Err(truncate_output(
                format!("invalid input for tool `{name}`: {problem}"),
                limits.max_output_bytes,
            ));
        }
    };
    let result = if name == "bash" {
        bash::run(ws, &input, limits).await
    } else {
        // The file tools use blocking std::fs calls (and grep may walk a large tree), so they run off the async
        // worker threads.
        let ws = ws.clone();
        let limits_owned = limits.clone();
        let tool = name.to_owned();
        match tokio::task::spawn_blocking(move || fs_tools::run(&ws, &tool, &input, &limits_owned))
            .await
        {
            Ok(result) => result,
            Err(join_error) => Err(ToolError::Invalid(format!(
                "tool `{name}` stopped unexpectedly: {join_error}"
            ))),
        }
    };
    match result {
        Ok(output) => ToolOutcome::Ok(truncate_output(output, limits.max_output_bytes)),
        Err(error) => ToolOutcome::Err(truncate_output(error.to_string(), limits.max_output_bytes)),
    }
}

/// Cuts `text` to at most `max` bytes (on a character boundary) and appends a note, so the model knows it is not
/// seeing everything.
pub(crate) fn truncate_output(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[output truncated: showing the first {cut} of {total} bytes]"
    ));
    text
}

#[cfg(test)]
mod tests;
