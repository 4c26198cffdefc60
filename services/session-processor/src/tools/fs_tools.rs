//! The file tools: read, write, edit, list and grep. Synchronous (std::fs); the caller runs them on a blocking
//! thread. Every path goes through [`Workspace::resolve`].

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::glob::{Glob, GlobKind};
use super::schema::{DEFAULT_READ_LINES, MAX_GREP_MATCHES};
use super::{Limits, ToolError, Workspace};

/// Bytes sniffed at the start of a file to tell binary from text; a NUL byte in them means binary, the same
/// heuristic git and grep use.
const SNIFF_BYTES: usize = 8 * 1024;

/// Characters of one line `read` shows before shortening it, so one minified line cannot fill the output.
const MAX_READ_LINE_CHARS: usize = 2000;

/// Characters of a matching line `grep` shows.
const MAX_GREP_LINE_CHARS: usize = 300;

/// Bytes of one line kept in memory while scanning; the rest of an over-long line is skipped, which bounds memory
/// on files without line breaks.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Entries `list` shows before stopping.
const MAX_LIST_ENTRIES: usize = 1000;

/// Directory entries `grep` visits before giving up, so a huge tree cannot keep a call busy indefinitely.
const MAX_GREP_VISITS: usize = 100_000;

/// The directory every walk and listing leaves out: repository internals are noise to the model.
const SKIPPED_DIR: &str = ".git";

/// Runs file tool `tool` on schema-validated `input`.
pub(crate) fn run(
    ws: &Workspace,
    tool: &str,
    input: &Value,
    limits: &Limits,
) -> Result<String, ToolError> {
    match tool {
        "read" => read(ws, parse(input)?, limits),
        "write" => write(ws, parse(input)?),
        "edit" => edit(ws, parse(input)?),
        "list" => list(ws, parse(input)?),
        "grep" => grep(ws, parse(input)?),
        other => Err(ToolError::Invalid(format!("`{other}` is not a file tool"))),
    }
}

/// Typed input; the schema was already checked, so a failure here is a mismatch the model still gets to see
/// (for example `1.5` where the schema's `integer` accepts `1.0`).
fn parse<T: DeserializeOwned>(input: &Value) -> Result<T, ToolError> {
    serde_json::from_value(input.clone())
        .map_err(|e| ToolError::Invalid(format!("invalid input: {e}")))
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> ToolError {
    move |source| ToolError::Io { context, source }
}

/// Metadata of a path the model named, with "does not exist" worded for the model.
fn existing(path: &Path, shown: &str) -> Result<fs::Metadata, ToolError> {
    fs::metadata(path).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            ToolError::Invalid(format!("`{shown}` does not exist"))
        } else {
            ToolError::Io {
                context: format!("cannot access `{shown}`"),
                source,
            }
        }
    })
}

/// Reads one line (through `\n`) into `line`, keeping at most [`MAX_LINE_BYTES`] of it; returns the bytes consumed
/// (0 at end of file).
fn read_line_bounded<R: BufRead>(reader: &mut R, line: &mut Vec<u8>) -> io::Result<usize> {
    line.clear();
    let mut consumed = 0;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(consumed);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(newline) => (&available[..=newline], true),
            None => (available, false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        reader.consume(used);
        consumed += used;
        if done {
            return Ok(consumed);
        }
    }
}

/// A line without its line ending, as text (invalid UTF-8 replaced), cut to `max_chars` with a marker.
fn line_text(raw: &[u8], max_chars: usize) -> String {
    let mut end = raw.len();
    while end > 0 && matches!(raw[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let text = String::from_utf8_lossy(&raw[..end]);
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}… [line shortened]", &text[..cut]),
        None => text.into_owned(),
    }
}

fn looks_binary(reader: &mut BufReader<File>) -> io::Result<bool> {
    Ok(reader.fill_buf()?.contains(&0))
}

