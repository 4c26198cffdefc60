//! Request builder tests: whole JSON bodies for each feature, and the errors naming their fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::generation_config::Family;
use super::request::build;
use super::{ReplayMetadata, SKIP_THOUGHT_SIGNATURE};
use crate::adapter::testing::testkit::{
    self, assistant, call_with as call, message, metadata, reasoning, result, text, tool, user,
};
use crate::adapter::{BuildError, HttpRequest, Protocol, Target, pb};
use crate::catalog::{Capabilities, ModelInfo};

use pb::file_part::Source;
use pb::reasoning::Effort;

fn model(name: &str, reasoning: bool) -> ModelInfo {
    ModelInfo {
        id: format!("gemini/{name}"),
        provider: "gemini".into(),
        name: name.into(),
        display_name: name.into(),
        protocol: Protocol::Gemini,
        context_window: 1_048_576,
        max_input_tokens: 0,
        max_output_tokens: if name.starts_with("gemini-2.0") {
            8192
        } else {
            65_536
        },
        capabilities: Capabilities {
            reasoning,
            vision: true,
            json_schema: true,
            prompt_cache: true,
            ..Capabilities::default()
        },
        pricing: None,
    }
}

const FLASH_ID: &str = "gemini/gemini-2.5-flash";

fn flash() -> ModelInfo {
    model("gemini-2.5-flash", true)
}
fn pro() -> ModelInfo {
    model("gemini-2.5-pro", true)
}
fn flash_lite() -> ModelInfo {
    model("gemini-2.5-flash-lite", true)
}
fn flash_2_0() -> ModelInfo {
    model("gemini-2.0-flash", false)
}
fn gemini_3() -> ModelInfo {
    model("gemini-3-pro-preview", true)
}

fn request(g: &pb::Generation, m: &ModelInfo) -> HttpRequest {
    build(g, &Target::new(m)).unwrap()
}

fn body(g: &pb::Generation, m: &ModelInfo) -> Value {
    request(g, m).body
}

fn error(g: &pb::Generation, m: &ModelInfo) -> BuildError {
    build(g, &Target::new(m)).unwrap_err()
}

fn meta(model: &str, json: &str) -> Option<pb::ProviderMetadata> {
    metadata("gemini", model, json)
}
fn file(media_type: &str, source: Source) -> pb::Part {
    testkit::file(media_type, "", source)
}
fn generation(messages: Vec<pb::Message>) -> pb::Generation {
    pb::Generation {
        model: FLASH_ID.into(),
        messages,
        ..Default::default()
    }
}
fn weather_tool() -> pb::Tool {
    pb::Tool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json: r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"],"enum":["celsius","fahrenheit",null]}},"required":["city"],"additionalProperties":false}"#.into(),
        ..Default::default()
    }
}
fn signature(sig: &str) -> String {
    ReplayMetadata {
        thought_signature: Some(sig.into()),
        function_call_id: None,
    }
    .to_json()
    .unwrap()
}
/// The `contents` of the body.
fn contents(g: &pb::Generation, m: &ModelInfo) -> Value {
    body(g, m)["contents"].clone()
}

#[test]
fn path_headers_system_instruction_and_a_minimal_body() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.system = vec![
        "You are a coding agent.".into(),
        String::new(),
        "Repository: acme/web".into(),
    ];
    let req = request(&g, &flash_2_0());
    assert_eq!(
        req.path,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    );
    assert!(req.headers.is_empty());
    assert_eq!(
        req.body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "systemInstruction": {"parts": [{"text": "You are a coding agent.\n\nRepository: acme/web"}]},
        })
    );
    // No system sections, no `systemInstruction`.
    g.system = vec![String::new()];
    assert_eq!(
        body(&g, &flash_2_0()),
        json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]})
    );
}

/// A step of the tool loop as the processor sends it back after the parallel-calls fixture: the ids are the ones
/// the decoder synthesized, the first call carries its signature, and the results come back in another order.
fn tool_loop(sig_model: &str) -> pb::Generation {
    let mut g = generation(vec![
        user(vec![text("Weather in Paris and Tokyo?")]),
        assistant(vec![
            call(
                "call_3GXPaOKvDcmV7M8P6YbA2QQ_0",
                "get_weather",
                r#"{"city":"Paris"}"#,
                meta(sig_model, &signature("c2lnLXBhcmlz")),
            ),
            call(
                "call_3GXPaOKvDcmV7M8P6YbA2QQ_1",
                "get_weather",
                r#"{"city":"Tokyo","unit":"celsius"}"#,
                None,
            ),
        ]),
        tool(vec![
            // Answers the second call, and leaves the tool name to be found from the call id.
            result("call_3GXPaOKvDcmV7M8P6YbA2QQ_1", "", "25°C, humid", false),
            result(
                "call_3GXPaOKvDcmV7M8P6YbA2QQ_0",
                "get_weather",
                "upstream timeout",
                true,
            ),
        ]),
        user(vec![text("Use Celsius, please.")]),
    ]);
    g.tools = vec![weather_tool()];
    g
}

