use serde_json::json;

use super::*;
use crate::adapter::anthropic::Anthropic;
use crate::adapter::testing::testkit::{
    self, assistant, call, file, metadata, misplaced_parts, result, text, tool, user,
};
use crate::adapter::{Adapter, HttpRequest};

const SONNET: &str = "anthropic/claude-sonnet-4-5";

/// Claude Sonnet 4.5 as the bundled catalog describes it.
fn sonnet() -> ModelInfo {
    ModelInfo {
        id: SONNET.into(),
        provider: "anthropic".into(),
        name: "claude-sonnet-4-5".into(),
        display_name: "Claude Sonnet 4.5".into(),
        protocol: Protocol::Anthropic,
        context_window: 200_000,
        max_input_tokens: 0,
        max_output_tokens: 64_000,
        capabilities: Capabilities {
            tools: true,
            reasoning: true,
            vision: true,
            json_schema: false,
            temperature: true,
            prompt_cache: true,
            exclusive_temperature_top_p: true,
            ..Capabilities::default()
        },
        pricing: None,
    }
}

/// Sonnet without prompt caching, so tests about other fixes read without cache markers.
fn uncached() -> ModelInfo {
    let mut m = sonnet();
    m.capabilities.prompt_cache = false;
    m
}

fn request(g: &pb::Generation, m: &ModelInfo) -> HttpRequest {
    Anthropic.build(g, &Target::new(m)).unwrap()
}

fn body(g: &pb::Generation, m: &ModelInfo) -> Value {
    request(g, m).body
}

fn error(g: &pb::Generation, m: &ModelInfo) -> BuildError {
    Anthropic.build(g, &Target::new(m)).unwrap_err()
}

fn reasoning(t: &str, protocol: &str, model: &str, json: &str) -> pb::Part {
    testkit::reasoning(t, metadata(protocol, model, json))
}

fn generation(messages: Vec<pb::Message>) -> pb::Generation {
    pb::Generation {
        model: SONNET.into(),
        messages,
        ..Default::default()
    }
}

fn effort(e: pb::reasoning::Effort) -> Option<pb::Reasoning> {
    Some(pb::Reasoning {
        effort: e.into(),
        budget_tokens: 0,
    })
}

fn budget(tokens: u32) -> Option<pb::Reasoning> {
    Some(pb::Reasoning {
        effort: 0,
        budget_tokens: tokens,
    })
}

fn weather_tool(name: &str) -> pb::Tool {
    pb::Tool {
        name: name.into(),
        description: format!("{name} description"),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
        ..Default::default()
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

#[test]
fn request_has_path_version_header_and_system_blocks_with_one_cache_marker() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.system = vec![
        "You are a coding agent.".into(),
        String::new(),
        "  \n ".into(),
        "Repository: acme/web".into(),
    ];
    let req = request(&g, &sonnet());
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(
        req.headers,
        vec![("anthropic-version".to_string(), "2023-06-01".to_string())]
    );
    assert_eq!(
        req.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "system": [
                {"type": "text", "text": "You are a coding agent."},
                {"type": "text", "text": "Repository: acme/web", "cache_control": ephemeral()},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": ephemeral()}]},
            ],
            "stream": true,
        })
    );
}

#[test]
fn tool_results_merge_into_one_user_turn_results_first() {
    let g = generation(vec![
        user(vec![text("Weather in Paris and Tokyo?")]),
        assistant(vec![
            text("Checking both."),
            call("toolu_01A", "get_weather", r#"{"city":"Paris"}"#),
            call("toolu_01B", "get_weather", r#"{"city":"Tokyo"}"#),
        ]),
        tool(vec![result(
            "toolu_01A",
            "get_weather",
            "18°C, sunny",
            false,
        )]),
        user(vec![text("Use Celsius, please.")]),
        tool(vec![result(
            "toolu_01B",
            "get_weather",
            "upstream timeout",
            true,
        )]),
    ]);
    assert_eq!(
        body(&g, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Tokyo?"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking both."},
                    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Tokyo"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C, sunny"},
                    {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "upstream timeout", "is_error": true},
                    {"type": "text", "text": "Use Celsius, please."},
                ]},
            ],
            "stream": true,
        })
    );
}