#[derive(Deserialize)]
struct ReadInput {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

fn read(ws: &Workspace, input: ReadInput, limits: &Limits) -> Result<String, ToolError> {
    let path = ws.resolve(&input.path)?;
    let shown = ws.display(&path);
    if existing(&path, &shown)?.is_dir() {
        return Err(ToolError::Invalid(format!(
            "`{shown}` is a directory; use `list` to see its entries"
        )));
    }
    let file = File::open(&path).map_err(io_error(format!("cannot open `{shown}`")))?;
    let mut reader = BufReader::with_capacity(SNIFF_BYTES, file);
    if looks_binary(&mut reader).map_err(io_error(format!("cannot read `{shown}`")))? {
        return Err(ToolError::Invalid(format!(
            "`{shown}` looks like a binary file (it contains NUL bytes); read only shows text files"
        )));
    }

    let offset = input.offset.unwrap_or(1).max(1);
    let limit = input.limit.unwrap_or(DEFAULT_READ_LINES).max(1);
    let mut out = String::new();
    let mut line = Vec::new();
    let mut line_no = 0usize;
    let mut shown_lines = 0usize;
    let mut shown_bytes = 0usize;
    let mut stopped_early = false;
    loop {
        let consumed = read_line_bounded(&mut reader, &mut line)
            .map_err(io_error(format!("cannot read `{shown}`")))?;
        if consumed == 0 {
            break;
        }
        line_no += 1;
        if line_no < offset {
            continue;
        }
        if shown_lines == limit
            || (shown_lines > 0 && shown_bytes + consumed > limits.max_read_bytes)
        {
            stopped_early = true;
            break;
        }
        shown_lines += 1;
        shown_bytes += consumed;
        out.push_str(&format!(
            "{line_no:>4}| {}\n",
            line_text(&line, MAX_READ_LINE_CHARS)
        ));
    }

    if line_no == 0 {
        return Ok(format!("(`{shown}` is empty)"));
    }
    if shown_lines == 0 {
        return Err(ToolError::Invalid(format!(
            "offset {offset} is past the end of `{shown}`, which has {line_no} lines"
        )));
    }
    let last = offset + shown_lines - 1;
    if stopped_early {
        out.push_str(&format!(
            "(showing lines {offset}-{last}; the file continues: read again with offset={})\n",
            last + 1
        ));
    }
    Ok(out)
}

#[derive(Deserialize)]
struct WriteInput {
    path: String,
    content: String,
}

fn write(ws: &Workspace, input: WriteInput) -> Result<String, ToolError> {
    let path = ws.resolve(&input.path)?;
    let shown = ws.display(&path);
    let existed = match fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::Invalid(format!(
                "`{shown}` is a directory; give the path of a file"
            )));
        }
        Ok(_) => true,
        Err(_) => false,
    };
    // The parent chain below the last existing directory does not exist yet, so creating it cannot follow a
    // symlink out of the workspace (resolve already checked the existing part).
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_error(format!(
            "cannot create the directories for `{shown}`"
        )))?;
    }
    fs::write(&path, input.content.as_bytes())
        .map_err(io_error(format!("cannot write `{shown}`")))?;
    let verb = if existed { "overwrote" } else { "created" };
    Ok(format!("{verb} `{shown}` ({} bytes)", input.content.len()))
}

#[derive(Deserialize)]
struct EditInput {
    path: String,
    old: String,
    new: String,
    #[serde(default)]
    replace_all: bool,
}

