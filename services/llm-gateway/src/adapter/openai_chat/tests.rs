use super::*;

#[test]
fn auth_header_is_bearer_and_omitted_without_key() {
    assert_eq!(
        OpenAiChat.auth_headers("sk-test"),
        vec![("authorization", "Bearer sk-test".to_string())]
    );
    assert!(OpenAiChat.auth_headers("").is_empty());
}

#[test]
fn protocol_is_openai_chat() {
    assert_eq!(OpenAiChat.protocol(), Protocol::OpenaiChat);
    assert_eq!(
        Protocol::OpenaiChat.adapter().protocol(),
        Protocol::OpenaiChat
    );
}