#[test]
fn parallel_calls_and_results_pair_by_synthesized_id_which_never_goes_on_the_wire() {
    assert_eq!(
        body(&tool_loop(FLASH_ID), &flash()),
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris and Tokyo?"}]},
                {"role": "model", "parts": [
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLXBhcmlz"},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo", "unit": "celsius"}}},
                ]},
                // One user turn: results first, in the order of the calls they answer, then the text.
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"error": "upstream timeout"}}},
                    {"functionResponse": {"name": "get_weather", "response": {"output": "25°C, humid"}}},
                    {"text": "Use Celsius, please."},
                ]},
            ],
            "tools": [{"functionDeclarations": [{
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "nullable": true},
                    },
                    "required": ["city"],
                },
            }]}],
            "generationConfig": {"thinkingConfig": {"includeThoughts": true}},
        })
    );
}

#[test]
fn geminis_own_call_ids_are_echoed_on_the_call_and_its_response() {
    let g = generation(vec![
        user(vec![text("What time is it?")]),
        assistant(vec![call(
            "fc-7",
            "now",
            "",
            meta(FLASH_ID, r#"{"function_call_id":"fc-7"}"#),
        )]),
        tool(vec![result("fc-7", "now", "12:00", false)]),
    ]);
    assert_eq!(
        contents(&g, &flash_2_0()),
        json!([
            {"role": "user", "parts": [{"text": "What time is it?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "now", "args": {}, "id": "fc-7"}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "now", "response": {"output": "12:00"}, "id": "fc-7"}}]},
        ])
    );
}

#[test]
fn results_pair_by_name_when_ids_do_not_match_any_call() {
    let g = generation(vec![
        user(vec![text("go")]),
        assistant(vec![
            call("a", "list", "{}", None),
            call("b", "read", r#"{"path":"x"}"#, None),
        ]),
        tool(vec![
            result("other-1", "read", "contents", false),
            result("other-2", "list", "x", false),
            result("other-3", "unknown_tool", "?", false),
        ]),
    ]);
    assert_eq!(
        contents(&g, &flash_2_0())[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "list", "response": {"output": "x"}}},
            {"functionResponse": {"name": "read", "response": {"output": "contents"}}},
            {"functionResponse": {"name": "unknown_tool", "response": {"output": "?"}}},
        ]})
    );
}

#[test]
fn thought_signatures_are_replayed_to_the_same_model_only() {
    let history = |sig_model: &str| {
        generation(vec![
            user(vec![text("What is 27 * 453?")]),
            assistant(vec![
                reasoning(
                    "Split 453 into 400 + 53.",
                    meta(sig_model, &signature("dGhvdWdodA==")),
                ),
                reasoning("Unsigned thought.", meta(sig_model, "{}")),
                text("12231"),
                reasoning("", meta(sig_model, &signature("dHJhaWxpbmc="))),
                // Foreign reasoning is never replayed.
                reasoning(
                    "Anthropic thinking",
                    Some(pb::ProviderMetadata {
                        protocol: "anthropic".into(),
                        model: sig_model.into(),
                        json: r#"{"signature":"abc"}"#.into(),
                    }),
                ),
            ]),
            user(vec![text("Thanks")]),
        ])
    };
    assert_eq!(
        contents(&history(FLASH_ID), &flash())[1],
        json!({"role": "model", "parts": [
            {"text": "Split 453 into 400 + 53.", "thought": true, "thoughtSignature": "dGhvdWdodA=="},
            {"text": "12231"},
            // The signature-only block goes back as the empty text part it came from.
            {"text": "", "thoughtSignature": "dHJhaWxpbmc="},
        ]})
    );
    // Produced by another model: the reasoning is dropped, and so is the call's signature.
    assert_eq!(
        contents(&history("gemini/gemini-2.5-pro"), &flash())[1],
        json!({"role": "model", "parts": [{"text": "12231"}]})
    );
    let other = body(&tool_loop("gemini/gemini-2.5-pro"), &flash());
    assert_eq!(
        other["contents"][1]["parts"][0],
        json!({"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}})
    );
}

#[test]
fn gemini_3_gets_the_sentinel_on_the_first_unsigned_call_of_a_turn() {
    let model_3 = gemini_3();
    // History from another provider: no signature anywhere.
    let g = generation(vec![
        user(vec![text("Weather?")]),
        assistant(vec![
            text("Checking."),
            call("toolu_01", "get_weather", r#"{"city":"Paris"}"#, None),
            call("toolu_02", "get_weather", r#"{"city":"Tokyo"}"#, None),
        ]),
        tool(vec![
            result("toolu_01", "get_weather", "18", false),
            result("toolu_02", "get_weather", "25", false),
        ]),
    ]);
    assert_eq!(
        contents(&g, &model_3)[1],
        json!({"role": "model", "parts": [
            {"text": "Checking."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SKIP_THOUGHT_SIGNATURE},
            {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo"}}},
        ]})
    );
    // Its own signature is kept, and no sentinel is added to the unsigned parallel call.
    let g = tool_loop(&model_3.id);
    assert_eq!(
        contents(&g, &model_3)[1]["parts"],
        json!([
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLXBhcmlz"},
            {"functionCall": {"name": "get_weather", "args": {"city": "Tokyo", "unit": "celsius"}}},
        ])
    );
    // Older models never get the sentinel.
    let g = tool_loop("gemini/gemini-2.5-pro");
    assert!(
        !body(&g, &flash())
            .to_string()
            .contains(SKIP_THOUGHT_SIGNATURE)
    );
}

#[test]
fn empty_parts_and_turns_are_never_sent_and_same_roles_merge() {
    let g = generation(vec![
        user(vec![
            text(""),
            pb::Part { kind: None },
            file("image/png", Source::Data(Vec::new())),
        ]),
        user(vec![text("First")]),
        user(vec![text("Second")]),
        assistant(vec![text(""), reasoning("", None)]),
        assistant(vec![reasoning("no metadata", None)]),
        tool(vec![text("")]),
        assistant(vec![text("Answer")]),
    ]);
    let contents = contents(&g, &flash());
    assert_eq!(
        contents,
        json!([
            {"role": "user", "parts": [{"text": "First"}, {"text": "Second"}]},
            {"role": "model", "parts": [{"text": "Answer"}]},
        ])
    );
    let all = contents.to_string();
    assert!(
        !all.contains("\"parts\":[]") && !all.contains("{}"),
        "{all}"
    );

    let nothing = generation(vec![user(vec![text("")]), assistant(vec![])]);
    assert_eq!(error(&nothing, &flash()).field, "generation.messages");
}

#[test]
fn a_conversation_opening_with_the_model_gets_a_user_turn_first() {
    // A greeting the application showed before the user typed anything.
    let greeting = generation(vec![
        assistant(vec![text("Hello! How can I help?")]),
        user(vec![text("Weather in Paris?")]),
    ]);
    assert_eq!(
        contents(&greeting, &flash()),
        json!([
            {"role": "user", "parts": [{"text": "."}]},
            {"role": "model", "parts": [{"text": "Hello! How can I help?"}]},
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        ])
    );

    // A history whose first user turn was empty opens with a function call: the call turn must follow a user turn,
    // and the response turn stays right after it. Consecutive model turns merge into one.
    let mut resumed = generation(vec![
        user(vec![text("")]),
        assistant(vec![text("Checking.")]),
        assistant(vec![call("c1", "get_weather", r#"{"city":"Paris"}"#, None)]),
        tool(vec![result("c1", "get_weather", "18°C", false)]),
    ]);
    resumed.tools = vec![weather_tool()];
    let expected = json!([
        {"role": "user", "parts": [{"text": "."}]},
        {"role": "model", "parts": [
            {"text": "Checking."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        ]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "18°C"}}},
        ]},
    ]);
    assert_eq!(contents(&resumed, &flash()), expected);
    // On Gemini 3 the call still gets the sentinel signature; the user turn in front changes nothing there.
    let mut signed = expected;
    signed[1]["parts"][1]["thoughtSignature"] = json!(SKIP_THOUGHT_SIGNATURE);
    assert_eq!(contents(&resumed, &gemini_3()), signed);

    // A conversation that already opens with the user gets nothing added.
    let plain = generation(vec![user(vec![text("Hi")]), assistant(vec![text("Hello")])]);
    assert_eq!(
        contents(&plain, &flash())[0],
        json!({"role": "user", "parts": [{"text": "Hi"}]})
    );
}

#[test]
fn files_are_inline_data_or_file_data() {
    let g = generation(vec![user(vec![
        text("Describe these."),
        file(
            "image/PNG; charset=binary",
            Source::Data(vec![0x89, b'P', b'N', b'G']),
        ),
        file(
            "application/pdf",
            Source::Url("https://example.com/a.pdf".into()),
        ),
        file("", Source::Url("https://www.youtube.com/watch?v=x".into())),
    ])]);
    assert_eq!(
        contents(&g, &flash())[0]["parts"],
        json!([
            {"text": "Describe these."},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}},
            {"fileData": {"fileUri": "https://www.youtube.com/watch?v=x"}},
        ])
    );
    let no_type = generation(vec![user(vec![file("", Source::Data(vec![1]))])]);
    assert_eq!(
        error(&no_type, &flash()).field,
        "generation.messages[0].parts[0].file.media_type"
    );
}

#[test]
fn thinking_config_per_model_family() {
    let with = |effort: Effort, budget: u32| {
        let mut g = generation(vec![user(vec![text("Hi")])]);
        g.reasoning = Some(pb::Reasoning {
            effort: effort.into(),
            budget_tokens: budget,
        });
        g
    };
    let thinking = |g: &pb::Generation, m: &ModelInfo| {
        body(g, m)["generationConfig"]["thinkingConfig"].clone()
    };
    let cases: Vec<(ModelInfo, pb::Generation, Value)> = vec![
        // Caller default: thought summaries on, the model's own (dynamic) budget.
        (
            flash(),
            generation(vec![user(vec![text("Hi")])]),
            json!({"includeThoughts": true}),
        ),
        (flash(), with(Effort::None, 0), json!({"thinkingBudget": 0})),
        (
            flash(),
            with(Effort::None, 4096),
            json!({"thinkingBudget": 0}),
        ),
        (
            flash(),
            with(Effort::Unspecified, 4096),
            json!({"includeThoughts": true, "thinkingBudget": 4096}),
        ),
        (
            flash(),
            with(Effort::Low, 0),
            json!({"includeThoughts": true, "thinkingBudget": 1024}),
        ),
        (
            flash(),
            with(Effort::High, 100_000),
            json!({"includeThoughts": true, "thinkingBudget": 24_576}),
        ),
        // 2.5 Pro cannot turn thinking off: its smallest budget instead, and 128 at least.
        (
            pro(),
            with(Effort::None, 0),
            json!({"includeThoughts": true, "thinkingBudget": 128}),
        ),
        (
            pro(),
            with(Effort::Unspecified, 50),
            json!({"includeThoughts": true, "thinkingBudget": 128}),
        ),
        (
            pro(),
            with(Effort::High, 40_000),
            json!({"includeThoughts": true, "thinkingBudget": 32_768}),
        ),
        // Xhigh, which Gemini has no level for: each family's largest budget.
        (
            pro(),
            with(Effort::Xhigh, 0),
            json!({"includeThoughts": true, "thinkingBudget": 32_768}),
        ),
        (
            flash(),
            with(Effort::Xhigh, 0),
            json!({"includeThoughts": true, "thinkingBudget": 24_576}),
        ),
        (
            gemini_3(),
            with(Effort::Xhigh, 0),
            json!({"includeThoughts": true, "thinkingLevel": "high"}),
        ),
        (
            flash_lite(),
            with(Effort::Minimal, 0),
            json!({"includeThoughts": true, "thinkingBudget": 512}),
        ),
        (
            flash_lite(),
            with(Effort::Unspecified, 100),
            json!({"includeThoughts": true, "thinkingBudget": 512}),
        ),
        (
            flash_lite(),
            with(Effort::None, 0),
            json!({"thinkingBudget": 0}),
        ),
        // Gemini 3 takes a level; a bare budget passes through.
        (
            gemini_3(),
            with(Effort::Low, 0),
            json!({"includeThoughts": true, "thinkingLevel": "low"}),
        ),
        (
            gemini_3(),
            with(Effort::None, 0),
            json!({"includeThoughts": true, "thinkingLevel": "low"}),
        ),
        (
            gemini_3(),
            with(Effort::Medium, 0),
            json!({"includeThoughts": true, "thinkingLevel": "high"}),
        ),
        (
            gemini_3(),
            with(Effort::Unspecified, 2048),
            json!({"includeThoughts": true, "thinkingBudget": 2048}),
        ),
        (
            gemini_3(),
            generation(vec![user(vec![text("Hi")])]),
            json!({"includeThoughts": true}),
        ),
        // Not a reasoning model: Gemini 2.0 rejects `thinkingConfig`.
        (flash_2_0(), with(Effort::High, 0), Value::Null),
    ];
    for (m, g, want) in cases {
        assert_eq!(thinking(&g, &m), want, "{} {:?}", m.name, g.reasoning);
    }
    assert_eq!(
        Family::of("gemini-2.5-flash-lite-preview-06-17"),
        Family::FlashLite25
    );
    assert_eq!(
        Family::of("gemini-2.5-flash-preview-09-2025"),
        Family::Flash25
    );
    assert_eq!(Family::of("gemini-2.0-flash"), Family::Other);
}

#[test]
fn sampling_parameters_and_their_limits() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.sampling = Some(pb::Sampling {
        temperature: Some(2.5),
        top_p: Some(0.9),
        top_k: Some(40),
        max_output_tokens: Some(100_000),
        stop_sequences: vec!["END".into(), String::new()],
        seed: Some(42),
    });
    assert_eq!(
        body(&g, &flash_2_0())["generationConfig"],
        json!({
            "temperature": 2.0,
            "topP": 0.9,
            "topK": 40,
            "maxOutputTokens": 8192,
            "stopSequences": ["END"],
            "seed": 42,
        })
    );
    let mut too_many = g.clone();
    if let Some(s) = too_many.sampling.as_mut() {
        s.stop_sequences = (0..6).map(|i| format!("s{i}")).collect();
    }
    assert_eq!(
        error(&too_many, &flash()).field,
        "generation.sampling.stop_sequences"
    );
    let mut big_seed = g;
    if let Some(s) = big_seed.sampling.as_mut() {
        s.seed = Some(i64::from(i32::MAX) + 1);
    }
    assert_eq!(error(&big_seed, &flash()).field, "generation.sampling.seed");
}

#[test]
fn tool_choice_modes() {
    use pb::tool_choice::Mode;
    let with = |mode: Mode, name: &str| {
        let mut g = generation(vec![user(vec![text("Hi")])]);
        g.tools = vec![weather_tool()];
        g.tool_choice = Some(pb::ToolChoice {
            mode: mode.into(),
            tool_name: name.into(),
            ..Default::default()
        });
        g
    };
    for (mode, want) in [
        (Mode::Unspecified, Value::Null),
        (
            Mode::Auto,
            json!({"functionCallingConfig": {"mode": "AUTO"}}),
        ),
        (
            Mode::None,
            json!({"functionCallingConfig": {"mode": "NONE"}}),
        ),
        (
            Mode::Required,
            json!({"functionCallingConfig": {"mode": "ANY"}}),
        ),
    ] {
        assert_eq!(
            body(&with(mode, ""), &flash_2_0())["toolConfig"],
            want,
            "{mode:?}"
        );
    }
    assert_eq!(
        body(&with(Mode::Tool, "get_weather"), &flash_2_0())["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}})
    );
    assert_eq!(
        error(&with(Mode::Tool, "nope"), &flash_2_0()).field,
        "generation.tool_choice.tool_name"
    );
    let mut no_tools = with(Mode::Required, "");
    no_tools.tools.clear();
    assert_eq!(
        error(&no_tools, &flash_2_0()).field,
        "generation.tool_choice.mode"
    );
}

#[test]
fn tools_without_properties_have_no_parameters_and_bad_names_or_schemas_are_refused() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.tools = vec![
        pb::Tool {
            name: "now".into(),
            description: String::new(),
            input_schema_json: String::new(),
            ..Default::default()
        },
        pb::Tool {
            name: "ping".into(),
            description: "Ping".into(),
            input_schema_json: r#"{"type":"object","properties":{},"additionalProperties":false}"#
                .into(),
            ..Default::default()
        },
    ];
    assert_eq!(
        body(&g, &flash_2_0())["tools"],
        json!([{"functionDeclarations": [{"name": "now"}, {"name": "ping", "description": "Ping"}]}])
    );
    let mut bad_name = g.clone();
    bad_name.tools[1].name = "1st-tool".into();
    assert_eq!(
        error(&bad_name, &flash_2_0()).field,
        "generation.tools[1].name"
    );
    let mut recursive = g;
    recursive.tools[1].input_schema_json =
        r##"{"type":"object","properties":{"n":{"$ref":"#"}}}"##.into();
    let e = error(&recursive, &flash_2_0());
    assert_eq!(e.field, "generation.tools[1].input_schema_json");
    assert!(e.message.contains("recursive"), "{}", e.message);
}

#[test]
fn json_output_is_a_lowered_response_schema_and_refused_with_tools_before_gemini_3() {
    let mut g = generation(vec![user(vec![text("Extract the city.")])]);
    g.output_format = Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema.into(),
        name: "city".into(),
        schema_json: r#"{"type":"object","properties":{"city":{"type":"string"},"country":{"type":["string","null"]}},"required":["city"],"additionalProperties":false}"#.into(),
        ..Default::default()
    });
    assert_eq!(
        body(&g, &flash_2_0())["generationConfig"],
        json!({
            "responseMimeType": "application/json",
            "responseSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "country": {"type": "string", "nullable": true}},
                "required": ["city"],
            },
        })
    );
    g.tools = vec![weather_tool()];
    assert_eq!(error(&g, &flash()).field, "generation.output_format");
    assert_eq!(
        body(&g, &gemini_3())["generationConfig"]["responseMimeType"],
        "application/json"
    );
}

