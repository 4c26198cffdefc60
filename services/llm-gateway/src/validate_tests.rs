//! One test per validation rule, each asserting the status code and the field it names.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use llm_proto::gateway as pb;
use tonic::Code;
use tonic_types::StatusExt;

use super::*;

fn user(text: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::User as i32,
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text(pb::TextPart { text: text.into() })),
        }],
    }
}

fn call(id: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::Assistant as i32,
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::ToolCall(pb::ToolCallPart {
                call_id: id.into(),
                tool_name: "get_weather".into(),
                input_json: "{}".into(),
                provider_metadata: None,
            })),
        }],
    }
}

fn result(id: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::Tool as i32,
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::ToolResult(pb::ToolResultPart {
                call_id: id.into(),
                tool_name: "get_weather".into(),
                output: "sunny".into(),
                is_error: false,
            })),
        }],
    }
}

fn base() -> pb::Generation {
    pb::Generation {
        model: "openai/gpt-4o".into(),
        messages: vec![user("hi")],
        ..Default::default()
    }
}

fn tool(name: &str) -> pb::Tool {
    pb::Tool {
        name: name.into(),
        description: String::new(),
        input_schema_json: r#"{"type":"object"}"#.into(),
        ..Default::default()
    }
}

/// The code and the `BadRequest` field (or `ErrorInfo.metadata.field`) of a refusal.
fn refused(g: &pb::Generation) -> (Code, String) {
    let status = validate(Some(g), &Limits::default()).expect_err("refused");
    let details = status.get_error_details();
    let field = details
        .bad_request()
        .and_then(|b| b.field_violations.first().map(|v| v.field.clone()))
        .or_else(|| {
            details
                .error_info()
                .and_then(|i| i.metadata.get("field").cloned())
        })
        .unwrap_or_default();
    (status.code(), field)
}

fn assert_invalid(g: &pb::Generation, field: &str) {
    assert_eq!(refused(g), (Code::InvalidArgument, field.to_string()));
}

#[test]
fn a_plain_request_passes() {
    let mut g = base();
    g.tools.push(tool("get_weather"));
    g.messages.extend([call("c1"), result("c1")]);
    validate(Some(&g), &Limits::default()).unwrap();
}

#[test]
fn a_tool_schema_must_be_one_json_object() {
    let with_schema = |schema: &str| {
        let mut g = base();
        let mut t = tool("t");
        t.input_schema_json = schema.into();
        g.tools.push(t);
        g
    };
    for good in [
        r#"{"type":"object"}"#,
        " \n\t{}",
        r#"{"a":[1,{"b":null}]} "#,
    ] {
        validate(Some(&with_schema(good)), &Limits::default()).unwrap();
    }
    for bad in [
        "",
        "[]",
        "\"object\"",
        "null",
        "{",
        "{} {}",
        "{}x",
        r#"{"a":}"#,
        "\u{a0}{}",
    ] {
        assert_invalid(&with_schema(bad), "generation.tools[0].input_schema_json");
    }
}

#[test]
fn hop_by_hop_headers_are_refused_by_name() {
    for name in [
        "te",
        "upgrade",
        "expect",
        "keep-alive",
        "Proxy-Connection",
        "trailer",
    ] {
        let mut g = base();
        g.extra_headers.insert(name.into(), "x".into());
        assert_invalid(&g, &format!("generation.extra_headers[{name}]"));
    }
}

#[test]
fn crlf_in_a_file_url_is_refused() {
    let mut g = base();
    g.messages[0].parts.push(pb::Part {
        kind: Some(pb::part::Kind::File(pb::FilePart {
            media_type: "image/png".into(),
            filename: String::new(),
            source: Some(pb::file_part::Source::Url(
                "https://example.com/a.png\r\nx-evil: 1".into(),
            )),
        })),
    });
    assert_invalid(&g, "generation.messages[0].parts[1].file.url");
}

