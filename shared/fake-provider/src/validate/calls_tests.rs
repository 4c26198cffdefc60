//! The embeddings and token-count rules: what the gateway sends passes, and each way of breaking a rule is refused
//! with the API's status and message; the embeddings reply answers every input in order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::*;

pub(super) const VERTEX_PREDICT: &str = "/v1/projects/acme-llm-test/locations/global/publishers/google/models/text-embedding-005:predict";
pub(super) const VERTEX_COUNT_ANTHROPIC: &str = "/v1/projects/acme-llm-test/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict";
pub(super) const VERTEX_COUNT_GEMINI: &str = "/v1/projects/acme-llm-test/locations/global/publishers/google/models/gemini-2.5-flash:countTokens";

fn recorded(path: &str, headers: &[(&str, &str)], body: &Value) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: path.into(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
            .collect(),
        body: body.to_string().into_bytes().into(),
        received_at: std::time::Instant::now(),
    }
}

/// `body` is refused by `protocol` at `path` with `status` and a message holding `fragment`.
fn refused(protocol: Protocol, path: &str, body: Value, status: u16, fragment: &str) {
    let err = check_body(protocol, path, &body).expect_err(fragment);
    assert_eq!(err.status, status, "{err}");
    assert!(
        err.message.contains(fragment),
        "expected {fragment:?}: {err}"
    );
}

#[test]
fn openai_embeddings_take_their_inputs_and_refuse_anything_else() {
    let path = "/v1/embeddings";
    for input in [
        json!("hello"),
        json!(["a", "b"]),
        json!([1, 2, 3]),
        json!([[1, 2], [3]]),
    ] {
        let body = json!({"model": "text-embedding-3-small", "input": input, "encoding_format": "base64",
            "dimensions": 256, "user": "u"});
        check_body(Protocol::OpenaiEmbeddings, path, &body).unwrap();
    }
    let p = Protocol::OpenaiEmbeddings;
    refused(
        p,
        path,
        json!({"model": "m", "input": "a", "task": 1}),
        400,
        "Unrecognized request argument supplied: task",
    );
    refused(p, path, json!({"input": "a"}), 400, "model");
    refused(
        p,
        path,
        json!({"model": "m", "input": ""}),
        400,
        "'$.input' is invalid",
    );
    refused(
        p,
        path,
        json!({"model": "m", "input": []}),
        400,
        "'$.input' is invalid",
    );
    refused(
        p,
        path,
        json!({"model": "m", "input": ["a", 1]}),
        400,
        "'$.input' is invalid",
    );
    let many: Vec<String> = (0..2049).map(|i| i.to_string()).collect();
    refused(
        p,
        path,
        json!({"model": "m", "input": many}),
        400,
        "Too many inputs",
    );
    refused(
        p,
        path,
        json!({"model": "m", "input": "a", "encoding_format": "int8"}),
        400,
        "encoding_format",
    );
    refused(
        p,
        path,
        json!({"model": "text-embedding-ada-002", "input": "a", "dimensions": 8}),
        400,
        "does not support specifying dimensions",
    );
}

