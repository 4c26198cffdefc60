//! Each protocol's rules: a body the gateway would send passes, and each
//! way of breaking one rule is refused with the provider's message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::*;

const GEMINI_FLASH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
pub(super) const VERTEX_FLASH: &str = "/v1/projects/acme-llm-test/locations/global/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
pub(super) const VERTEX_SONNET: &str = "/v1/projects/acme-llm-test/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict";
const GEMINI_3: &str = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse";

pub(super) fn path_of(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenaiChat | Protocol::MistralChat | Protocol::DeepseekChat => {
            "/v1/chat/completions"
        }
        Protocol::OpenaiResponses => "/v1/responses",
        Protocol::Anthropic => "/v1/messages",
        Protocol::Gemini => GEMINI_FLASH,
        Protocol::VertexGemini => VERTEX_FLASH,
        Protocol::VertexAnthropic => VERTEX_SONNET,
        Protocol::Bedrock => "/model/us.amazon.nova-lite-v1%3A0/converse-stream",
        Protocol::AzureChat => "/openai/v1/chat/completions",
        Protocol::AzureResponses => "/openai/v1/responses",
        Protocol::OpenaiEmbeddings => "/v1/embeddings",
        Protocol::AzureEmbeddings => "/openai/v1/embeddings",
        Protocol::GeminiEmbeddings => "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        Protocol::VertexEmbeddings => super::calls_tests::VERTEX_PREDICT,
        Protocol::BedrockEmbeddings => "/model/amazon.titan-embed-text-v2%3A0/invoke",
        Protocol::AnthropicCountTokens => "/v1/messages/count_tokens",
        Protocol::VertexAnthropicCountTokens => super::calls_tests::VERTEX_COUNT_ANTHROPIC,
        Protocol::GeminiCountTokens => "/v1beta/models/gemini-2.5-flash:countTokens",
        Protocol::VertexGeminiCountTokens => super::calls_tests::VERTEX_COUNT_GEMINI,
        Protocol::BedrockCountTokens => "/model/anthropic.claude-x-v1%3A0/count-tokens",
    }
}

/// `base` with `change` applied.
pub(super) fn with(base: &Value, change: impl FnOnce(&mut Value)) -> Value {
    let mut body = base.clone();
    change(&mut body);
    body
}

pub(super) fn at<'a>(v: &'a mut Value, pointer: &str) -> &'a mut Value {
    v.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}"))
}

pub(super) fn assert_ok(protocol: Protocol, path: &str, body: &Value) {
    if let Err(r) = check_body(protocol, path, body) {
        panic!("refused: {r}\n{body:#}");
    }
}

/// Checks every case is refused with a message containing its fragment.
pub(super) fn assert_refused(protocol: Protocol, path: &str, cases: Vec<(&str, Value)>) {
    for (fragment, body) in cases {
        match check_body(protocol, path, &body) {
            Ok(()) => panic!("accepted, expected {fragment:?}:\n{body:#}"),
            Err(r) => {
                assert!(
                    r.message.contains(fragment),
                    "expected {fragment:?}, got {r}"
                );
                assert_eq!(r.status, 400);
                assert_eq!(r.protocol, protocol);
            }
        }
    }
}

// --- Anthropic ------------------------------------------------------------

fn anthropic_loop() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{
            "name": "get_weather",
            "description": "Weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "cache_control": {"type": "ephemeral"}
        }],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "EqQBCgIYAh"},
                {"type": "tool_use", "id": "toolu_01A-b_c", "name": "get_weather", "input": {"city": "Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A-b_c", "content": "18°C"}
            ]}
        ],
        "stream": true
    })
}

/// The same loop with thinking off and no thinking block.
pub(super) fn anthropic_plain() -> Value {
    with(&anthropic_loop(), |b| {
        b.as_object_mut().unwrap().remove("thinking");
        at(b, "/messages/1/content")
            .as_array_mut()
            .unwrap()
            .remove(0);
    })
}