#[test]
fn foreign_tool_ids_are_rewritten_and_stay_paired() {
    let g = generation(vec![
        user(vec![text("List the files.")]),
        assistant(vec![
            call("call:1", "list", ""),
            call("fc.2/x", "list", "{}"),
        ]),
        tool(vec![
            result("call:1", "list", "a.txt", false),
            result("fc.2/x", "list", "", false),
        ]),
    ]);
    let first = ids::anthropic("call:1").into_owned();
    let second = ids::anthropic("fc.2/x").into_owned();
    for id in [&first, &second] {
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{id}"
        );
    }
    assert_ne!(first, second);
    assert_eq!(
        body(&g, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": first, "name": "list", "input": {}},
                    {"type": "tool_use", "id": second, "name": "list", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": first, "content": "a.txt"},
                    {"type": "tool_result", "tool_use_id": second},
                ]},
            ],
            "stream": true,
        })
    );
}

/// A tool loop whose assistant turn carries the given reasoning part.
fn tool_loop(reasoning_part: pb::Part) -> pb::Generation {
    let mut g = generation(vec![
        user(vec![text("What is 27 * 453?")]),
        assistant(vec![
            reasoning_part,
            call("toolu_01C", "calc", r#"{"expr":"27*453"}"#),
        ]),
        tool(vec![result("toolu_01C", "calc", "12231", false)]),
    ]);
    g.reasoning = effort(pb::reasoning::Effort::Medium);
    g
}

#[test]
fn thinking_is_replayed_with_its_signature_to_the_same_model() {
    let g = tool_loop(reasoning(
        "I should use the calculator.",
        "anthropic",
        SONNET,
        r#"{"signature":"EqQBCgIYAhIM1gbc"}"#,
    ));
    assert_eq!(
        body(&g, &sonnet()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is 27 * 453?", "cache_control": ephemeral()},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should use the calculator.", "signature": "EqQBCgIYAhIM1gbc"},
                    {"type": "tool_use", "id": "toolu_01C", "name": "calc", "input": {"expr": "27*453"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01C", "content": "12231", "cache_control": ephemeral()},
                ]},
            ],
            "thinking": {"type": "enabled", "budget_tokens": 8192},
            "stream": true,
        })
    );
}

#[test]
fn redacted_thinking_is_replayed_to_the_same_model() {
    let g = tool_loop(reasoning(
        "",
        "anthropic",
        SONNET,
        r#"{"redacted_data":"EmwKAhgBEgy3va3pzix"}"#,
    ));
    let b = body(&g, &uncached());
    assert_eq!(
        b["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "tool_use", "id": "toolu_01C", "name": "calc", "input": {"expr": "27*453"}},
        ]})
    );
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
}

#[test]
fn thinking_from_another_model_or_protocol_is_dropped() {
    for (protocol, model) in [
        ("anthropic", "anthropic/claude-opus-4-1"),
        ("openai_chat", SONNET),
    ] {
        let mut g = generation(vec![
            user(vec![text("Hello")]),
            assistant(vec![
                reasoning("Greeting.", protocol, model, r#"{"signature":"sig"}"#),
                text("Hi! "),
            ]),
            user(vec![text("How are you?")]),
        ]);
        g.reasoning = budget(2000);
        assert_eq!(
            body(&g, &uncached()),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 64000,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "Hi! "}]},
                    {"role": "user", "content": [{"type": "text", "text": "How are you?"}]},
                ],
                "thinking": {"type": "enabled", "budget_tokens": 2000},
                "stream": true,
            }),
            "{protocol} {model}"
        );
    }
}

