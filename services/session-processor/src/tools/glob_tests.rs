use super::*;

fn path(pattern: &str) -> Glob {
    Glob::new(pattern, GlobKind::Path).unwrap()
}

#[test]
fn star_stays_in_one_component_for_paths() {
    let g = path("*.rs");
    assert!(g.is_match("main.rs"));
    assert!(!g.is_match("src/main.rs"));
    assert!(path("src/*.rs").is_match("src/lib.rs"));
}

#[test]
fn double_star_spans_directories() {
    let g = path("src/**");
    assert!(g.is_match("src"));
    assert!(g.is_match("src/a/b.rs"));
    assert!(!g.is_match("srcx"));
    let g = path("**/*.rs");
    assert!(g.is_match("main.rs"));
    assert!(g.is_match("a/b/main.rs"));
    assert!(path("a/**/z").is_match("a/z"));
    assert!(path("a/**/z").is_match("a/b/c/z"));
    assert!(path("**").is_match("anything/at/all"));
}

#[test]
fn classes_braces_and_escapes() {
    assert!(path("[a-c]x").is_match("bx"));
    assert!(!path("[!a-c]x").is_match("bx"));
    assert!(path("[]]").is_match("]"));
    assert!(path("*.{rs,toml}").is_match("Cargo.toml"));
    assert!(!path("*.{rs,toml}").is_match("a.md"));
    assert!(path(r"a\*").is_match("a*"));
    assert!(!path(r"a\*").is_match("ab"));
    assert!(path("a.b").is_match("a.b"));
    assert!(!path("a.b").is_match("axb"));
    assert!(path("[").is_match("["));
    assert!(path("f?o").is_match("foo"));
}

#[test]
fn text_star_matches_slashes() {
    let g = Glob::new("git *", GlobKind::Text).unwrap();
    assert!(g.is_match("git log src/main.rs"));
    assert!(!g.is_match("gitk"));
}

#[test]
fn unclosed_brace_is_an_error() {
    assert!(
        Glob::new("{a,b", GlobKind::Path)
            .unwrap_err()
            .contains("unclosed")
    );
}