#[test]
fn provider_options_merge_deeply_and_cannot_replace_what_the_gateway_builds() {
    let mut g = generation(vec![user(vec![text("Hi")])]);
    g.sampling = Some(pb::Sampling {
        temperature: Some(0.2),
        ..Default::default()
    });
    g.provider_options_json = r#"{"anthropic":{"metadata":{}},"gemini":{"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],"generationConfig":{"responseModalities":["TEXT"],"thinkingConfig":{"thinkingBudget":2048}}}}"#.into();
    assert_eq!(
        body(&g, &flash()),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "generationConfig": {
                "temperature": 0.2,
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 2048},
                "responseModalities": ["TEXT"],
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        })
    );
    for key in [
        "contents",
        "systemInstruction",
        "system_instruction",
        "tools",
        "toolConfig",
        "tool_config",
    ] {
        g.provider_options_json = format!(r#"{{"gemini":{{"{key}":[]}}}}"#);
        let e = error(&g, &flash());
        assert_eq!(e.field, "generation.provider_options_json");
        assert!(e.message.contains(key), "{}", e.message);
    }
    // A cached content resource, alone it is fine; with system sections Gemini would refuse the request.
    g.provider_options_json = r#"{"gemini":{"cachedContent":"cachedContents/abc123"}}"#.into();
    assert_eq!(body(&g, &flash())["cachedContent"], "cachedContents/abc123");
    g.system = vec!["Be brief.".into()];
    assert!(error(&g, &flash()).message.contains("cachedContent"));
}

