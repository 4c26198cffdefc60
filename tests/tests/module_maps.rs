//! The module maps a newcomer reads first agree with the code. Each service's `lib.rs` doc comment names every module
//! `lib.rs` declares and links none it does not declare; docs/architecture.md's map of each service names every
//! top-level module of its `src/` (and every entry of a folder whose contents it lists), and every file or folder
//! it names exists in that `src/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SERVICES: [&str; 2] = ["services/llm-gateway/src", "services/session-processor/src"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_test_file(name: &str) -> bool {
    name.ends_with("_tests.rs") || name == "tests.rs" || name == "tests"
}

/// The entries of `dir` a module map lists: its source files (`name.rs`) and folders (`name/`), tests left out.
fn entries(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_test_file(&name) || name == "testdata" {
            continue;
        }
        if entry.path().is_dir() {
            out.insert(format!("{name}/"));
        } else if name.ends_with(".rs") {
            out.insert(name);
        }
    }
    out
}

/// Every source file and folder below `dir`, tests included, by name (`name.rs`, `name/`).
fn all_names(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            all_names(&path, out);
            out.insert(format!("{name}/"));
        } else if name.ends_with(".rs") {
            out.insert(name);
        }
    }
}

/// The words of `text` that name a source file or a folder: `name.rs`, `name/` (lower case).
fn named(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let after_word =
            i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || b"_.".contains(&bytes[i - 1]));
        if !word(bytes[i]) || after_word {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word(bytes[i]) {
            i += 1;
        }
        let rest = &text[i..];
        if rest.starts_with(".rs") && !rest[3..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
            out.push(format!("{}.rs", &text[start..i]));
            i += 3;
        } else if rest.starts_with('/')
            && !rest[1..].starts_with(['/', '*'])
            && !names_a_doc(&rest[1..])
        {
            out.push(format!("{}/", &text[start..i]));
            i += 1;
        }
    }
    out
}

/// `rest` goes on as a path to a Markdown page (`providers.md` after `docs/`): a doc, not a module.
fn names_a_doc(rest: &str) -> bool {
    let path: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
        .collect();
    path.ends_with(".md")
}

/// The code block of docs/architecture.md that maps `src` (its first line names it).
fn doc_map(doc: &str, src: &str) -> String {
    let header = format!("{src}/");
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(&header));
    let mut block = String::new();
    for line in lines.by_ref().skip(1) {
        if line.starts_with("```") {
            return block;
        }
        block.push_str(line);
        block.push('\n');
    }
    panic!("docs/architecture.md has no module map of {src}");
}

/// The map's entries: each line that starts (indented two spaces a level) with file and folder names, as the path of
/// each name from `src/`.
fn doc_entries(block: &str) -> Vec<(usize, String)> {
    let mut folders: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (n, line) in block.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        if indent == 0 || indent % 2 != 0 || indent > 8 {
            continue;
        }
        let level = indent / 2;
        let leading: Vec<&str> = line
            .split_whitespace()
            .take_while(|w| named(w).first().is_some_and(|x| x == w) || is_path(w))
            .collect();
        if leading.is_empty() {
            continue;
        }
        folders.truncate(level - 1);
        if folders.len() != level - 1 {
            continue;
        }
        let parent = folders.concat();
        let mut last_folder = None;
        for word in leading {
            out.push((n + 1, format!("{parent}{word}")));
            if word.ends_with('/') {
                last_folder = Some(word.to_string());
            }
        }
        if let Some(folder) = last_folder {
            folders.push(folder);
        }
    }
    out
}

/// `bin/sessions_cli/`: a path of folders.
fn is_path(word: &str) -> bool {
    word.ends_with('/')
        && word.contains('/')
        && word
            .trim_end_matches('/')
            .split('/')
            .all(|p| !p.is_empty() && named(&format!("{p}/")).len() == 1)
}

#[test]
fn architecture_maps_name_every_module_and_only_modules_that_exist() {
    let doc = read(&root().join("docs/architecture.md"));
    let mut problems = Vec::new();
    for src in SERVICES {
        let dir = root().join(src);
        let block = doc_map(&doc, src);
        let mentioned: BTreeSet<String> = named(&block).into_iter().collect();
        let mut exist = BTreeSet::new();
        all_names(&dir, &mut exist);
        for name in &mentioned {
            if !exist.contains(name) {
                problems.push(format!(
                    "{src}: the map names {name}, which is not in {src}"
                ));
            }
        }
        let listed = doc_entries(&block);
        for (line, path) in &listed {
            if !dir.join(path.trim_end_matches('/')).exists() {
                problems.push(format!(
                    "{src}: line {line} of its map lists {path}, which does not exist"
                ));
            }
        }
        // Every top-level module, and every entry of a folder whose contents the map lists.
        let mut folders = vec![String::new()];
        folders.extend(listed.iter().filter_map(|(_, p)| {
            let k = p.trim_end_matches('/').rfind('/')?;
            Some(p[..=k].to_string())
        }));
        folders.sort();
        folders.dedup();
        for folder in folders {
            for name in entries(&dir.join(&folder)) {
                if folder.is_empty() && name == "lib.rs" {
                    continue;
                }
                if !mentioned.contains(&name) {
                    problems.push(format!("{src}: the map does not name {folder}{name}"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md:\n{}",
        problems.join("\n")
    );
}

/// The modules `lib.rs` declares (`mod x;`, `pub mod x;`).
fn declared(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ");
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

/// The first path segment of each ``[`x`]`` or ``[`x::y`]`` link of the `//!` comment, and each `` `x` `` named.
fn doc_links(lib: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut links = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (k, piece) in doc.split('`').enumerate() {
        if k % 2 == 0 {
            continue;
        }
        let head = piece.split("::").next().unwrap_or("").to_string();
        let linked = doc.contains(&format!("[`{piece}`]"));
        if head.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !head.is_empty() {
            if linked {
                links.insert(head.clone());
            }
            names.insert(head);
        }
    }
    (links, names)
}

#[test]
fn lib_maps_name_every_module_and_link_only_declared_ones() {
    let mut problems = Vec::new();
    for src in SERVICES {
        let lib = read(&root().join(src).join("lib.rs"));
        let modules = declared(&lib);
        let (links, names) = doc_links(&lib);
        for link in links.difference(&modules) {
            problems.push(format!(
                "{src}/lib.rs links [`{link}`], which it does not declare"
            ));
        }
        for module in modules.difference(&names) {
            problems.push(format!(
                "{src}/lib.rs declares `{module}`, which its module map does not name"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