fn edit(ws: &Workspace, input: EditInput) -> Result<String, ToolError> {
    let path = ws.resolve(&input.path)?;
    let shown = ws.display(&path);
    if existing(&path, &shown)?.is_dir() {
        return Err(ToolError::Invalid(format!(
            "`{shown}` is a directory, not a file"
        )));
    }
    if input.old.is_empty() {
        return Err(ToolError::Invalid("`old` must not be empty".to_owned()));
    }
    if input.old == input.new {
        return Err(ToolError::Invalid(
            "`old` and `new` are identical, so there is nothing to change".to_owned(),
        ));
    }
    let bytes = fs::read(&path).map_err(io_error(format!("cannot read `{shown}`")))?;
    let Ok(content) = String::from_utf8(bytes) else {
        return Err(ToolError::Invalid(format!(
            "`{shown}` is not UTF-8 text, so it cannot be edited; use write to replace it"
        )));
    };
    let count = content.matches(input.old.as_str()).count();
    if count == 0 {
        return Err(ToolError::Invalid(format!(
            "`old` was not found in `{shown}`; it must match the file exactly, including whitespace and \
             indentation (read the file to copy the current text)"
        )));
    }
    if count > 1 && !input.replace_all {
        return Err(ToolError::Invalid(format!(
            "`old` occurs {count} times in `{shown}`; include more surrounding text to make it unique, or set \
             replace_all to true to replace every occurrence"
        )));
    }
    let updated = content.replace(input.old.as_str(), &input.new);
    fs::write(&path, updated.as_bytes()).map_err(io_error(format!("cannot write `{shown}`")))?;
    let noun = if count == 1 {
        "occurrence"
    } else {
        "occurrences"
    };
    Ok(format!("replaced {count} {noun} in `{shown}`"))
}

#[derive(Deserialize)]
struct ListInput {
    path: Option<String>,
}

