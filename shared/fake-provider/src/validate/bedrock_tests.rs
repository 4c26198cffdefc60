#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use bytes::Bytes;
use serde_json::json;

use super::*;

fn recorded(headers: &[(&str, &str)], body: &Value) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: "/model/us.amazon.nova-lite-v1%3A0/converse-stream".into(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: Bytes::from(body.to_string()),
        received_at: Instant::now(),
    }
}

fn hello() -> Value {
    json!({"messages": [{"role": "user", "content": [{"text": "Hi"}]}], "inferenceConfig": {"maxTokens": 10}})
}

#[test]
fn a_plain_converse_body_passes_and_broken_ones_are_refused() {
    assert!(check_body(&hello()).is_ok());
    let two_users = json!({"messages": [
        {"role": "user", "content": [{"text": "a"}]},
        {"role": "user", "content": [{"text": "b"}]},
    ]});
    assert!(
        check_body(&two_users)
            .unwrap_err()
            .message
            .contains("alternate")
    );
    let tools_without_config = json!({"messages": [
        {"role": "user", "content": [{"text": "a"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}}]},
    ]});
    assert!(
        check_body(&tools_without_config)
            .unwrap_err()
            .message
            .contains("toolConfig")
    );
    let blank = json!({"messages": [{"role": "user", "content": [{"text": " "}]}]});
    assert!(check_body(&blank).unwrap_err().message.contains("blank"));
    let bad_id = json!({"messages": [
        {"role": "user", "content": [{"text": "a"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "call:1", "name": "f", "input": {}}}]},
    ], "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]}});
    assert!(
        check_body(&bad_id)
            .unwrap_err()
            .message
            .contains("toolUseId")
    );
    let extra = json!({"messages": [{"role": "user", "content": [{"text": "a"}]}], "model": "x"});
    assert!(check_body(&extra).is_err());
}

#[test]
fn unsigned_or_badly_signed_requests_are_refused() {
    let body = hello();
    let e = check(&recorded(&[], &body), &body).unwrap_err();
    assert_eq!(e.code, Some("MissingAuthenticationTokenException"));
    let auth = "AWS4-HMAC-SHA256 Credential=AKIDOTHER/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=00";
    let headers = [
        ("authorization", auth),
        ("host", "h"),
        ("x-amz-date", "20250101T000000Z"),
    ];
    let e = check(&recorded(&headers, &body), &body).unwrap_err();
    assert_eq!(e.code, Some("UnrecognizedClientException"));
    let auth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=00";
    let headers = [
        ("authorization", auth),
        ("host", "h"),
        ("x-amz-date", "20250101T000000Z"),
    ];
    let e = check(&recorded(&headers, &body), &body).unwrap_err();
    assert_eq!(e.code, Some("InvalidSignatureException"));
    assert!(e.message.contains("does not match"));
}

#[test]
fn the_canonical_request_signs_the_path_encoded_twice() {
    let body = hello();
    let req = recorded(&[("host", "h"), ("x-amz-date", "20250101T000000Z")], &body);
    let c = canonical_request(&req, &["host", "x-amz-date"], "p");
    assert!(
        c.starts_with("POST\n/model/us.amazon.nova-lite-v1%253A0/converse-stream\n\nhost:h\n"),
        "{c}"
    );
}

#[test]
fn llama_and_mistral_take_tools_only_outside_the_stream() {
    for model in [
        "us.meta.llama3-3-70b-instruct-v1:0",
        "meta.llama3-1-8b-instruct-v1:0",
        "us.meta.llama4-maverick-17b-instruct-v1:0",
        "mistral.mistral-large-2407-v1:0",
        "arn:aws:bedrock:us-east-1:1:inference-profile/us.meta.llama3-3-70b-instruct-v1:0",
    ] {
        assert!(!streams_tool_use(model), "{model}");
    }
    for model in [
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.amazon.nova-lite-v1:0",
    ] {
        assert!(streams_tool_use(model), "{model}");
    }
}
