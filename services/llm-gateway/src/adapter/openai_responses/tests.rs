use super::*;

#[test]
fn auth_header_is_bearer_and_omitted_without_key() {
    assert_eq!(
        OpenAiResponses.auth_headers("sk-test"),
        vec![("authorization", "Bearer sk-test".to_string())]
    );
    assert!(OpenAiResponses.auth_headers("").is_empty());
}

#[test]
fn protocol_is_openai_responses() {
    assert_eq!(OpenAiResponses.protocol(), Protocol::OpenaiResponses);
    assert_eq!(
        Protocol::OpenaiResponses.adapter().protocol(),
        Protocol::OpenaiResponses
    );
}

#[test]
fn reasoning_metadata_json_shape() {
    let full = ReasoningMetadata {
        item_id: "rs_1".into(),
        encrypted_content: Some("gAAA".into()),
    };
    let text = serde_json::to_string(&full).unwrap_or_default();
    assert_eq!(text, r#"{"item_id":"rs_1","encrypted_content":"gAAA"}"#);
    let bare = ReasoningMetadata {
        item_id: "rs_2".into(),
        encrypted_content: None,
    };
    let text = serde_json::to_string(&bare).unwrap_or_default();
    assert_eq!(text, r#"{"item_id":"rs_2"}"#);
    assert_eq!(
        serde_json::from_str::<ReasoningMetadata>(&text).ok(),
        Some(bare)
    );
}
