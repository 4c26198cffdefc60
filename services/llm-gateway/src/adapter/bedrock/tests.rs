use super::*;

#[test]
fn model_ids_are_one_encoded_path_segment() {
    assert_eq!(
        stream_path("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert_eq!(
        stream_path("arn:aws:bedrock:us-east-1:1:inference-profile/x"),
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse-stream"
    );
    assert_eq!(Bedrock.framing(), Framing::EventStream);
    assert!(Bedrock.auth_headers("k").is_empty());
}