#[test]
fn thinking_turns_off_when_the_open_tool_loop_has_no_thinking_block() {
    // The reasoning came from another model, so the loop's assistant turn cannot start with a thinking block;
    // the API would answer 400 with thinking on.
    let g = tool_loop(reasoning(
        "Calculator.",
        "anthropic",
        "anthropic/claude-opus-4-1",
        r#"{"signature":"sig"}"#,
    ));
    assert_eq!(
        body(&g, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is 27 * 453?"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_01C", "name": "calc", "input": {"expr": "27*453"}},
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01C", "content": "12231"}]},
            ],
            "stream": true,
        })
    );
    // The max_tokens raised for the dropped budget falls back to what the caller asked for.
    let mut small = tool_loop(reasoning(
        "x",
        "anthropic",
        "anthropic/claude-opus-4-1",
        "{}",
    ));
    small.sampling = Some(pb::Sampling {
        max_output_tokens: Some(2000),
        ..Default::default()
    });
    assert_eq!(body(&small, &uncached())["max_tokens"], 2000);
    // Without thinking in this request, same-model reasoning is not replayed either.
    let mut same = tool_loop(reasoning(
        "x",
        "anthropic",
        SONNET,
        r#"{"signature":"sig"}"#,
    ));
    same.reasoning = None;
    let b = body(&same, &uncached());
    assert_eq!(b["messages"][1]["content"][0]["type"], "tool_use");
    assert!(b.get("thinking").is_none());
}

#[test]
fn empty_blocks_and_messages_are_dropped_and_prefill_trimmed() {
    let g = generation(vec![
        user(vec![
            text("Hello"),
            text("   "),
            text(""),
            pb::Part { kind: None },
        ]),
        assistant(vec![text(" \n\t")]),
        user(vec![text(""), text("Second question")]),
        tool(vec![]),
        assistant(vec![text("Answer:\n  "), text("The answer is  \n ")]),
    ]);
    assert_eq!(
        body(&g, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Hello"},
                    {"type": "text", "text": "Second question"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Answer:\n  "},
                    {"type": "text", "text": "The answer is"},
                ]},
            ],
            "stream": true,
        })
    );
    let nothing = generation(vec![user(vec![text("  ")]), assistant(vec![])]);
    assert_eq!(error(&nothing, &sonnet()).field, "generation.messages");
}

#[test]
fn a_conversation_opening_with_the_assistant_gets_a_user_turn_first() {
    // A greeting the application showed before the user typed anything.
    let greeting = generation(vec![
        assistant(vec![text("Hello! How can I help?")]),
        user(vec![text("What is 27 * 453?")]),
    ]);
    assert_eq!(
        body(&greeting, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "."}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello! How can I help?"}]},
                {"role": "user", "content": [{"type": "text", "text": "What is 27 * 453?"}]},
            ],
            "stream": true,
        })
    );

    // A first user turn that had only whitespace leaves an assistant tool call first; its thinking stays, the
    // results stay right after the call, and consecutive assistant turns merge into one.
    let mut resumed = generation(vec![
        user(vec![text("  ")]),
        assistant(vec![reasoning(
            "Use the calculator.",
            "anthropic",
            SONNET,
            r#"{"signature":"sig"}"#,
        )]),
        assistant(vec![call("toolu_01C", "calc", r#"{"expr":"27*453"}"#)]),
        tool(vec![result("toolu_01C", "calc", "12231", false)]),
    ]);
    resumed.reasoning = budget(2000);
    assert_eq!(
        body(&resumed, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "."}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Use the calculator.", "signature": "sig"},
                    {"type": "tool_use", "id": "toolu_01C", "name": "calc", "input": {"expr": "27*453"}},
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01C", "content": "12231"}]},
            ],
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "stream": true,
        })
    );

    // A lone assistant turn is a prefill: the user turn goes in front of it, and the prefill is still trimmed.
    let prefill = generation(vec![assistant(vec![text("{\"answer\": ")])]);
    assert_eq!(
        body(&prefill, &uncached())["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "{\"answer\":"}]},
        ])
    );

    // A conversation that already opens with the user gets nothing added.
    let plain = generation(vec![user(vec![text("Hi")]), assistant(vec![text("Hello")])]);
    assert_eq!(
        body(&plain, &uncached())["messages"][0],
        json!({"role": "user", "content": [{"type": "text", "text": "Hi"}]})
    );
}

fn count_markers(v: &Value) -> usize {
    v.to_string().matches("\"cache_control\"").count()
}

