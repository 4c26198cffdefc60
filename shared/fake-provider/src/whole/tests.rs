//! Every recorded whole body next to its stream twin is what the fake builds from the stream: the whole answers are
//! the providers' own, not a shape of the fake's.

use serde_json::{Value, json};

use super::{Asked, answer, asked};
use crate::validate::Protocol;
use crate::{Recorded, Reply};

fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn whole(protocol: Protocol, stream: &str, form: Asked) -> (u16, Value) {
    let a = answer(protocol, &fixture(stream), form).unwrap_or_else(|e| panic!("{stream}: {e}"));
    (a.status, serde_json::from_str(&a.body).unwrap())
}

#[test]
fn each_recorded_whole_body_is_built_from_its_stream_twin() {
    let twins = [
        (Protocol::OpenaiChat, "openai_chat/text"),
        (Protocol::OpenaiChat, "openai_chat/parallel_tools"),
        (Protocol::DeepseekChat, "openai_chat/reasoning"),
        (Protocol::OpenaiResponses, "openai_responses/text"),
        (Protocol::OpenaiResponses, "openai_responses/parallel_tools"),
        (Protocol::OpenaiResponses, "openai_responses/reasoning"),
        (Protocol::OpenaiResponses, "openai_responses/incomplete"),
        (Protocol::Anthropic, "anthropic/text"),
        (Protocol::Anthropic, "anthropic/thinking_tool_use"),
        (Protocol::Anthropic, "anthropic/redacted_thinking"),
        (Protocol::Bedrock, "bedrock/converse_tools"),
        (Protocol::Bedrock, "bedrock/converse_reasoning_tool"),
    ];
    for (protocol, name) in twins {
        let stream = if protocol == Protocol::Bedrock {
            format!("{name}.es")
        } else {
            format!("{name}.sse")
        };
        let (status, built) = whole(protocol, &stream, Asked::Whole);
        let recorded: Value = serde_json::from_slice(&fixture(&format!("{name}.json"))).unwrap();
        assert_eq!(status, 200, "{name}");
        assert_eq!(built, recorded, "{name}");
    }
    // Gemini's stream without alt=sse is the chunks as a JSON array.
    let (status, built) = whole(Protocol::Gemini, "gemini/text.sse", Asked::Array);
    let recorded: Value = serde_json::from_slice(&fixture("gemini/text.json")).unwrap();
    assert_eq!((status, built), (200, recorded));
}

#[test]
fn gemini_generate_content_joins_text_and_keeps_calls_and_signatures_on_their_parts() {
    let (_, text) = whole(Protocol::Gemini, "gemini/text.sse", Asked::Whole);
    assert_eq!(
        text,
        json!({
            "candidates": [{
                "content": {"parts": [{"text": "Hello! The file says \"done\".\nAnything else?"}], "role": "model"},
                "finishReason": "STOP",
                "index": 0
            }],
            "usageMetadata": {
                "promptTokenCount": 9, "candidatesTokenCount": 12, "totalTokenCount": 21,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}]
            },
            "modelVersion": "gemini-2.5-flash",
            "responseId": "kWTPaJL8GovS7M8PmeTTgAk"
        })
    );
    let (_, reasoning) = whole(Protocol::Gemini, "gemini/reasoning.sse", Asked::Whole);
    let parts = &reasoning["candidates"][0]["content"]["parts"];
    assert_eq!(parts.as_array().unwrap().len(), 2, "{parts}");
    assert_eq!(parts[0]["thought"], true);
    assert_eq!(
        parts[0]["text"],
        "**Calculating the product**\n\nThe user asks for 27 × 453. I'll split 453 into 400 + 53.\n\n27 × 400 = 10800 and 27 × 53 = 1431, so the total is 12231."
    );
    assert_eq!(parts[1]["text"], "27 × 453 = **12,231**.");
    assert!(
        parts[1]["thoughtSignature"]
            .as_str()
            .unwrap()
            .starts_with("CsYCAdHtim9k")
    );
    assert_eq!(reasoning["usageMetadata"]["thoughtsTokenCount"], 196);
    let (_, calls) = whole(Protocol::Gemini, "gemini/parallel_tools.sse", Asked::Whole);
    let parts = &calls["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0]["functionCall"]["args"], json!({"city": "Paris"}));
    assert!(parts[0]["thoughtSignature"].is_string());
    assert_eq!(parts[1]["functionCall"]["args"]["city"], "Tokyo");
}