fn list(ws: &Workspace, input: ListInput) -> Result<String, ToolError> {
    let path = ws.resolve(input.path.as_deref().unwrap_or("."))?;
    let shown = ws.display(&path);
    if !existing(&path, &shown)?.is_dir() {
        return Err(ToolError::Invalid(format!(
            "`{shown}` is a file, not a directory; use read to see its content"
        )));
    }
    let mut entries = Vec::new();
    for entry in fs::read_dir(&path).map_err(io_error(format!("cannot list `{shown}`")))? {
        let entry = entry.map_err(io_error(format!("cannot list `{shown}`")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == SKIPPED_DIR {
            continue;
        }
        // file_type does not follow symlinks, so a link to a directory shows as a link, not as a directory the
        // model might expect to be able to enter.
        let suffix = match entry.file_type() {
            Ok(kind) if kind.is_symlink() => "@",
            Ok(kind) if kind.is_dir() => "/",
            _ => "",
        };
        entries.push(format!("{name}{suffix}"));
    }
    if entries.is_empty() {
        return Ok(format!("(`{shown}` is empty)"));
    }
    entries.sort();
    let total = entries.len();
    let mut out = entries
        .into_iter()
        .take(MAX_LIST_ENTRIES)
        .collect::<Vec<_>>()
        .join("\n");
    if total > MAX_LIST_ENTRIES {
        out.push_str(&format!(
            "\n(showing {MAX_LIST_ENTRIES} of {total} entries; use grep with a glob to find specific files)"
        ));
    }
    Ok(out)
}

#[derive(Deserialize)]
struct GrepInput {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

/// Which files grep searches.
struct FileFilter {
    glob: Glob,
    /// Match the workspace-relative path (the glob has a `/`) rather than the file name.
    whole_path: bool,
}

impl FileFilter {
    fn accepts(&self, ws: &Workspace, path: &Path) -> bool {
        if self.whole_path {
            self.glob.is_match(&ws.display(path))
        } else {
            path.file_name()
                .is_some_and(|name| self.glob.is_match(&name.to_string_lossy()))
        }
    }
}

fn grep(ws: &Workspace, input: GrepInput) -> Result<String, ToolError> {
    let regex = regex::RegexBuilder::new(&input.pattern)
        // Bounds compile time and memory for pathological patterns; generous for anything a search needs.
        .size_limit(1 << 22)
        .build()
        .map_err(|e| {
            ToolError::Invalid(format!(
                "invalid regular expression `{}`: {e}",
                input.pattern
            ))
        })?;
    let filter = match &input.glob {
        Some(pattern) => Some(FileFilter {
            glob: Glob::new(pattern, GlobKind::Path).map_err(ToolError::Invalid)?,
            whole_path: pattern.contains('/'),
        }),
        None => None,
    };
    let start = ws.resolve(input.path.as_deref().unwrap_or("."))?;
    let shown = ws.display(&start);
    let start_meta = existing(&start, &shown)?;

    let mut files: Vec<PathBuf> = Vec::new();
    let mut walk_capped = false;
    if start_meta.is_dir() {
        walk_capped = collect_files(&start, &mut files);
    } else {
        files.push(start.clone());
    }

    let mut matches: Vec<String> = Vec::new();
    let mut capped = false;
    let mut line = Vec::new();
    for file in &files {
        // A file named explicitly is searched whatever the glob says; the glob selects within directories.
        if start_meta.is_dir() && filter.as_ref().is_some_and(|f| !f.accepts(ws, file)) {
            continue;
        }
        // Unreadable files are skipped rather than failing the whole search.
        let Ok(handle) = File::open(file) else {
            continue;
        };
        let mut reader = BufReader::with_capacity(SNIFF_BYTES, handle);
        if looks_binary(&mut reader).unwrap_or(true) {
            continue;
        }
        let file_shown = ws.display(file);
        if !grep_file(&regex, &mut reader, &file_shown, &mut line, &mut matches) {
            capped = true;
            break;
        }
    }

    if matches.is_empty() {
        let mut out = format!("no matches for `{}` in `{shown}`", input.pattern);
        if let Some(glob) = &input.glob {
            out.push_str(&format!(" (files matching `{glob}`)"));
        }
        return Ok(out);
    }
    let mut out = matches.join("\n");
    if capped {
        out.push_str(&format!(
            "\n(results capped at {MAX_GREP_MATCHES} matches; narrow the pattern, path or glob)"
        ));
    }
    if walk_capped {
        out.push_str(&format!(
            "\n(stopped after visiting {MAX_GREP_VISITS} entries; narrow the path)"
        ));
    }
    Ok(out)
}

/// Appends `file`'s matching lines to `matches`; false when the cap was reached (the search stops there).
fn grep_file(
    regex: &regex::Regex,
    reader: &mut BufReader<File>,
    file_shown: &str,
    line: &mut Vec<u8>,
    matches: &mut Vec<String>,
) -> bool {
    let mut line_no = 0usize;
    while let Ok(consumed) = read_line_bounded(reader, line) {
        if consumed == 0 {
            break;
        }
        line_no += 1;
        if regex.is_match(&line_text(line, usize::MAX)) {
            if matches.len() == MAX_GREP_MATCHES {
                return false;
            }
            let shown_line = line_text(line, MAX_GREP_LINE_CHARS);
            matches.push(format!(
                "{file_shown}:{line_no}: {}",
                shown_line.trim_start()
            ));
        }
    }
    true
}

/// Collects the regular files under `dir` in sorted path order, not following symlinks (they could lead outside
/// the workspace) and skipping `.git`. Returns true when the visit cap stopped the walk.
fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    let mut visits = 0usize;
    while let Some(current) = stack.pop() {
        let Ok(reader) = fs::read_dir(&current) else {
            continue;
        };
        let mut children: Vec<(PathBuf, bool)> = Vec::new();
        for entry in reader.flatten() {
            visits += 1;
            if visits > MAX_GREP_VISITS {
                return true;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                continue;
            }
            if kind.is_dir() {
                if entry.file_name() != SKIPPED_DIR {
                    children.push((entry.path(), true));
                }
            } else if kind.is_file() {
                children.push((entry.path(), false));
            }
        }
        children.sort();
        // Files of this directory first, in order; then its subdirectories, depth first, in order.
        for (path, _) in children.iter().filter(|(_, is_dir)| !is_dir) {
            files.push(path.clone());
        }
        for (path, _) in children.iter().filter(|(_, is_dir)| *is_dir).rev() {
            stack.push(path.clone());
        }
    }
    false
}

#[cfg(test)]
#[path = "fs_tools_tests.rs"]
mod tests;