#[test]
fn control_characters_in_a_media_type_are_refused() {
    for media in ["image/png\r\nx: y", "image/png\u{0}", "imagepng", "image/"] {
        let mut g = base();
        g.messages[0].parts.push(pb::Part {
            kind: Some(pb::part::Kind::File(pb::FilePart {
                media_type: media.into(),
                filename: String::new(),
                source: Some(pb::file_part::Source::Data(vec![1, 2, 3])),
            })),
        });
        assert_invalid(&g, "generation.messages[0].parts[1].file.media_type");
    }
    assert!(valid_media_type("text/plain; charset=utf-8"));
    assert!(valid_media_type("application/vnd.api+json"));
}

#[test]
fn out_of_range_enums_are_refused_by_field() {
    let mut g = base();
    g.messages[0].role = 99;
    assert_invalid(&g, "generation.messages[0].role");

    let mut g = base();
    g.tool_choice = Some(pb::ToolChoice {
        mode: 99,
        tool_name: String::new(),
        ..Default::default()
    });
    assert_invalid(&g, "generation.tool_choice.mode");

    let mut g = base();
    g.output_format = Some(pb::OutputFormat {
        r#type: 99,
        ..Default::default()
    });
    assert_invalid(&g, "generation.output_format.type");

    let mut g = base();
    g.reasoning = Some(pb::Reasoning {
        effort: 99,
        budget_tokens: 0,
    });
    assert_invalid(&g, "generation.reasoning.effort");
}