#[test]
fn malformed_requests_name_their_field() {
    let g = generation(vec![user(vec![text("Hi")])]);
    let mut bad_model = flash();
    bad_model.name = "../tunedModels/x".into();
    assert_eq!(error(&g, &bad_model).field, "generation.model");

    let unspecified = generation(vec![message(pb::Role::Unspecified, vec![text("Hi")])]);
    assert_eq!(
        error(&unspecified, &flash()).field,
        "generation.messages[0].role"
    );

    let wrong_place = generation(vec![
        user(vec![text("Hi")]),
        assistant(vec![result("a", "t", "x", false)]),
    ]);
    assert_eq!(
        error(&wrong_place, &flash()).field,
        "generation.messages[1].parts[0]"
    );

    let bad_args = generation(vec![
        user(vec![text("Hi")]),
        assistant(vec![call("a", "t", "[1]", None)]),
    ]);
    assert_eq!(
        error(&bad_args, &flash()).field,
        "generation.messages[1].parts[0].tool_call.input_json"
    );

    let nameless = generation(vec![
        user(vec![text("Hi")]),
        tool(vec![result("unknown", "", "x", false)]),
    ]);
    assert_eq!(
        error(&nameless, &flash()).field,
        "generation.messages[1].parts[0].tool_result.tool_name"
    );

    let mut no_vision = flash();
    no_vision.capabilities.vision = false;
    let image = generation(vec![user(vec![file("image/png", Source::Data(vec![1]))])]);
    assert_eq!(
        error(&image, &no_vision).field,
        "generation.messages[0].parts[0].file"
    );
}
