//! Vertex AI's rules: the path shapes, `alt=sse`, and the Anthropic body's `anthropic_version` without `model`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::tests::{VERTEX_FLASH, VERTEX_SONNET};
use super::*;

fn gemini_body() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "Say hello"}]}]})
}

fn anthropic_body() -> Value {
    json!({
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 1024,
        "stream": true,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}],
    })
}

#[test]
fn vertex_paths_are_told_apart_from_the_gemini_api_and_each_other() {
    assert!(Protocol::VertexGemini.serves(VERTEX_FLASH));
    assert!(!Protocol::Gemini.serves(VERTEX_FLASH));
    assert!(!Protocol::VertexAnthropic.serves(VERTEX_FLASH));
    assert!(Protocol::VertexAnthropic.serves(VERTEX_SONNET));
    assert!(!Protocol::VertexGemini.serves(VERTEX_SONNET));
    for bad in [
        "/v1/projects/p/locations/global/publishers/google/models/:streamGenerateContent",
        "/v1/projects/P!/locations/global/publishers/google/models/m:streamGenerateContent",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "/v1/projects/p/locations/global/publishers/google/models/m:countTokens",
    ] {
        assert!(!Protocol::VertexGemini.serves(bad), "{bad}");
    }
    // The non-streaming methods too (answered whole); Anthropic's count is its own protocol's.
    let whole = "/v1/projects/p/locations/global/publishers/google/models/m:generateContent";
    assert!(Protocol::VertexGemini.serves(whole));
    let raw = "/v1/projects/p/locations/global/publishers/anthropic/models/m:rawPredict";
    assert!(Protocol::VertexAnthropic.serves(raw));
    let count =
        "/v1/projects/p/locations/global/publishers/anthropic/models/count-tokens:rawPredict";
    assert!(!Protocol::VertexAnthropic.serves(count));
    assert!(check_body(Protocol::VertexGemini, whole, &gemini_body()).is_ok());
}

#[test]
fn gemini_on_vertex_needs_sse_and_gemini_rules() {
    assert!(check_body(Protocol::VertexGemini, VERTEX_FLASH, &gemini_body()).is_ok());
    let no_sse = VERTEX_FLASH.trim_end_matches("?alt=sse");
    let r = check_body(Protocol::VertexGemini, no_sse, &gemini_body()).unwrap_err();
    assert!(r.message.contains("alt=sse"), "{r}");
    let r = check_body(
        Protocol::VertexGemini,
        VERTEX_FLASH,
        &json!({"contents": []}),
    )
    .unwrap_err();
    assert!(r.message.contains("contents"), "{r}");
    assert!(r.body().contains("INVALID_ARGUMENT"));
}

#[test]
fn anthropic_on_vertex_needs_the_version_in_the_body_and_no_model() {
    assert!(check_body(Protocol::VertexAnthropic, VERTEX_SONNET, &anthropic_body()).is_ok());
    let mut with_model = anthropic_body();
    with_model["model"] = "claude-sonnet-4-5".into();
    let mut wrong_version = anthropic_body();
    wrong_version["anthropic_version"] = "2023-06-01".into();
    let mut no_version = anthropic_body();
    no_version
        .as_object_mut()
        .unwrap()
        .remove("anthropic_version");
    let mut no_max = anthropic_body();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    for (body, want) in [
        (with_model, "model: Extra inputs"),
        (wrong_version, "Input should be 'vertex-2023-10-16'"),
        (no_version, "anthropic_version: Field required"),
        (no_max, "max_tokens"),
    ] {
        let r = check_body(Protocol::VertexAnthropic, VERTEX_SONNET, &body).unwrap_err();
        assert!(r.message.contains(want), "{r} / {want}");
        assert!(r.body().contains("invalid_request_error"));
    }
}
