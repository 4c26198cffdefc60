#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn bearer_takes_the_scheme_in_any_case_and_skips_spaces() {
    assert_eq!(bearer("Bearer abc"), Some("abc"));
    assert_eq!(bearer("bearer   abc"), Some("abc"));
    assert_eq!(bearer("BEARER abc"), Some("abc"));
    assert_eq!(bearer("bEaReR abc"), Some("abc"));
}

#[test]
fn bearer_refuses_other_schemes_and_empty_tokens() {
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer"), None);
    assert_eq!(bearer("Bearer    "), None);
    assert_eq!(bearer("Bearerabc"), None);
    assert_eq!(bearer("abc"), None);
    assert_eq!(bearer(""), None);
}

#[test]
fn constant_time_eq_is_equality() {
    assert!(constant_time_eq(b"token", b"token"));
    assert!(!constant_time_eq(b"token", b"tokem"));
    assert!(!constant_time_eq(b"token", b"token2"));
    assert!(constant_time_eq(b"", b""));
}

#[test]
fn find_token_finds_the_presented_token_among_all() {
    let tokens = ["alpha", "beta", "gamma"];
    assert_eq!(find_token(tokens, "beta"), Some(1));
    assert_eq!(find_token(tokens, "bet"), None);
    assert_eq!(find_token(Vec::<String>::new(), "beta"), None);
}

#[test]
fn bearer_metadata_reads_the_authorization_entry() {
    let mut metadata = tonic::metadata::MetadataMap::new();
    assert_eq!(bearer_metadata(&metadata), None);
    metadata.insert("authorization", "Basic abc".parse().unwrap());
    assert_eq!(bearer_metadata(&metadata), None);
    metadata.insert("authorization", "Bearer abc".parse().unwrap());
    assert_eq!(bearer_metadata(&metadata), Some("abc"));
}

#[test]
fn a_clients_interceptor_sends_its_token_as_a_bearer() {
    use tonic::service::Interceptor;
    let mut interceptor = BearerInterceptor::new("s3cret-token").unwrap();
    let req = interceptor.call(tonic::Request::new(())).unwrap();
    assert_eq!(bearer_metadata(req.metadata()), Some("s3cret-token"));
    assert!(BearerInterceptor::new("no\nnewlines").is_err());
}