#[test]
fn a_stream_ending_in_an_error_is_that_error_whole() {
    let cases = [
        (
            Protocol::OpenaiChat,
            "openai_chat/error_after_200.sse",
            500,
            "/error/type",
            "server_error",
        ),
        (
            Protocol::OpenaiResponses,
            "openai_responses/error_after_200.sse",
            500,
            "/error/code",
            "server_error",
        ),
        (
            Protocol::Anthropic,
            "anthropic/error_after_200.sse",
            529,
            "/error/type",
            "overloaded_error",
        ),
        (
            Protocol::Gemini,
            "gemini/error_after_200.sse",
            503,
            "/error/status",
            "UNAVAILABLE",
        ),
        (
            Protocol::Bedrock,
            "bedrock/throttle_first.es",
            429,
            "/message",
            "Too many requests, please wait before trying again.",
        ),
    ];
    for (protocol, stream, status, pointer, value) in cases {
        let a = answer(protocol, &fixture(stream), Asked::Whole).unwrap();
        let body: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(
            (a.status, &body.pointer(pointer).unwrap().clone()),
            (status, &json!(value)),
            "{stream}"
        );
    }
    let a = answer(
        Protocol::Bedrock,
        &fixture("bedrock/error_after_output.es"),
        Asked::Whole,
    )
    .unwrap();
    assert_eq!(a.status, 424);
    assert_eq!(
        a.error_type.as_deref(),
        Some("ModelStreamErrorException:http://internal.amazon.com/coral/com.amazon.bedrock/")
    );
}

#[test]
fn a_stream_cut_short_has_no_whole_form() {
    for (protocol, stream) in [
        (Protocol::OpenaiChat, "openai_chat/truncated.sse"),
        (Protocol::OpenaiResponses, "openai_responses/truncated.sse"),
        (Protocol::Anthropic, "anthropic/truncated.sse"),
        (Protocol::Gemini, "gemini/truncated.sse"),
    ] {
        let err = answer(protocol, &fixture(stream), Asked::Whole).unwrap_err();
        assert!(err.contains("the stream ends before"), "{stream}: {err}");
    }
}

fn request(path: &str, body: &str) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: path.into(),
        headers: Vec::new(),
        body: body.to_string().into(),
        received_at: std::time::Instant::now(),
    }
}

#[test]
fn the_form_asked_for_is_read_as_each_api_reads_it() {
    let cases = [
        (
            Protocol::OpenaiChat,
            "/v1/chat/completions",
            r#"{"stream":true}"#,
            Asked::Stream,
        ),
        (
            Protocol::OpenaiChat,
            "/v1/chat/completions",
            r#"{"stream":false}"#,
            Asked::Whole,
        ),
        (
            Protocol::OpenaiChat,
            "/v1/chat/completions",
            "{}",
            Asked::Whole,
        ),
        (
            Protocol::OpenaiResponses,
            "/v1/responses",
            "{}",
            Asked::Whole,
        ),
        (Protocol::Anthropic, "/v1/messages", "{}", Asked::Whole),
        (
            Protocol::Anthropic,
            "/v1/messages",
            r#"{"stream":true}"#,
            Asked::Stream,
        ),
        (
            Protocol::Gemini,
            "/v1beta/models/g:streamGenerateContent?alt=sse",
            "{}",
            Asked::Stream,
        ),
        (
            Protocol::Gemini,
            "/v1beta/models/g:streamGenerateContent",
            "{}",
            Asked::Array,
        ),
        (
            Protocol::Gemini,
            "/v1beta/models/g:generateContent",
            "{}",
            Asked::Whole,
        ),
        (
            Protocol::Bedrock,
            "/model/m/converse-stream",
            "{}",
            Asked::Stream,
        ),
        (Protocol::Bedrock, "/model/m/converse", "{}", Asked::Whole),
    ];
    for (protocol, path, body, form) in cases {
        assert_eq!(asked(protocol, &request(path, body)), form, "{path} {body}");
    }
}

#[test]
fn a_whole_answer_keeps_the_scripts_headers_and_a_scripted_fault_strikes_before_it() {
    let req = request("/v1/chat/completions", r#"{"stream":false}"#);
    let reply = Reply::fixture("openai_chat/text.sse").header("x-request-id", "req_scripted");
    let whole = super::as_asked(Protocol::OpenaiChat, &req, reply).unwrap();
    let (body, headers) = whole.json_parts().unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello! How can I help you today?"
    );
    assert!(headers.contains(&("x-request-id".into(), "req_scripted".into())));
    // A stall mid-stream: the whole answer never comes.
    let stalled = Reply::fixture("openai_chat/text.sse").stall_after(4);
    let plan = super::as_asked(Protocol::OpenaiChat, &req, stalled)
        .unwrap()
        .plan();
    assert!(matches!(plan.steps.as_slice(), [crate::reply::Step::Stall]));
    // A reply scripted as JSON is sent as it is, whatever was asked.
    let streamed = request("/v1/chat/completions", r#"{"stream":true}"#);
    let json = Reply::json(200, r#"{"id":"x"}"#);
    let same = super::as_asked(Protocol::OpenaiChat, &streamed, json).unwrap();
    assert_eq!(same.json_parts().unwrap().0, r#"{"id":"x"}"#);
}