#[test]
fn anthropic_accepts_what_the_gateway_sends() {
    let p = path_of(Protocol::Anthropic);
    assert_ok(Protocol::Anthropic, p, &anthropic_loop());
    assert_ok(Protocol::Anthropic, p, &anthropic_plain());
    // Redacted thinking opens the loop as well as thinking does.
    assert_ok(
        Protocol::Anthropic,
        p,
        &with(&anthropic_loop(), |b| {
            *at(b, "/messages/1/content/0") =
                json!({"type": "redacted_thinking", "data": "EmwKAhgB"});
        }),
    );
    // String content, an empty final assistant message (a prefill), a result after text-free results.
    assert_ok(
        Protocol::Anthropic,
        p,
        &json!({"model": "claude-3-5-haiku-latest", "max_tokens": 10, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": []}
        ]}),
    );
    // Thinking from an earlier, finished turn is fine with thinking off.
    assert_ok(
        Protocol::Anthropic,
        p,
        &json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "old", "signature": "s"},
                {"type": "text", "text": "Hello."}
            ]},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Warm."}]}
        ]}),
    );
}

#[test]
fn anthropic_refuses_each_broken_rule() {
    let base = anthropic_loop();
    let plain = anthropic_plain();
    let cases = vec![
        (
            "max_tokens: Field required",
            with(&base, |b| {
                b.as_object_mut().unwrap().remove("max_tokens");
            }),
        ),
        (
            "Requests which include `tool_use` or `tool_result` blocks must define tools.",
            with(&plain, |b| {
                b.as_object_mut().unwrap().remove("tools");
            }),
        ),
        (
            "first message must use the \"user\" role",
            with(&plain, |b| {
                at(b, "/messages")
                    .as_array_mut()
                    .unwrap()
                    .insert(0, json!({"role": "assistant", "content": "Hello"}));
            }),
        ),
        (
            "found multiple \"user\" roles in a row",
            with(&plain, |b| {
                at(b, "/messages")
                    .as_array_mut()
                    .unwrap()
                    .insert(1, json!({"role": "user", "content": "and?"}));
            }),
        ),
        (
            "text content blocks must be non-empty",
            with(&base, |b| *at(b, "/messages/0/content/0/text") = json!("")),
        ),
        (
            "must contain non-whitespace text",
            with(&base, |b| {
                *at(b, "/messages/0/content/0/text") = json!(" \n")
            }),
        ),
        (
            "all messages must have non-empty content",
            with(&base, |b| *at(b, "/messages/0/content") = json!([])),
        ),
        (
            "tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
            with(&base, |b| {
                *at(b, "/messages/1/content/1/id") = json!("call:1/x");
                *at(b, "/messages/2/content/0/tool_use_id") = json!("call:1/x");
            }),
        ),
        (
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A-b_c",
            with(&base, |b| {
                *at(b, "/messages/2/content/0") = json!({"type": "text", "text": "no result"});
            }),
        ),
        (
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_other",
            with(&base, |b| {
                at(b, "/messages/2/content")
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"type": "tool_result", "tool_use_id": "toolu_other"}));
            }),
        ),
        (
            "`tool_result` blocks must come before any other content",
            with(&base, |b| {
                at(b, "/messages/2/content")
                    .as_array_mut()
                    .unwrap()
                    .insert(0, json!({"type": "text", "text": "first"}));
            }),
        ),
        (
            "`tool_use` ids must be unique",
            with(&base, |b| {
                let dup = at(b, "/messages/1/content/1").clone();
                at(b, "/messages/1/content")
                    .as_array_mut()
                    .unwrap()
                    .push(dup);
            }),
        ),
        (
            "thinking.signature: Field required",
            with(&base, |b| {
                *at(b, "/messages/1/content/0/signature") = json!("")
            }),
        ),
        (
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
            with(&base, |b| {
                let marker = json!({"type": "ephemeral"});
                for p in [
                    "/messages/0/content/0",
                    "/messages/1/content/1",
                    "/messages/2/content/0",
                ] {
                    at(b, p)["cache_control"] = marker.clone();
                }
            }),
        ),
        (
            "thinking.cache_control: Extra inputs are not permitted",
            with(&base, |b| {
                at(b, "/messages/1/content/0")["cache_control"] = json!({"type": "ephemeral"});
            }),
        ),
        (
            "tools.0.custom.name: String should match pattern",
            with(&base, |b| *at(b, "/tools/0/name") = json!("get weather")),
        ),
        (
            "tools.0.custom.input_schema.type: Input should be 'object'",
            with(&base, |b| {
                *at(b, "/tools/0/input_schema") = json!({"type": "string"})
            }),
        ),
        (
            "`temperature` may only be set to 1 when thinking is enabled",
            with(&base, |b| b["temperature"] = json!(0.5)),
        ),
        (
            "`top_k` is not supported when thinking is enabled",
            with(&base, |b| b["top_k"] = json!(40)),
        ),
        (
            "Thinking may not be enabled when tool_choice forces tool use.",
            with(&base, |b| b["tool_choice"] = json!({"type": "any"})),
        ),
        (
            "greater than or equal to 1024",
            with(&base, |b| *at(b, "/thinking/budget_tokens") = json!(512)),
        ),
        (
            "`max_tokens` must be greater than `thinking.budget_tokens`",
            with(&base, |b| b["max_tokens"] = json!(2048)),
        ),
        (
            "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
            with(&base, |b| {
                at(b, "/messages/1/content")
                    .as_array_mut()
                    .unwrap()
                    .remove(0);
            }),
        ),
        (
            "thinking blocks cannot be sent in the current tool loop when `thinking` is disabled",
            with(&base, |b| {
                b.as_object_mut().unwrap().remove("thinking");
            }),
        ),
        (
            "`temperature` and `top_p` cannot both be specified for this model",
            with(&plain, |b| {
                b["temperature"] = json!(0.5);
                b["top_p"] = json!(0.9);
            }),
        ),
        (
            "temperature: Input should be less than or equal to 1",
            with(&plain, |b| b["temperature"] = json!(1.5)),
        ),
        (
            "final assistant content cannot end with trailing whitespace",
            with(&plain, |b| {
                at(b, "/messages").as_array_mut().unwrap().push(
                    json!({"role": "assistant", "content": [{"type": "text", "text": "Sure "}]}),
                );
            }),
        ),
        (
            "`tool_use` blocks are not allowed in `user` messages",
            with(&plain, |b| {
                *at(b, "/messages/0/content/0") =
                    json!({"type": "tool_use", "id": "t", "name": "n", "input": {}});
            }),
        ),
    ];
    assert_refused(Protocol::Anthropic, path_of(Protocol::Anthropic), cases);
}