#[test]
fn at_most_four_cache_markers_with_many_turns_and_tools() {
    let mut g = generation(vec![
        user(vec![text("u1")]),
        assistant(vec![text("a1")]),
        user(vec![text("u2"), text("u2b")]),
        assistant(vec![call("toolu_1", "t2", "{}")]),
        tool(vec![result("toolu_1", "t2", "r1", false)]),
        assistant(vec![call("toolu_2", "t2", "{}")]),
        tool(vec![result("toolu_2", "t2", "r2", false)]),
    ]);
    g.system = vec!["s1".into(), "s2".into()];
    g.tools = vec![weather_tool("t1"), weather_tool("t2"), weather_tool("t3")];
    let b = body(&g, &sonnet());
    let schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    assert_eq!(
        b,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "system": [
                {"type": "text", "text": "s1"},
                {"type": "text", "text": "s2", "cache_control": ephemeral()},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "u1"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
                {"role": "user", "content": [{"type": "text", "text": "u2"}, {"type": "text", "text": "u2b"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t2", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r1", "cache_control": ephemeral()},
                ]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "t2", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "r2", "cache_control": ephemeral()},
                ]},
            ],
            "tools": [
                {"name": "t1", "description": "t1 description", "input_schema": schema},
                {"name": "t2", "description": "t2 description", "input_schema": schema},
                {"name": "t3", "description": "t3 description", "input_schema": schema, "cache_control": ephemeral()},
            ],
            "stream": true,
        })
    );
    assert_eq!(count_markers(&b), 4);
    // Many more turns change nothing about the count.
    for k in 0..20 {
        g.messages.push(user(vec![text(&format!("u{k}"))]));
        g.messages.push(assistant(vec![text(&format!("a{k}"))]));
    }
    assert_eq!(count_markers(&body(&g, &sonnet())), 4);
    // And no marker at all on a model without prompt caching.
    assert_eq!(count_markers(&body(&g, &uncached())), 0);
}

#[test]
fn thinking_budget_drops_temperature_and_top_k_and_raises_max_tokens() {
    let mut g = generation(vec![user(vec![text("Think hard.")])]);
    g.reasoning = effort(pb::reasoning::Effort::Medium);
    g.sampling = Some(pb::Sampling {
        temperature: Some(0.7),
        top_p: Some(0.97),
        top_k: Some(40),
        max_output_tokens: Some(4000),
        stop_sequences: vec!["\n\nHuman:".into(), "  ".into()],
        seed: Some(7),
    });
    assert_eq!(
        body(&g, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 9216,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Think hard."}]}],
            "thinking": {"type": "enabled", "budget_tokens": 8192},
            "top_p": 0.97,
            "stop_sequences": ["\n\nHuman:"],
            "stream": true,
        })
    );
    // top_p outside 0.95..=1 is refused with thinking on.
    if let Some(s) = g.sampling.as_mut() {
        s.top_p = Some(0.5);
    }
    assert!(body(&g, &uncached()).get("top_p").is_none());
    // Effort levels map to budgets; MINIMAL is the API's minimum.
    for (e, expected) in [
        (pb::reasoning::Effort::Minimal, 1024),
        (pb::reasoning::Effort::Low, 2048),
        (pb::reasoning::Effort::High, 24_576),
    ] {
        g.reasoning = effort(e);
        assert_eq!(body(&g, &uncached())["thinking"]["budget_tokens"], expected);
    }
}

#[test]
fn thinking_budget_is_clamped_to_what_the_model_allows() {
    let mut g = generation(vec![user(vec![text("Go.")])]);
    // A budget as large as the model's output limit is lowered to leave room for the answer.
    g.reasoning = budget(64_000);
    let b = body(&g, &uncached());
    assert_eq!(b["max_tokens"], 64_000);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 62_976})
    );
    // A budget below the API minimum is raised to it.
    g.reasoning = budget(500);
    assert_eq!(body(&g, &uncached())["thinking"]["budget_tokens"], 1024);
    // EFFORT_NONE wins over a budget; a model without reasoning never gets `thinking`.
    g.reasoning = Some(pb::Reasoning {
        effort: pb::reasoning::Effort::None.into(),
        budget_tokens: 4096,
    });
    assert!(body(&g, &uncached()).get("thinking").is_none());
    g.reasoning = budget(4096);
    let mut plain = uncached();
    plain.capabilities.reasoning = false;
    assert!(body(&g, &plain).get("thinking").is_none());
    // A forced tool choice turns thinking off (the API refuses the combination).
    g.tools = vec![weather_tool("get_weather")];
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Required.into(),
        tool_name: String::new(),
        ..Default::default()
    });
    let forced = body(&g, &uncached());
    assert!(forced.get("thinking").is_none());
    assert_eq!(forced["tool_choice"], json!({"type": "any"}));
}

