use super::*;

#[test]
fn bearer_takes_the_scheme_in_any_case_and_skips_spaces() {
    assert_eq!(bearer("Bearer abc"), Some("abc"));
    assert_eq!(bearer("bearer   abc"), Some("abc"));
    assert_eq!(bearer("BEARER abc"), Some("abc"));
}

#[test]
fn bearer_refuses_other_schemes_and_empty_tokens() {
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer"), None);
    assert_eq!(bearer("Bearer    "), None);
    assert_eq!(bearer("Bearerabc"), None);
}

#[test]
fn constant_time_eq_is_equality() {
    assert!(constant_time_eq(b"token", b"token"));
    assert!(!constant_time_eq(b"token", b"tokem"));
    assert!(!constant_time_eq(b"token", b"token2"));
    assert!(constant_time_eq(b"", b""));
}
