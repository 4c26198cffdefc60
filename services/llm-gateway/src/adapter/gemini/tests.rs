use super::*;

#[test]
fn auth_header_is_x_goog_api_key_and_omitted_without_key() {
    assert_eq!(
        Gemini.auth_headers("AIza-test"),
        vec![("x-goog-api-key", "AIza-test".to_string())]
    );
    assert!(Gemini.auth_headers("").is_empty());
    assert_eq!(Gemini.protocol(), Protocol::Gemini);
    assert_eq!(Protocol::Gemini.adapter().protocol(), Protocol::Gemini);
}

#[test]
fn replay_metadata_round_trips_and_omits_unset_fields() {
    let m = ReplayMetadata {
        thought_signature: Some("c2ln".into()),
        function_call_id: None,
    };
    assert_eq!(
        m.to_json().as_deref(),
        Some(r#"{"thought_signature":"c2ln"}"#)
    );
    assert_eq!(
        ReplayMetadata::from_json(r#"{"thought_signature":"c2ln"}"#),
        m
    );
    assert_eq!(ReplayMetadata::default().to_json(), None);
    assert_eq!(
        ReplayMetadata::from_json(r#"{"signature":"anthropic"}"#),
        ReplayMetadata::default()
    );
    assert_eq!(
        ReplayMetadata::from_json("not json"),
        ReplayMetadata::default()
    );
}