#[test]
fn temperature_and_top_p_are_exclusive_on_recent_models() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.sampling = Some(pb::Sampling {
        temperature: Some(1.5),
        top_p: Some(0.9),
        top_k: Some(20),
        ..Default::default()
    });
    let exclusive = body(&g, &uncached());
    assert_eq!(
        exclusive,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "temperature": 1.0,
            "top_k": 20,
            "stream": true,
        })
    );
    let mut older = uncached();
    older.capabilities.exclusive_temperature_top_p = false;
    let both = body(&g, &older);
    assert_eq!(both["temperature"], 1.0);
    assert_eq!(both["top_p"], 0.9);
    // Only top_p set: kept even on an exclusive model.
    if let Some(s) = g.sampling.as_mut() {
        s.temperature = None;
    }
    assert_eq!(body(&g, &uncached())["top_p"], 0.9);
}

#[test]
fn max_tokens_defaults_to_the_catalog_maximum_and_never_exceeds_it() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    let mut haiku = uncached();
    haiku.max_output_tokens = 8192;
    assert_eq!(body(&g, &haiku)["max_tokens"], 8192);
    for (asked, sent) in [(Some(1000), 1000), (Some(0), 8192), (Some(100_000), 8192)] {
        g.sampling = Some(pb::Sampling {
            max_output_tokens: asked,
            ..Default::default()
        });
        assert_eq!(body(&g, &haiku)["max_tokens"], sent, "{asked:?}");
    }
}

#[test]
fn provider_options_are_merged_and_gateway_fields_refused() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.provider_options_json =
            r#"{"anthropic":{"metadata":{"user_id":"u-42"},"max_tokens":512},"openai_chat":{"seed":1}}"#.into();
    assert_eq!(
        body(&g, &uncached()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 512,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "stream": true,
            "metadata": {"user_id": "u-42"},
        })
    );
    for bad in [
        r#"{"anthropic":{"stream":false}}"#,
        r#"{"anthropic":{"messages":[]}}"#,
        r#"{"anthropic":{"model":"x"}}"#,
        r#"{"anthropic":{"system":"x"}}"#,
        r#"{"anthropic":{"tools":[]}}"#,
        r#"{"anthropic":{"tool_choice":{"type":"any"}}}"#,
        r#"{"anthropic":[]}"#,
        r#"[1]"#,
        r#"{"anthropic":"#,
    ] {
        g.provider_options_json = bad.into();
        assert_eq!(
            error(&g, &uncached()).field,
            "generation.provider_options_json",
            "{bad}"
        );
    }
}

#[test]
fn build_errors_name_the_offending_field() {
    let bad_input = generation(vec![
        user(vec![text("Hi")]),
        assistant(vec![text("ok"), call("toolu_1", "t", "{not json")]),
    ]);
    assert_eq!(
        error(&bad_input, &sonnet()).field,
        "generation.messages[1].parts[1].tool_call.input_json"
    );
    let array_input = generation(vec![assistant(vec![call("toolu_1", "t", "[1]")])]);
    assert_eq!(
        error(&array_input, &sonnet()).field,
        "generation.messages[0].parts[0].tool_call.input_json"
    );
    for schema in ["{", r#"{"type":"array"}"#, r#"{"properties":{}}"#] {
        let mut g = generation(vec![user(vec![text("Hi")])]);
        g.tools = vec![
            weather_tool("ok"),
            pb::Tool {
                name: "bad".into(),
                description: String::new(),
                input_schema_json: schema.into(),
                ..Default::default()
            },
        ];
        assert_eq!(
            error(&g, &sonnet()).field,
            "generation.tools[1].input_schema_json",
            "{schema}"
        );
    }
    let mut json_out = generation(vec![user(vec![text("Hi")])]);
    json_out.output_format = Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema.into(),
        name: "answer".into(),
        schema_json: "{}".into(),
        ..Default::default()
    });
    let e = error(&json_out, &sonnet());
    assert_eq!(e.field, "generation.output_format.type");
    assert!(e.message.contains("through a tool"), "{e}");
    let mut unknown_tool = generation(vec![user(vec![text("Hi")])]);
    unknown_tool.tools = vec![weather_tool("get_weather")];
    unknown_tool.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Tool.into(),
        tool_name: "nope".into(),
        ..Default::default()
    });
    assert_eq!(
        error(&unknown_tool, &sonnet()).field,
        "generation.tool_choice.tool_name"
    );
    for (m, field) in misplaced_parts() {
        assert_eq!(error(&generation(vec![m]), &sonnet()).field, field);
    }
}

