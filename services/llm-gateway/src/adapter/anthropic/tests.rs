use super::*;

#[test]
fn auth_and_version_headers() {
    assert_eq!(
        Anthropic.auth_headers("sk-ant-x"),
        vec![("x-api-key", "sk-ant-x".to_string())]
    );
    assert_eq!(Anthropic.protocol(), Protocol::Anthropic);
}