// --- OpenAI Chat and compatible servers -----------------------------------

pub(super) fn chat_loop(ids: [&str; 2]) -> Value {
    json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": ids[0], "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": ids[1], "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": ids[1], "content": "20°C"},
            {"role": "tool", "tool_call_id": ids[0], "content": "18°C"},
            {"role": "assistant", "content": "Warm."}
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
        }}],
        "tool_choice": "auto",
        "stream": true,
        "stream_options": {"include_usage": true}
    })
}

#[test]
fn openai_chat_accepts_what_the_gateway_sends() {
    let p = path_of(Protocol::OpenaiChat);
    assert_ok(Protocol::OpenaiChat, p, &chat_loop(["call_1", "call_2"]));
    // Exactly 40 characters is still fine; a strict tool with a strict schema too.
    let forty = "c".repeat(40);
    assert_ok(Protocol::OpenaiChat, p, &chat_loop([&forty, "call_2"]));
    assert_ok(
        Protocol::OpenaiChat,
        p,
        &with(&chat_loop(["a", "b"]), |b| {
            *at(b, "/tools/0/function") = json!({
                "name": "get_weather",
                "strict": true,
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": ["object", "null"],
                        "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}},
                    "required": ["city", "days"],
                    "additionalProperties": false
                }
            });
        }),
    );
    // A reasoning model with what it takes.
    assert_ok(
        Protocol::OpenaiChat,
        p,
        &json!({"model": "o3", "messages": [{"role": "developer", "content": "x"}, {"role": "user", "content": "hi"}],
                "max_completion_tokens": 100, "reasoning_effort": "high"}),
    );
}