#[test]
fn tools_and_tool_choice_translate() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.tools = vec![
        weather_tool("get_weather"),
        pb::Tool {
            name: "now".into(),
            description: String::new(),
            input_schema_json: String::new(),
            ..Default::default()
        },
    ];
    let modes = [
        (pb::tool_choice::Mode::Unspecified, None),
        (pb::tool_choice::Mode::Auto, Some(json!({"type": "auto"}))),
        (pb::tool_choice::Mode::None, Some(json!({"type": "none"}))),
        (
            pb::tool_choice::Mode::Required,
            Some(json!({"type": "any"})),
        ),
        (
            pb::tool_choice::Mode::Tool,
            Some(json!({"type": "tool", "name": "now"})),
        ),
    ];
    for (mode, expected) in modes {
        g.tool_choice = Some(pb::ToolChoice {
            mode: mode.into(),
            tool_name: "now".into(),
            ..Default::default()
        });
        let b = body(&g, &uncached());
        assert_eq!(b.get("tool_choice").cloned(), expected, "{mode:?}");
        assert_eq!(
            b["tools"][1],
            json!({"name": "now", "input_schema": {"type": "object", "properties": {}}})
        );
    }
    // Without tools there is no tool_choice at all.
    g.tools.clear();
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Auto.into(),
        tool_name: String::new(),
        ..Default::default()
    });
    assert!(body(&g, &uncached()).get("tool_choice").is_none());
}

#[test]
fn files_become_image_and_document_blocks() {
    let g = generation(vec![user(vec![
        file("image/png", "", Source::Data(b"\x89PNG".to_vec())),
        file(
            "image/jpeg",
            "",
            Source::Url("https://example.com/cat.jpg".into()),
        ),
        file(
            "application/pdf",
            "report.pdf",
            Source::Data(b"%PDF-1.7".to_vec()),
        ),
        file(
            "application/pdf",
            "",
            Source::Url("https://example.com/a.pdf".into()),
        ),
        file(
            "text/plain; charset=utf-8",
            "notes.txt",
            Source::Data("héllo".as_bytes().to_vec()),
        ),
        file("text/plain", "empty.txt", Source::Data(Vec::new())),
        text("Summarise these."),
    ])]);
    assert_eq!(
        body(&g, &uncached())["messages"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjc="}, "title": "report.pdf"},
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "héllo"}, "title": "notes.txt"},
            {"type": "text", "text": "Summarise these."},
        ])
    );
    let mut blind = uncached();
    blind.capabilities.vision = false;
    let image = generation(vec![user(vec![file(
        "image/png",
        "",
        Source::Data(vec![1]),
    )])]);
    assert_eq!(
        error(&image, &blind).field,
        "generation.messages[0].parts[0].file"
    );
    let bmp = generation(vec![user(vec![file(
        "image/bmp",
        "",
        Source::Data(vec![1]),
    )])]);
    assert_eq!(
        error(&bmp, &uncached()).field,
        "generation.messages[0].parts[0].file.media_type"
    );
    let zip = generation(vec![user(vec![file(
        "application/zip",
        "",
        Source::Data(vec![1]),
    )])]);
    assert_eq!(
        error(&zip, &uncached()).field,
        "generation.messages[0].parts[0].file.media_type"
    );
    let text_url = generation(vec![user(vec![file(
        "text/plain",
        "",
        Source::Url("https://x/y.txt".into()),
    )])]);
    assert_eq!(
        error(&text_url, &uncached()).field,
        "generation.messages[0].parts[0].file"
    );
    let latin1 = generation(vec![user(vec![file(
        "text/plain",
        "",
        Source::Data(vec![0xff, 0xfe]),
    )])]);
    assert_eq!(
        error(&latin1, &uncached()).field,
        "generation.messages[0].parts[0].file"
    );
}
