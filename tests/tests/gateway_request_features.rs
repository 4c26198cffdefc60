//! The request features beyond the conversation, end to end through the real gateway against fakes that validate
//! requests like the real APIs (docs/gateway.md "Request features by provider"): strict tools, strict JSON Schema
//! output, JSON-object output and one tool call per step reach OpenAI Chat and Responses, Anthropic, Gemini and
//! Bedrock in each one's own shape, and where a provider has no such thing the request is refused with
//! INVALID_ARGUMENT naming the field, before anything is sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::vertex::GoogleFakes;
use e2e_tests::*;
use fake_provider::{FakeProvider, Protocol, Reply};
use llm_proto::gateway as pb;
use pb::stream_response::Event as E;
use pb::tool_choice::Mode;
use serde_json::{Value, json};
use tonic::Code;

/// A closed object schema: what every provider's strict mode takes as written.
const CLOSED: &str = r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}"#;

fn strict_tool() -> pb::Tool {
    pb::Tool {
        input_schema_json: CLOSED.into(),
        strict: true,
        ..weather_tool()
    }
}

fn choice(mode: Mode, disable_parallel: bool) -> Option<pb::ToolChoice> {
    Some(pb::ToolChoice {
        mode: mode.into(),
        tool_name: String::new(),
        disable_parallel,
    })
}

fn json_object() -> Option<pb::OutputFormat> {
    Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonObject.into(),
        ..Default::default()
    })
}

fn json_schema() -> Option<pb::OutputFormat> {
    Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema.into(),
        name: "weather".into(),
        schema_json: CLOSED.into(),
        strict: true,
    })
}

/// A request asking for JSON (OpenAI wants the word in the prompt for `json_object`) with a strict tool, one call
/// per step.
fn strict_one_call(model: &str) -> pb::Generation {
    pb::Generation {
        tools: vec![strict_tool()],
        tool_choice: choice(Mode::Auto, true),
        ..generation(model, "Weather in Paris? Answer in JSON.")
    }
}

/// Runs `g` to its end and checks it finished a step with `fake` refusing nothing; returns the body it received.
async fn sent(h: &Harness, fake: &FakeProvider, g: pb::Generation) -> Value {
    let events = h.stream(g).await.expect("stream starts");
    assert!(
        matches!(terminal(&events), E::StepFinish(_)),
        "{:#?} {:#?}",
        render(&events),
        fake.rejections()
    );
    assert_eq!(fake.rejections(), vec![]);
    fake.requests().last().expect("a request").json()
}