#[test]
fn openai_chat_refuses_each_broken_rule() {
    let base = chat_loop(["call_1", "call_2"]);
    let long = "fc_".to_string() + &"a".repeat(50);
    let cases = vec![
        (
            "string too long. Expected a string with maximum length 40, but got a string with length 53 instead.",
            chat_loop([&long, "call_2"]),
        ),
        (
            "The following tool_call_ids did not have response messages: call_2",
            with(&base, |b| {
                at(b, "/messages").as_array_mut().unwrap().remove(3);
            }),
        ),
        (
            "The following tool_call_ids did not have response messages: call_1, call_2",
            with(&base, |b| {
                let m = at(b, "/messages").as_array_mut().unwrap();
                m.truncate(3);
            }),
        ),
        (
            "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
            with(&base, |b| {
                *at(b, "/messages/4/tool_call_id") = json!("call_9")
            }),
        ),
        (
            "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
            with(&base, |b| {
                at(b, "/messages")
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"role": "tool", "tool_call_id": "call_1", "content": "late"}));
            }),
        ),
        (
            "Invalid value for 'content': expected a string, got null.",
            with(&base, |b| *at(b, "/messages/5/content") = Value::Null),
        ),
        (
            "Invalid value for 'content': expected a string, got null.",
            with(&base, |b| *at(b, "/messages/1/content") = Value::Null),
        ),
        (
            "stream_options.include_usage=true",
            with(&base, |b| {
                b.as_object_mut().unwrap().remove("stream_options");
            }),
        ),
        (
            "'tool_choice' is only allowed when 'tools' are specified",
            with(&base, |b| {
                b.as_object_mut().unwrap().remove("tools");
            }),
        ),
        (
            "Invalid 'tools[0].function.name': string does not match pattern",
            with(&base, |b| {
                *at(b, "/tools/0/function/name") = json!("get weather")
            }),
        ),
        (
            "Invalid schema for function 'get_weather': In context=(), 'additionalProperties' is required to be supplied and to be false.",
            with(&base, |b| {
                at(b, "/tools/0/function")["strict"] = json!(true)
            }),
        ),
        (
            "In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'city'.",
            with(&base, |b| {
                at(b, "/tools/0/function")["strict"] = json!(true);
                at(b, "/tools/0/function/parameters")["additionalProperties"] = json!(false);
            }),
        ),
        (
            "In context=('properties', 'where'), 'additionalProperties' is required",
            with(&base, |b| {
                at(b, "/tools/0/function")["strict"] = json!(true);
                *at(b, "/tools/0/function/parameters") = json!({
                    "type": "object",
                    "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
                    "required": ["where"],
                    "additionalProperties": false
                });
            }),
        ),
        (
            "Invalid schema for response_format 'person'",
            with(&base, |b| {
                b["response_format"] = json!({"type": "json_schema", "json_schema": {
                    "name": "person", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "string"}}}
                }});
            }),
        ),
        (
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            with(&base, |b| {
                b["model"] = json!("o3");
                b["max_tokens"] = json!(100);
            }),
        ),
        (
            "Unsupported parameter: 'temperature' is not supported with this model.",
            with(&base, |b| {
                b["model"] = json!("gpt-5-mini");
                b["temperature"] = json!(0.2);
            }),
        ),
        (
            "Additional properties are not allowed ('reasoning_content' was unexpected) - 'messages.5'",
            with(&base, |b| {
                at(b, "/messages/5")["reasoning_content"] = json!("hmm")
            }),
        ),
        (
            "Invalid value: 'bot'.",
            with(&base, |b| *at(b, "/messages/1/role") = json!("bot")),
        ),
    ];
    assert_refused(Protocol::OpenaiChat, path_of(Protocol::OpenaiChat), cases);
}

