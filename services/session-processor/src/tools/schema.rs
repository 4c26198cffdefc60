//! Tool specs offered to the model and validation of tool input against a JSON Schema.

use serde_json::{Value, json};

use super::ToolSpec;

/// At most this many schema violations are listed in one error; the first few are enough to fix the call.
const MAX_REPORTED_VIOLATIONS: usize = 5;

/// Default number of lines `read` returns, mirrored in its description.
pub(crate) const DEFAULT_READ_LINES: usize = 2000;

/// Most matches `grep` reports, mirrored in its description.
pub(crate) const MAX_GREP_MATCHES: usize = 200;

/// The built-in workspace tools: read, write, edit, list, grep and bash, with their input schemas.
///
/// Every schema is a closed object (`additionalProperties: false`), so a misspelt field is reported to the model
/// rather than silently ignored.
pub fn builtin_specs() -> Vec<ToolSpec> {
    let path_description = "Path relative to the workspace root, e.g. `src/main.rs`. Absolute paths and `..` \
                            above the root are refused.";
    vec![
        read_spec(path_description),
        write_spec(path_description),
        edit_spec(path_description),
        list_spec(),
        grep_spec(),
        bash_spec(),
    ]
}

/// The `read` tool.
fn read_spec(path_description: &str) -> ToolSpec {
    spec(
        "read",
        &format!(
            "Read a text file in the workspace. Returns its lines prefixed with 1-based line numbers, like \
             `   1| first line`. Returns at most {DEFAULT_READ_LINES} lines by default; the output ends with a \
             note giving the offset to continue from when more lines remain. Very long lines are shortened. \
             Binary files are refused."
        ),
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": path_description},
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "1-based line number to start reading at. Default 1."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": format!("Maximum number of lines to return. Default {DEFAULT_READ_LINES}.")
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    )
}

/// The `write` tool.
fn write_spec(path_description: &str) -> ToolSpec {
    spec(
        "write",
        "Create a file in the workspace, or replace an existing file's entire content. Missing parent \
         directories are created. To change part of an existing file, prefer `edit`.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": path_description},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    )
}

/// The `edit` tool.
fn edit_spec(path_description: &str) -> ToolSpec {
    spec(
        "edit",
        "Replace exact text in an existing file in the workspace. `old` must match the file's content exactly, \
         including whitespace, indentation and line breaks, and must occur exactly once unless `replace_all` is \
         true; include enough surrounding lines to make it unique. When `old` is not found, or is found more \
         than once without `replace_all`, the file is left unchanged and an error says which.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": path_description},
                "old": {"type": "string", "minLength": 1, "description": "The exact text to replace."},
                "new": {"type": "string", "description": "The replacement text (may be empty to delete)."},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence of `old` instead of requiring exactly one. \
                                    Default false."
                }
            },
            "required": ["path", "old", "new"],
            "additionalProperties": false
        }),
    )
}

/// The `list` tool.
fn list_spec() -> ToolSpec {
    spec(
        "list",
        "List the entries of a directory in the workspace, one per line, sorted by name, not recursive. \
         Directories end with `/`, symbolic links with `@`. The `.git` directory is left out.",
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory relative to the workspace root. Default: the root itself."
                }
            },
            "additionalProperties": false
        }),
    )
}

/// The `grep` tool.
fn grep_spec() -> ToolSpec {
    spec(
        "grep",
        &format!(
            "Search the contents of files in the workspace with a regular expression (Rust regex syntax, \
             matched against one line at a time). Searches every file under `path` recursively, skipping \
             binary files, symbolic links and `.git`. Returns one match per line as `path:line: text`, at most \
             {MAX_GREP_MATCHES} matches in path order; narrow `path` or `glob` when the results are capped."
        ),
        json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Regular expression, e.g. `fn\\s+main` or `(?i)todo`."
                },
                "path": {
                    "type": "string",
                    "description": "File or directory to search, relative to the workspace root. Default: the \
                                    whole workspace."
                },
                "glob": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Only search files matching this glob. Without `/` it is matched against \
                                    the file name (`*.rs`); with `/` against the workspace-relative path \
                                    (`src/**/*.rs`). Supports `*`, `**`, `?`, `[abc]` and `{a,b}`."
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
    )
}

/// The `bash` tool.
fn bash_spec() -> ToolSpec {
    spec(
        "bash",
        "Run a shell command with `/bin/sh -c` in the workspace root directory. The environment holds only \
         PATH, HOME (the workspace root) and LANG; stdin is empty. The command and every process it starts \
         are killed when it exceeds the time limit, and background processes do not outlive the call. Returns \
         the exit code, stdout and stderr (long output is truncated). Prefer read, write, edit, list and grep \
         for working with files.",
        json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The shell command line, e.g. `cargo test 2>&1 | tail -n 50`."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    )
}

fn spec(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
    }
}

/// Parses `input_json` and validates it against `schema`, returning the parsed input.
///
/// Empty (or all-whitespace) input counts as `{}`, because providers send no argument text at all for a call
/// without arguments. Errors are meant for the model: "input is not valid JSON (...)" or "input does not match
/// the schema: at `/offset`: ..." listing the first few violations. A schema that is itself invalid (possible for
/// client tools) is reported as such. Used for built-in and client tools alike.
pub fn validate_input(schema: &Value, input_json: &str) -> Result<Value, String> {
    let text = input_json.trim();
    let instance: Value = if text.is_empty() {
        Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(text).map_err(|e| format!("input is not valid JSON ({e})"))?
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("the tool's input schema is itself invalid ({e})"))?;
    let mut violations: Vec<String> = Vec::new();
    let mut total = 0usize;
    for error in validator.iter_errors(&instance) {
        total += 1;
        if violations.len() < MAX_REPORTED_VIOLATIONS {
            let at = error.instance_path().as_str();
            if at.is_empty() {
                violations.push(error.to_string());
            } else {
                violations.push(format!("at `{at}`: {error}"));
            }
        }
    }
    if total == 0 {
        return Ok(instance);
    }
    let mut message = format!("input does not match the schema: {}", violations.join("; "));
    if total > violations.len() {
        message.push_str(&format!(" (and {} more)", total - violations.len()));
    }
    Err(message)
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