/// `g` is refused with INVALID_ARGUMENT naming `field`, and `fake` receives nothing.
async fn refused(h: &Harness, fake: &FakeProvider, g: pb::Generation, field: &str) {
    let err = h.stream(g).await.expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
    assert!(
        err.message().starts_with(field),
        "{field}: {}",
        err.message()
    );
    assert!(fake.requests().is_empty(), "{field}: something was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_gets_strict_json_object_and_parallel_tool_calls_false() {
    let h = Harness::start().await;
    h.openai.validate_requests(Protocol::OpenaiChat);
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));

    let body = sent(
        &h,
        &h.openai,
        pb::Generation {
            output_format: json_object(),
            ..strict_one_call("openai/gpt-4o")
        },
    )
    .await;
    assert_eq!(body["tools"][0]["function"]["strict"], true);
    assert_eq!(
        body["tools"][0]["function"]["parameters"],
        serde_json::from_str::<Value>(CLOSED).unwrap()
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));

    let body = sent(
        &h,
        &h.openai,
        pb::Generation {
            output_format: json_schema(),
            ..generation("openai/gpt-4o", "Weather in Paris?")
        },
    )
    .await;
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(body["response_format"]["json_schema"]["name"], "weather");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_responses_gets_the_same_flat() {
    let h = Harness::start().await;
    h.openai.validate_requests(Protocol::OpenaiResponses);
    h.openai.push(Reply::fixture("openai_responses/text.sse"));
    let body = sent(
        &h,
        &h.openai,
        pb::Generation {
            output_format: json_object(),
            reasoning: Some(reasoning(pb::reasoning::Effort::Xhigh)),
            ..strict_one_call("openai/gpt-5-codex")
        },
    )
    .await;
    assert_eq!(body["tools"][0]["strict"], true);
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["text"], json!({"format": {"type": "json_object"}}));
    assert_eq!(body["reasoning"]["effort"], "xhigh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_gets_strict_tools_structured_output_and_one_call_per_step() {
    let h = Harness::start().await;
    h.anthropic.validate_requests(Protocol::Anthropic);
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let body = sent(
        &h,
        &h.anthropic,
        pb::Generation {
            output_format: Some(pb::OutputFormat {
                // Not closed as written: the adapter closes it, as structured outputs require.
                schema_json: r#"{"type":"object","properties":{"summary":{"type":"string"}}}"#
                    .into(),
                ..json_schema().unwrap()
            }),
            ..strict_one_call("anthropic/claude-sonnet-4-5")
        },
    )
    .await;
    assert_eq!(body["tools"][0]["strict"], true);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "additionalProperties": false
        }}})
    );
    let requests = h.anthropic.requests();
    assert_eq!(requests[0].header("anthropic-beta"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_refuses_what_it_cannot_do_before_sending() {
    let h = Harness::start().await;
    h.anthropic.validate_requests(Protocol::Anthropic);
    let claude = "anthropic/claude-sonnet-4-5";
    refused(
        &h,
        &h.anthropic,
        pb::Generation {
            output_format: json_object(),
            ..generation(claude, "Answer in JSON.")
        },
        "generation.output_format.type",
    )
    .await;
    // Claude Sonnet 4 has no structured outputs: neither strict tools nor JSON Schema output.
    refused(
        &h,
        &h.anthropic,
        strict_one_call("anthropic/claude-sonnet-4-0"),
        "generation.tools[0].strict",
    )
    .await;
    refused(
        &h,
        &h.anthropic,
        pb::Generation {
            output_format: json_schema(),
            ..generation("anthropic/claude-sonnet-4-0", "Weather?")
        },
        "generation.output_format.type",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_validates_strict_calls_serves_json_object_and_refuses_one_call_per_step() {
    let h = Harness::start().await;
    h.gemini.validate_requests(Protocol::Gemini);
    refused(
        &h,
        &h.gemini,
        strict_one_call("gemini/gemini-2.5-flash"),
        "generation.tool_choice.disable_parallel",
    )
    .await;

    h.gemini.push(Reply::fixture("gemini/text.sse"));
    h.gemini.push(Reply::fixture("gemini/text.sse"));
    let body = sent(
        &h,
        &h.gemini,
        pb::Generation {
            tool_choice: None,
            ..strict_one_call("gemini/gemini-2.5-flash")
        },
    )
    .await;
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "VALIDATED"}})
    );
    let body = sent(
        &h,
        &h.gemini,
        pb::Generation {
            output_format: json_object(),
            ..generation("gemini/gemini-2.5-flash", "Weather as JSON?")
        },
    )
    .await;
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(body["generationConfig"].get("responseSchema"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_gemini_refuses_a_strict_tool_it_cannot_validate() {
    let g = GoogleFakes::start().await;
    let h = Harness::start_with(&g.provider(
        "vertex",
        "us-east5",
        &g.key_settings("service_account.json"),
    ))
    .await;
    let flash = "vertex/gemini-2.5-flash";
    refused(
        &h,
        &g.vertex,
        pb::Generation {
            tool_choice: None,
            ..strict_one_call(flash)
        },
        "generation.tools[0].strict",
    )
    .await;
    // A required tool is constrained by ANY, which Vertex has.
    g.vertex.push(Reply::fixture("gemini/text.sse"));
    let body = sent(
        &h,
        &g.vertex,
        pb::Generation {
            tool_choice: choice(Mode::Required, false),
            ..strict_one_call(flash)
        },
    )
    .await;
    assert_eq!(body["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_gets_strict_tool_specs_and_refuses_the_rest() {
    let fake = FakeProvider::start().await.unwrap();
    fake.validate_requests(Protocol::Bedrock);
    let extra = format!(
        "[providers.bedrock]\nprotocol = \"bedrock\"\nbase_url = \"{}\"\n",
        fake.base_url()
    );
    let h = Harness::start_with(&extra).await;
    let claude = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    refused(
        &h,
        &fake,
        strict_one_call(claude),
        "generation.tool_choice.disable_parallel",
    )
    .await;
    refused(
        &h,
        &fake,
        pb::Generation {
            output_format: json_object(),
            ..generation(claude, "JSON please")
        },
        "generation.output_format.type",
    )
    .await;
    fake.push(Reply::eventstream_fixture("bedrock/text.es"));
    let body = sent(
        &h,
        &fake,
        pb::Generation {
            tool_choice: None,
            ..strict_one_call(claude)
        },
    )
    .await;
    assert_eq!(body["toolConfig"]["tools"][0]["toolSpec"]["strict"], true);
}