#[test]
fn openai_chat_rejections_carry_param_and_code() {
    let long = "x".repeat(41);
    let r = check_body(
        Protocol::OpenaiChat,
        "/v1/chat/completions",
        &chat_loop([&long, "b"]),
    )
    .unwrap_err();
    assert_eq!(r.param.as_deref(), Some("messages[2].tool_calls[0].id"));
    assert_eq!(r.code.as_deref(), Some("string_above_max_length"));
    let body: Value = serde_json::from_str(&r.body()).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["code"], "string_above_max_length");
    assert_eq!(body["error"]["param"], "messages[2].tool_calls[0].id");
    assert!(r.body().starts_with("{\n  \"error\""), "pretty-printed");
}

#[test]
fn mistral_wants_nine_character_ids_and_no_empty_assistant_turn() {
    let p = path_of(Protocol::MistralChat);
    let good = chat_loop(["Ab3dE6gH9", "x1y2z3w4v"]);
    assert_ok(Protocol::MistralChat, p, &good);
    // Extra assistant keys are not Mistral's business.
    assert_ok(
        Protocol::MistralChat,
        p,
        &with(&good, |b| at(b, "/messages/5")["prefix"] = json!(false)),
    );
    assert_refused(
        Protocol::MistralChat,
        p,
        vec![
            (
                "Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of 9.",
                chat_loop(["call_1", "x1y2z3w4v"]),
            ),
            (
                "Assistant message must have either content or tool_calls, but not none.",
                with(&good, |b| *at(b, "/messages/5/content") = json!("")),
            ),
            (
                "Not the same number of function calls and responses",
                with(&good, |b| {
                    at(b, "/messages").as_array_mut().unwrap().remove(4);
                }),
            ),
        ],
    );
    let r = check_body(Protocol::MistralChat, p, &chat_loop(["call_1", "b"])).unwrap_err();
    let body: Value = serde_json::from_str(&r.body()).unwrap();
    assert_eq!(body["object"], "error");
    assert_eq!(body["type"], "invalid_request_message_error");
}

#[test]
fn deepseek_wants_reasoning_content_on_every_assistant_turn() {
    let p = path_of(Protocol::DeepseekChat);
    let good = with(&chat_loop(["call_1", "call_2"]), |b| {
        at(b, "/messages/2")["reasoning_content"] = json!("Look it up.");
        at(b, "/messages/5")["reasoning_content"] = json!("");
    });
    assert_ok(Protocol::DeepseekChat, p, &good);
    assert_refused(
        Protocol::DeepseekChat,
        p,
        vec![(
            "Missing `reasoning_content` field in the assistant message at message index 5",
            with(&good, |b| {
                at(b, "/messages/5")
                    .as_object_mut()
                    .unwrap()
                    .remove("reasoning_content");
            }),
        )],
    );
}

// --- OpenAI Responses -----------------------------------------------------

pub(super) fn responses_loop() -> Value {
    json!({
        "model": "gpt-5-codex",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18°C"}
        ],
        "tools": [{"type": "function", "name": "get_weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": false}],
        "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "stream": true
    })
}

#[test]
fn openai_responses_accepts_what_the_gateway_sends() {
    let p = path_of(Protocol::OpenaiResponses);
    assert_ok(Protocol::OpenaiResponses, p, &responses_loop());
    // A stored conversation may refer to reasoning by id alone.
    assert_ok(
        Protocol::OpenaiResponses,
        p,
        &with(&responses_loop(), |b| {
            b["store"] = json!(true);
            at(b, "/input/1")
                .as_object_mut()
                .unwrap()
                .remove("encrypted_content");
        }),
    );
    assert_ok(
        Protocol::OpenaiResponses,
        p,
        &json!({"model": "gpt-4.1", "input": "hi", "temperature": 0.3}),
    );
}