#[test]
fn an_output_format_field_its_type_cannot_use_is_refused() {
    use pb::output_format::Type;
    let format = |ty: Type, schema: &str, strict: bool| {
        let mut g = base();
        g.output_format = Some(pb::OutputFormat {
            r#type: ty.into(),
            schema_json: schema.into(),
            strict,
            ..Default::default()
        });
        g
    };
    assert_invalid(
        &format(Type::JsonObject, r#"{"type":"object"}"#, false),
        "generation.output_format.schema_json",
    );
    assert_invalid(
        &format(Type::JsonObject, "", true),
        "generation.output_format.strict",
    );
    assert_invalid(
        &format(Type::Text, "", true),
        "generation.output_format.strict",
    );
    let limits = Limits::default();
    for g in [
        format(Type::JsonObject, "", false),
        format(Type::JsonSchema, r#"{"type":"object"}"#, true),
    ] {
        assert!(validate(Some(&g), &limits).is_ok());
    }
}

#[test]
fn duplicate_tool_call_ids_are_refused() {
    let mut g = base();
    g.tools.push(tool("get_weather"));
    g.messages.extend([call("c1"), result("c1"), call("c1")]);
    assert_invalid(&g, "generation.messages[3].parts[0].tool_call.call_id");
}

#[test]
fn a_tool_result_answering_no_earlier_call_is_refused() {
    let mut g = base();
    g.messages.extend([call("c1"), result("c2")]);
    assert_invalid(&g, "generation.messages[2].parts[0].tool_result.call_id");
    // A result before its call is an orphan too.
    let mut g = base();
    g.messages.extend([result("c1"), call("c1")]);
    assert_invalid(&g, "generation.messages[1].parts[0].tool_result.call_id");
}

#[test]
fn model_ids_with_control_characters_are_refused() {
    for c in ['\r', '\n', '\t', '\0', '\u{7f}', '\u{85}', '\u{1b}'] {
        let mut g = base();
        g.model = format!("openai/gpt-4o{c}x");
        assert_invalid(&g, "generation.model");
        let mut g = base();
        g.fallback_models = vec![format!("anthropic/{c}claude")];
        assert_invalid(&g, "generation.fallback_models[0]");
    }
    // Spaces, `@`, `:` and unicode are a provider's business (refused or encoded where a name enters a URL).
    let mut g = base();
    g.model = "bedrock/a b@c:0/é".into();
    validate(Some(&g), &Limits::default()).unwrap();
}

#[test]
fn oversized_ids_are_refused_and_never_echoed_whole() {
    let mut g = base();
    g.model = format!("openai/{}", "m".repeat(10_000));
    let status = validate(Some(&g), &Limits::default()).unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().len() < 1024, "{}", status.message().len());

    let mut g = base();
    g.context = Some(pb::RequestContext {
        session_id: "s".repeat(100_000),
        ..Default::default()
    });
    assert_invalid(&g, "generation.context.session_id");

    // A 100 000-byte header name is echoed cut.
    let mut g = base();
    g.extra_headers.insert("x".repeat(100_000), "v".into());
    let status = validate(Some(&g), &Limits::default()).unwrap_err();
    assert!(status.message().len() < 1024);
    assert!(status.details().len() < 4096, "{}", status.details().len());
}

#[test]
fn too_many_tools_messages_parts_or_schema_bytes_are_resource_exhausted() {
    let limits = Limits::default();
    let mut g = base();
    g.tools = (0..=limits.max_tools)
        .map(|i| tool(&format!("t{i}")))
        .collect();
    assert_eq!(
        refused(&g),
        (Code::ResourceExhausted, "generation.tools".into())
    );

    let mut g = base();
    g.tools = vec![pb::Tool {
        input_schema_json: format!(
            r#"{{"description":"{}"}}"#,
            "d".repeat(limits.max_tool_schema_bytes)
        ),
        ..tool("big")
    }];
    assert_eq!(
        refused(&g),
        (Code::ResourceExhausted, "generation.tools".into())
    );

    let mut g = base();
    g.messages = (0..=limits.max_messages).map(|_| user("x")).collect();
    assert_eq!(
        refused(&g),
        (Code::ResourceExhausted, "generation.messages".into())
    );

    let mut g = base();
    g.messages[0].parts = (0..=limits.max_parts)
        .map(|_| user("x").parts.remove(0))
        .collect();
    assert_eq!(
        refused(&g),
        (Code::ResourceExhausted, "generation.messages".into())
    );
}

#[test]
fn validation_is_linear_in_the_number_of_tools() {
    // 50 000 distinct tools under a limit that admits them: the duplicate check used to compare every pair.
    let limits = Limits {
        max_tools: 100_000,
        ..Limits::default()
    };
    let mut g = base();
    g.tools = (0..50_000).map(|i| tool(&format!("t{i}"))).collect();
    let started = Instant::now();
    validate(Some(&g), &limits).unwrap();
    // Generous: a quadratic check takes tens of seconds here; the linear one a few milliseconds.
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
}

fn model(max_output_tokens: u64) -> ModelInfo {
    let config = crate::config::Config::parse(
        "[providers.anthropic]\nprotocol = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\n",
    )
    .unwrap();
    let config = crate::config::Config::from_file(
        config,
        &[("GATEWAY_AUTH_TOKENS", "0123456789abcdef0123")],
    )
    .unwrap();
    let mut m = config
        .catalog
        .get("anthropic/claude-sonnet-4-5")
        .cloned()
        .unwrap();
    m.max_output_tokens = max_output_tokens;
    m
}

#[test]
fn max_output_tokens_above_the_models_limit_is_refused() {
    let mut g = base();
    g.sampling = Some(pb::Sampling {
        max_output_tokens: Some(u32::MAX),
        ..Default::default()
    });
    let e = model_rules(&g, &model(64_000), 0).unwrap_err();
    assert_eq!(e.field, "generation.sampling.max_output_tokens");
    g.sampling = Some(pb::Sampling {
        max_output_tokens: Some(64_000),
        ..Default::default()
    });
    model_rules(&g, &model(64_000), 0).unwrap();
}

#[test]
fn a_thinking_budget_below_the_providers_minimum_is_refused() {
    let mut g = base();
    g.reasoning = Some(pb::Reasoning {
        effort: 0,
        budget_tokens: 1,
    });
    let e = model_rules(&g, &model(64_000), 1024).unwrap_err();
    assert_eq!(e.field, "generation.reasoning.budget_tokens");
    model_rules(&g, &model(64_000), 0).unwrap();
}

#[test]
fn a_model_name_needs_no_provider_but_no_bidi_or_control_characters() {
    for model in ["gpt-4o", "openai/gpt-4o", "my alias"] {
        let mut g = base();
        g.model = model.into();
        validate(Some(&g), &Limits::default()).unwrap();
    }
    for model in ["gpt\u{202E}o4-", "gpt\u{2066}x", "gpt\n4o", ""] {
        let mut g = base();
        g.model = model.into();
        assert_invalid(&g, "generation.model");
    }
}

/// What no provider would serve is refused by field before any provider sees it: a forced tool call with no tools,
/// a message without parts, an image without bytes, reasoning metadata that is not the JSON the gateway sent.
#[test]
fn requests_no_provider_could_serve_are_refused_by_field() {
    let mut g = base();
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Required as i32,
        ..Default::default()
    });
    assert_invalid(&g, "generation.tool_choice.mode");
    g.tools.push(tool("get_weather"));
    validate(Some(&g), &Limits::default()).unwrap();

    let mut g = base();
    g.messages.push(pb::Message {
        role: pb::Role::Assistant as i32,
        parts: Vec::new(),
    });
    assert_invalid(&g, "generation.messages[1].parts");

    let mut g = base();
    g.messages[0].parts.push(pb::Part {
        kind: Some(pb::part::Kind::File(pb::FilePart {
            media_type: "image/png".into(),
            source: Some(pb::file_part::Source::Data(Vec::new())),
            ..Default::default()
        })),
    });
    assert_invalid(&g, "generation.messages[0].parts[1].file.data");

    let mut g = base();
    let reasoning = |json: &str| pb::Message {
        role: pb::Role::Assistant as i32,
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
                text: "thinking".into(),
                provider_metadata: Some(pb::ProviderMetadata {
                    protocol: "anthropic".into(),
                    model: "anthropic/claude-sonnet-4-5".into(),
                    json: json.into(),
                }),
            })),
        }],
    };
    g.messages.push(reasoning(r#"{"signature":"abc"}"#));
    validate(Some(&g), &Limits::default()).unwrap();
    g.messages[1] = reasoning("{not json");
    assert_invalid(
        &g,
        "generation.messages[1].parts[0].reasoning.provider_metadata.json",
    );
}

/// Stop sequences and extra headers have fixed limits: too many or too large is RESOURCE_EXHAUSTED naming the
/// field; an empty stop sequence is invalid.
#[test]
fn stop_sequences_and_extra_headers_are_bounded() {
    let mut g = base();
    g.sampling = Some(pb::Sampling {
        stop_sequences: vec!["END".into(); MAX_STOP_SEQUENCES + 1],
        ..Default::default()
    });
    assert_eq!(
        refused(&g),
        (
            Code::ResourceExhausted,
            "generation.sampling.stop_sequences".into()
        )
    );
    g.sampling = Some(pb::Sampling {
        stop_sequences: vec!["END".into(), String::new()],
        ..Default::default()
    });
    assert_invalid(&g, "generation.sampling.stop_sequences[1]");

    let mut g = base();
    g.extra_headers = (0..=MAX_EXTRA_HEADERS)
        .map(|i| (format!("x-h{i}"), "v".into()))
        .collect();
    assert_eq!(
        refused(&g),
        (Code::ResourceExhausted, "generation.extra_headers".into())
    );
    let mut g = base();
    g.extra_headers = [("x-big".to_string(), "v".repeat(1024 * 1024))].into();
    assert_eq!(
        refused(&g),
        (
            Code::ResourceExhausted,
            "generation.extra_headers[x-big]".into()
        )
    );
    g.extra_headers = [("x-fine".to_string(), "v".repeat(4096))].into();
    validate(Some(&g), &Limits::default()).unwrap();
}
