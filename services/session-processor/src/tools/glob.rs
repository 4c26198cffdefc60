//! A small glob matcher (translated to an anchored regex) for permission patterns and grep's file filter; the
//! `regex` crate is already a dependency, so this avoids pulling in a glob crate for a few operators.
//!
//! Syntax: `*` any run of characters, `?` one character, `[abc]` / `[a-z]` / `[!abc]` a class, `{a,b}`
//! alternatives, `\x` a literal `x`. In [`GlobKind::Path`] globs `*` and `?` stop at `/` and `**` spans
//! directories (`src/**` also matches `src` itself, `**/x` also matches a top-level `x`); in [`GlobKind::Text`]
//! globs (shell commands, tool names) `*` matches anything, `/` included.

use regex::Regex;

/// Whether `/` is special.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GlobKind {
    /// Workspace-relative paths: `*` stays within one path component.
    Path,
    /// Free text such as a shell command: `*` matches any characters.
    Text,
}

/// A compiled glob; matches the whole string.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    regex: Regex,
}

impl Glob {
    /// Compiles `pattern`; the error names the problem for whoever wrote the pattern.
    pub(crate) fn new(pattern: &str, kind: GlobKind) -> Result<Glob, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let (any, one) = match kind {
            GlobKind::Path => ("[^/]*", "[^/]"),
            GlobKind::Text => (".*", "."),
        };
        let mut re = String::from("(?s)^");
        let mut brace_depth = 0usize;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '*' if kind == GlobKind::Path && chars.get(i + 1) == Some(&'*') => {
                    let at_component_start = i == 0 || chars[i - 1] == '/';
                    let next = chars.get(i + 2);
                    if at_component_start && next == Some(&'/') {
                        // `**/`: zero or more whole directories.
                        re.push_str("(?:.*/)?");
                        i += 3;
                        continue;
                    }
                    if at_component_start && next.is_none() && re.ends_with('/') {
                        // Trailing `/**`: the directory itself or anything below it.
                        re.pop();
                        re.push_str("(?:/.*)?");
                    } else {
                        re.push_str(".*");
                    }
                    i += 2;
                    continue;
                }
                '*' => re.push_str(any),
                '?' => re.push_str(one),
                '[' => match class_end(&chars, i) {
                    Some(end) => {
                        re.push_str(&translate_class(&chars[i + 1..end]));
                        i = end + 1;
                        continue;
                    }
                    None => re.push_str(r"\["),
                },
                '{' => {
                    brace_depth += 1;
                    re.push_str("(?:");
                }
                ',' if brace_depth > 0 => re.push('|'),
                '}' if brace_depth > 0 => {
                    brace_depth -= 1;
                    re.push(')');
                }
                '\\' => {
                    let literal = chars.get(i + 1).copied().unwrap_or('\\');
                    re.push_str(&regex::escape(&literal.to_string()));
                    i += 2;
                    continue;
                }
                other => re.push_str(&regex::escape(&other.to_string())),
            }
            i += 1;
        }
        if brace_depth > 0 {
            return Err(format!("glob `{pattern}` has an unclosed `{{`"));
        }
        re.push('$');
        let regex = Regex::new(&re).map_err(|e| format!("glob `{pattern}` is invalid: {e}"))?;
        Ok(Glob { regex })
    }

    /// True when the whole of `text` matches.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

/// Index of the `]` closing the class opened at `start`, if any; a `]` right after `[` or `[!` is a member.
fn class_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    if matches!(chars.get(i), Some('!' | '^')) {
        i += 1;
    }
    if chars.get(i) == Some(&']') {
        i += 1;
    }
    while i < chars.len() {
        if chars[i] == ']' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// A glob class body (between the brackets) as a regex class; every member is escaped so nothing in it can be
/// read as regex syntax, except `-` between two members, which keeps its range meaning.
fn translate_class(body: &[char]) -> String {
    let mut out = String::from("[");
    let mut members = body;
    if let Some(('!' | '^', rest)) = body.split_first() {
        out.push('^');
        members = rest;
    }
    for (index, c) in members.iter().enumerate() {
        let is_range = *c == '-' && index > 0 && index + 1 < members.len();
        if is_range {
            out.push('-');
        } else {
            out.push_str(&regex::escape(&c.to_string()));
        }
    }
    out.push(']');
    out
}

#[cfg(test)]
#[path = "glob_tests.rs"]
mod tests;