#[test]
fn openai_responses_refuses_each_broken_rule() {
    let base = responses_loop();
    let cases = vec![
        (
            "No tool call found for function call output with call_id call_9.",
            with(&base, |b| *at(b, "/input/3/call_id") = json!("call_9")),
        ),
        (
            "is a function_call item id (fc_…), not its call_id",
            with(&base, |b| {
                *at(b, "/input/2/call_id") = json!("fc_68af");
                *at(b, "/input/3/call_id") = json!("fc_68af");
            }),
        ),
        (
            "No tool output found for function call call_1.",
            with(&base, |b| {
                at(b, "/input").as_array_mut().unwrap().pop();
            }),
        ),
        (
            "Items are not persisted when `store` is set to false",
            with(&base, |b| {
                at(b, "/input/1")
                    .as_object_mut()
                    .unwrap()
                    .remove("encrypted_content");
            }),
        ),
        (
            "Invalid schema for function 'get_weather': In context=(), 'additionalProperties' is required",
            with(&base, |b| {
                at(b, "/tools/0").as_object_mut().unwrap().remove("strict");
            }),
        ),
        (
            "Unsupported parameter: 'temperature' is not supported with this model.",
            with(&base, |b| b["temperature"] = json!(0.2)),
        ),
        (
            "empty content is not allowed",
            with(&base, |b| *at(b, "/input/0/content") = json!([])),
        ),
    ];
    assert_refused(
        Protocol::OpenaiResponses,
        path_of(Protocol::OpenaiResponses),
        cases,
    );
}

// --- Gemini ---------------------------------------------------------------

pub(super) fn gemini_loop() -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "CtIDAVSo"},
                {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18°C"}}},
                {"functionResponse": {"name": "get_weather", "response": {"error": "no data"}}}
            ]},
            {"role": "model", "parts": [{"text": "Warm.", "thought": true, "thoughtSignature": "Cs"}]}
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{
            "name": "get_weather",
            "description": "Weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "nullable": true},
                    "unit": {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "integer"}]},
                    "days": {"type": "array", "items": {"type": "integer", "format": "int32"}}
                },
                "required": ["city"]
            }
        }]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": true}}
    })
}

#[test]
fn gemini_accepts_what_the_gateway_sends() {
    assert_ok(Protocol::Gemini, GEMINI_FLASH, &gemini_loop());
    assert_ok(Protocol::Gemini, GEMINI_3, &gemini_loop());
    // JSON output is fine without tools before Gemini 3, and with them on Gemini 3.
    let json_output = with(&gemini_loop(), |b| {
        b["generationConfig"]["responseMimeType"] = json!("application/json");
        b["generationConfig"]["responseSchema"] =
            json!({"type": "object", "properties": {"a": {"type": "string"}}});
    });
    assert_ok(Protocol::Gemini, GEMINI_3, &json_output);
    assert_ok(
        Protocol::Gemini,
        GEMINI_FLASH,
        &with(&json_output, |b| {
            b.as_object_mut().unwrap().remove("tools");
        }),
    );
}