#[test]
fn credentials_are_checked_before_the_body() {
    let body = json!({"model": "m", "input": "a"});
    let r = check(
        Protocol::OpenaiEmbeddings,
        &recorded("/v1/embeddings", &[], &body),
    )
    .unwrap_err();
    assert_eq!(r.status, 401);
    let ok = check(
        Protocol::OpenaiEmbeddings,
        &recorded("/v1/embeddings", &[("authorization", "Bearer sk-x")], &body),
    );
    assert!(ok.is_ok(), "{ok:?}");

    let count =
        json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hi"}]});
    let path = "/v1/messages/count_tokens";
    let r = check(
        Protocol::AnthropicCountTokens,
        &recorded(path, &[("anthropic-version", "2023-06-01")], &count),
    )
    .unwrap_err();
    assert_eq!(r.status, 401);
    assert!(r.body().contains("authentication_error"), "{}", r.body());
    let r = check(
        Protocol::AnthropicCountTokens,
        &recorded(path, &[("x-api-key", "k")], &count),
    )
    .unwrap_err();
    assert_eq!(r.status, 400);
    let headers = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    assert!(
        check(
            Protocol::AnthropicCountTokens,
            &recorded(path, &headers, &count)
        )
        .is_ok()
    );

    let gemini = json!({"requests": [{"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "a"}]}}]});
    let path = "/v1beta/models/gemini-embedding-001:batchEmbedContents";
    let r = check(Protocol::GeminiEmbeddings, &recorded(path, &[], &gemini)).unwrap_err();
    assert_eq!(r.status, 403);
    assert!(r.body().contains("PERMISSION_DENIED"), "{}", r.body());
    assert!(
        check(
            Protocol::GeminiEmbeddings,
            &recorded(path, &[("x-goog-api-key", "k")], &gemini)
        )
        .is_ok()
    );
}

#[test]
fn gemini_and_vertex_embeddings_hold_their_batch_limits() {
    let path = "/v1beta/models/gemini-embedding-001:batchEmbedContents";
    let request = |text: &str| json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": text}]}});
    let p = Protocol::GeminiEmbeddings;
    check_body(p, path, &json!({"requests": [request("a"), request("b")]})).unwrap();
    let many: Vec<Value> = (0..101).map(|_| request("a")).collect();
    refused(
        p,
        path,
        json!({"requests": many}),
        400,
        "at most 100 requests",
    );
    refused(
        p,
        path,
        json!({"requests": [request("")]}),
        400,
        "contents must not be empty",
    );
    let other =
        json!({"model": "models/text-embedding-004", "content": {"parts": [{"text": "a"}]}});
    refused(p, path, json!({"requests": [other]}), 400, "does not match");
    refused(
        p,
        path,
        json!({"requests": [request("a")], "x": 1}),
        400,
        "Unknown name \"x\"",
    );

    let v = Protocol::VertexEmbeddings;
    let ok = json!({"instances": [{"content": "a"}, {"content": "b"}], "parameters": {"autoTruncate": false}});
    check_body(v, VERTEX_PREDICT, &ok).unwrap();
    let gemini_path = VERTEX_PREDICT.replace("text-embedding-005", "gemini-embedding-001");
    refused(v, &gemini_path, ok.clone(), 400, "between 1 and 1");
    refused(
        v,
        VERTEX_PREDICT,
        json!({"instances": [{"text": "a"}]}),
        400,
        "Unknown name \"text\"",
    );
}

#[test]
fn bedrock_embedding_bodies_follow_their_family() {
    let titan = "amazon.titan-embed-text-v2:0";
    embeddings::bedrock(titan, &json!({"inputText": "a", "dimensions": 512})).unwrap();
    for (body, fragment) in [
        (json!({"inputText": "a", "dimensions": 300}), "dimensions"),
        (json!({"inputText": ""}), "minLength"),
        (
            json!({"inputText": "a", "texts": ["a"]}),
            "extraneous key [texts]",
        ),
    ] {
        let e = embeddings::bedrock(titan, &body).unwrap_err();
        assert!(e.message.contains(fragment), "{}", e.message);
    }
    let cohere = "cohere.embed-english-v3";
    embeddings::bedrock(
        cohere,
        &json!({"texts": ["a"], "input_type": "search_document", "truncate": "NONE"}),
    )
    .unwrap();
    let many: Vec<&str> = vec!["a"; 97];
    for body in [
        json!({"texts": many, "input_type": "search_document"}),
        json!({"texts": ["a"]}),
        json!({"texts": ["a"], "input_type": "search_document", "output_dimension": 256}),
    ] {
        assert!(embeddings::bedrock(cohere, &body).is_err(), "{body}");
    }
}

#[test]
fn counts_take_the_generation_input_without_its_settings() {
    let msgs = json!([{"role": "user", "content": "Hi"}]);
    let p = Protocol::AnthropicCountTokens;
    let path = "/v1/messages/count_tokens";
    check_body(
        p,
        path,
        &json!({"model": "claude-sonnet-4-5", "messages": msgs,
        "thinking": {"type": "enabled", "budget_tokens": 2048}}),
    )
    .unwrap();
    refused(
        p,
        path,
        json!({"model": "m", "messages": msgs, "max_tokens": 10}),
        400,
        "max_tokens: Extra inputs are not permitted",
    );
    refused(
        p,
        path,
        json!({"model": "m", "messages": []}),
        400,
        "messages",
    );

    let v = Protocol::VertexAnthropicCountTokens;
    check_body(
        v,
        VERTEX_COUNT_ANTHROPIC,
        &json!({"anthropic_version": "vertex-2023-10-16",
        "model": "claude-haiku-4-5@20251001", "messages": msgs}),
    )
    .unwrap();
    refused(
        v,
        VERTEX_COUNT_ANTHROPIC,
        json!({"model": "m", "messages": msgs}),
        400,
        "anthropic_version",
    );

    let contents = json!([{"role": "user", "parts": [{"text": "Hi"}]}]);
    let g = Protocol::GeminiCountTokens;
    let gpath = "/v1beta/models/gemini-2.5-flash:countTokens";
    check_body(g, gpath, &json!({"contents": contents})).unwrap();
    check_body(g, gpath, &json!({"generateContentRequest": {"model": "models/gemini-2.5-flash", "contents": contents}})).unwrap();
    refused(
        g,
        gpath,
        json!({"generateContentRequest": {"contents": contents}}),
        400,
        "model",
    );
    refused(
        g,
        gpath,
        json!({"contents": contents, "generationConfig": {}}),
        400,
        "Unknown name",
    );

    let vg = Protocol::VertexGeminiCountTokens;
    check_body(
        vg,
        VERTEX_COUNT_GEMINI,
        &json!({"contents": contents, "generationConfig": {}}),
    )
    .unwrap();
    refused(
        vg,
        VERTEX_COUNT_GEMINI,
        json!({"contents": contents, "toolConfig": {}}),
        400,
        "Unknown name \"toolConfig\"",
    );

    let converse = json!({"messages": [{"role": "user", "content": [{"text": "Hi"}]}]});
    counting::bedrock(
        "anthropic.claude-x-v1:0",
        &json!({"input": {"converse": converse}}),
    )
    .unwrap();
    for (model, body) in [
        (
            "us.anthropic.claude-x-v1:0",
            json!({"input": {"converse": converse}}),
        ),
        (
            "anthropic.claude-x-v1:0",
            json!({"input": {"converse": {"messages": [], "inferenceConfig": {}}}}),
        ),
        ("anthropic.claude-x-v1:0", json!({"converse": converse})),
    ] {
        assert!(counting::bedrock(model, &body).is_err(), "{model} {body}");
    }
}

#[test]
fn the_embeddings_reply_answers_every_input_in_order_in_each_shape() {
    let rec = |path: &str, body: Value| recorded(path, &[], &body);
    let answer = |r: Reply, req: &Recorded| -> (Value, Vec<(String, String)>) {
        let (body, headers) = r.resolve(req).json_parts().unwrap();
        (serde_json::from_slice(&body).unwrap(), headers)
    };
    let req = rec(
        "/v1/embeddings",
        json!({"model": "m", "input": ["one two", "three"], "dimensions": 3}),
    );
    let (v, _) = answer(Reply::embeddings(), &req);
    assert_eq!(
        v["data"][1]["embedding"],
        json!(crate::embeddings::vector_of("three", 3))
    );
    assert_eq!(v["usage"]["prompt_tokens"], 3);

    let req = rec(
        "/model/cohere.embed-english-v3/invoke",
        json!({"texts": ["a b", "c"], "input_type": "search_document"}),
    );
    let (v, headers) = answer(Reply::embeddings(), &req);
    assert_eq!(
        v["embeddings"][0],
        json!(crate::embeddings::vector_of("a b", 8))
    );
    assert!(headers.contains(&("x-amzn-bedrock-input-token-count".into(), "3".into())));
}