#[test]
fn gemini_refuses_each_broken_rule() {
    let base = gemini_loop();
    let params = "/tools/0/functionDeclarations/0/parameters";
    let cases = vec![
        (
            "Please use a valid role: user, model.",
            with(&base, |b| *at(b, "/contents/3/role") = json!("assistant")),
        ),
        (
            "* GenerateContentRequest.contents[3].parts: contents.parts must not be empty.",
            with(&base, |b| *at(b, "/contents/3/parts") = json!([])),
        ),
        (
            "contents[0].parts[0].data: required oneof field 'data' must have one initialized field",
            with(&base, |b| *at(b, "/contents/0/parts/0") = json!({})),
        ),
        (
            "contents[0].parts[0].data: required oneof field 'data'",
            with(&base, |b| {
                *at(b, "/contents/0/parts/0") = json!({"thoughtSignature": "only metadata"});
            }),
        ),
        (
            "oneof field 'data' is already set. Cannot set 'functionCall'",
            with(&base, |b| {
                at(b, "/contents/0/parts/0")["functionCall"] = json!({"name": "x", "args": {}});
            }),
        ),
        (
            "Unknown name \"id\" at 'contents[0].parts[0]': Cannot find field.",
            with(&base, |b| {
                at(b, "/contents/0/parts/0")["id"] = json!("call_1")
            }),
        ),
        (
            "Invalid value at 'contents[2].parts[0].function_response.response' (type.googleapis.com/google.protobuf.Struct), \"18°C\"",
            with(&base, |b| {
                *at(b, "/contents/2/parts/0/functionResponse/response") = json!("18°C");
            }),
        ),
        (
            "the number of function response parts is equal to the number of function call parts",
            with(&base, |b| {
                at(b, "/contents/2/parts").as_array_mut().unwrap().pop();
            }),
        ),
        (
            "function call turn comes immediately after a user turn or after a function response turn",
            with(&base, |b| {
                at(b, "/contents").as_array_mut().unwrap().remove(0);
            }),
        ),
        (
            "function response turn comes immediately after a function call turn",
            with(&base, |b| {
                at(b, "/contents").as_array_mut().unwrap().remove(1);
            }),
        ),
        (
            "Please ensure that multiturn requests alternate between user and model.",
            with(&base, |b| {
                at(b, "/contents")
                    .as_array_mut()
                    .unwrap()
                    .insert(0, json!({"role": "model", "parts": [{"text": "Hello!"}]}));
            }),
        ),
        (
            "function_declarations[0].name: Invalid function name. Must start with a letter or an underscore.",
            with(&base, |b| {
                *at(b, "/tools/0/functionDeclarations/0/name") = json!("1weather");
            }),
        ),
        (
            "Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters': Cannot find field.",
            with(&base, |b| {
                at(b, params)["additionalProperties"] = json!(false)
            }),
        ),
        (
            "Unknown name \"$schema\" at 'tools[0].function_declarations[0].parameters'",
            with(&base, |b| {
                at(b, params)["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
            }),
        ),
        (
            "Unknown name \"const\" at 'tools[0].function_declarations[0].parameters.properties[city].value'",
            with(&base, |b| {
                at(b, params)["properties"]["city"]["const"] = json!("Paris")
            }),
        ),
        (
            "Unknown name \"$ref\" at 'tools[0].function_declarations[0].parameters.properties[days].value.items'",
            with(&base, |b| {
                at(b, params)["properties"]["days"]["items"] = json!({"$ref": "#/$defs/day"});
            }),
        ),
        (
            "Unknown name \"type\" at 'tools[0].function_declarations[0].parameters.properties[city].value': Proto field is not repeating, cannot start list.",
            with(&base, |b| {
                at(b, params)["properties"]["city"]["type"] = json!(["string", "null"]);
            }),
        ),
        (
            "parameters.properties[meta].value.properties: should be non-empty for OBJECT type",
            with(&base, |b| {
                at(b, params)["properties"]["meta"] = json!({"type": "object", "properties": {}});
            }),
        ),
        (
            "Function calling with a response mime type: 'application/json' is unsupported",
            with(&base, |b| {
                b["generationConfig"]["responseMimeType"] = json!("application/json");
            }),
        ),
    ];
    assert_refused(Protocol::Gemini, GEMINI_FLASH, cases);
    assert_refused(
        Protocol::Gemini,
        GEMINI_3,
        vec![(
            "Function call is missing a thought_signature in functionCall parts.",
            with(&base, |b| {
                at(b, "/contents/1/parts/0")
                    .as_object_mut()
                    .unwrap()
                    .remove("thoughtSignature");
            }),
        )],
    );
    let r = check_body(
        Protocol::Gemini,
        GEMINI_FLASH,
        &with(&base, |b| *at(b, "/contents/3/parts") = json!([])),
    )
    .unwrap_err();
    assert_eq!(
        r.body(),
        "{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"* GenerateContentRequest.contents[3].parts: contents.parts must not be empty.\\n\",\n    \"status\": \"INVALID_ARGUMENT\"\n  }\n}"
    );
}

#[test]
fn anthropic_rejection_body_is_the_real_shape() {
    let r = check_body(
        Protocol::Anthropic,
        "/v1/messages",
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .unwrap_err();
    let body: Value = serde_json::from_str(&r.body()).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["message"], "max_tokens: Field required");
    assert!(body["request_id"].is_string());
}

// --- Wiring into the server -----------------------------------------------

/// The credential and version headers every API wants, so a test of body rules is not refused for want of them.
pub(crate) fn api_headers() -> Vec<(String, String)> {
    [
        ("authorization", "Bearer sk-test"),
        ("x-api-key", "sk-ant-test"),
        ("anthropic-version", "2023-06-01"),
        ("x-goog-api-key", "AIza-test"),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

fn recorded(path: &str, body: &str) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: path.into(),
        headers: api_headers(),
        body: body.as_bytes().to_vec().into(),
        received_at: std::time::Instant::now(),
    }
}

#[test]
fn check_routes_by_path_and_refuses_bad_json() {
    let r = check(Protocol::Anthropic, &recorded("/v1/chat/completions", "{}")).unwrap_err();
    assert_eq!(r.status, 404);
    let r = check(Protocol::Anthropic, &recorded("/v1/messages", "{not json")).unwrap_err();
    assert_eq!(r.status, 400);
    assert!(r.message.contains("could not parse the JSON body"), "{r}");
    assert!(Protocol::Gemini.serves(GEMINI_3));
    assert_eq!(model_in_path(GEMINI_3), "gemini-3-pro-preview");
}

async fn post(fp: &FakeProvider, path: &str, body: &Value) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", fp.base_url()))
        .header("content-type", "application/json");
    for (name, value) in api_headers() {
        request = request.header(name, value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn validating_fake_answers_the_real_400_and_keeps_the_scripted_reply() {
    let fp = FakeProvider::start().await.unwrap();
    fp.validate_requests(Protocol::OpenaiChat);
    fp.validate_requests(Protocol::OpenaiResponses);
    fp.push(Reply::json(200, r#"{"ok":1}"#));
    fp.push(Reply::json(200, r#"{"ok":2}"#));

    let long = "y".repeat(41);
    let (status, body) = post(&fp, "/v1/chat/completions", &chat_loop([&long, "b"])).await;
    assert_eq!(status, 400);
    assert!(body.contains("string_above_max_length"), "{body}");
    // The refused request took no scripted reply: the next valid ones get them in order.
    let (status, body) = post(&fp, "/v1/chat/completions", &chat_loop(["a", "b"])).await;
    assert_eq!((status, body.as_str()), (200, r#"{"ok":1}"#));
    let (status, body) = post(&fp, "/v1/responses", &responses_loop()).await;
    assert_eq!((status, body.as_str()), (200, r#"{"ok":2}"#));
    // A path neither protocol serves.
    let (status, _) = post(&fp, "/v1/messages", &anthropic_loop()).await;
    assert_eq!(status, 404);

    let rejections = fp.rejections();
    assert_eq!(rejections.len(), 2, "{rejections:?}");
    assert_eq!(
        rejections[0].code.as_deref(),
        Some("string_above_max_length")
    );
    assert_eq!(
        fp.requests().len(),
        4,
        "refused requests are still recorded"
    );
}

#[tokio::test]
async fn a_validating_reply_checks_only_the_request_it_answers() {
    let fp = FakeProvider::start().await.unwrap();
    fp.skip_validation("the test is of `Reply::validate` alone");
    fp.push(Reply::json(200, "{}").validate(Protocol::Anthropic));
    fp.push(Reply::json(200, "{}").validate(Protocol::Anthropic));
    fp.push(Reply::json(200, "{}"));
    let (status, body) = post(&fp, "/v1/messages", &json!({"messages": []})).await;
    assert_eq!(status, 400);
    assert!(body.contains("max_tokens: Field required"), "{body}");
    let (status, _) = post(&fp, "/v1/messages", &anthropic_loop()).await;
    assert_eq!(status, 200);
    // Not validated: anything goes.
    let (status, _) = post(&fp, "/v1/messages", &json!({})).await;
    assert_eq!(status, 200);
    // `Reply::validate` does not count as a fake-wide rejection.
    assert!(fp.rejections().is_empty());
}
