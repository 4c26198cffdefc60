use super::*;
use pb::stream_response::Event as E;

fn events(events: Vec<E>) -> Vec<(String, Value)> {
    let mut enc = EventEncoder::new("msg_1".into(), "anthropic/claude-sonnet-4-5".into(), None);
    let mut out = BytesMut::new();
    for e in events {
        enc.push(pb::StreamResponse { event: Some(e) }, &mut out);
    }
    String::from_utf8(out.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, data) = f
                .strip_prefix("event: ")
                .unwrap()
                .split_once("\ndata: ")
                .unwrap();
            (name.to_string(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

fn signed(id: &str, json: &str) -> E {
    E::ReasoningEnd(pb::ReasoningEnd {
        id: id.into(),
        provider_metadata: Some(pb::ProviderMetadata {
            protocol: "anthropic".into(),
            model: "m".into(),
            json: json.into(),
        }),
    })
}

#[test]
fn signed_thinking_text_and_a_tool_call_stream_as_content_blocks() {
    let ev = events(vec![
        E::StepStart(pb::StepStart {}),
        E::ReasoningStart(pb::ReasoningStart { id: "0".into() }),
        E::ReasoningDelta(pb::ReasoningDelta {
            id: "0".into(),
            delta: "hmm".into(),
        }),
        signed("0", r#"{"signature":"sig-1"}"#),
        E::TextStart(pb::TextStart { id: "1".into() }),
        E::TextDelta(pb::TextDelta {
            id: "1".into(),
            delta: "Hi".into(),
        }),
        E::TextEnd(pb::TextEnd { id: "1".into() }),
        E::ToolInputStart(pb::ToolInputStart {
            call_id: "toolu_1".into(),
            tool_name: "get_weather".into(),
        }),
        E::ToolInputDelta(pb::ToolInputDelta {
            call_id: "toolu_1".into(),
            delta: "{\"city\":".into(),
        }),
        E::ToolInputEnd(pb::ToolInputEnd {
            call_id: "toolu_1".into(),
        }),
        E::ToolCall(pb::ToolCall {
            call_id: "toolu_1".into(),
            tool_name: "get_weather".into(),
            input_json: "{\"city\":\"Paris\"}".into(),
            ..Default::default()
        }),
        E::StepFinish(pb::StepFinish {
            finish_reason: pb::FinishReason::ToolCalls as i32,
            usage: Some(pb::Usage {
                input_tokens: 5,
                cache_read_tokens: 100,
                cache_write_tokens: 20,
                output_tokens: 7,
                reasoning_tokens: 3,
                total_tokens: 135,
            }),
            ..Default::default()
        }),
    ]);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(
        ev[1].1["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(
        ev[3].1["delta"],
        json!({"type": "signature_delta", "signature": "sig-1"})
    );
    assert_eq!(ev[5].1["index"], 1);
    assert_eq!(
        ev[8].1["content_block"],
        json!({"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}})
    );
    assert_eq!(
        ev[10].1["delta"],
        json!({"type": "input_json_delta", "partial_json": "\"Paris\"}"})
    );
    assert_eq!(ev[12].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(
        ev[12].1["usage"],
        json!({"input_tokens": 5, "output_tokens": 10, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 100})
    );
}

#[test]
fn redacted_thinking_is_one_whole_block() {
    let ev = events(vec![
        E::ReasoningStart(pb::ReasoningStart { id: "0".into() }),
        signed("0", r#"{"redacted_data":"opaque"}"#),
    ]);
    assert_eq!(
        ev[0].1["content_block"],
        json!({"type": "redacted_thinking", "data": "opaque"})
    );
    assert_eq!(ev[1].0, "content_block_stop");
    assert_eq!(ev.len(), 2);
}

#[test]
fn an_error_mid_stream_is_an_error_event() {
    let ev = events(vec![E::Error(pb::Error {
        kind: pb::ErrorKind::Overloaded as i32,
        message: "busy".into(),
        ..Default::default()
    })]);
    assert_eq!(
        ev[0],
        (
            "error".to_string(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        )
    );
}

#[test]
fn a_collected_reply_is_one_message() {
    use pb::output_part::Kind;
    let reply = pb::GenerateResponse {
        output: vec![
            pb::OutputPart {
                kind: Some(Kind::Reasoning(pb::ReasoningPart {
                    text: "think".into(),
                    provider_metadata: Some(pb::ProviderMetadata {
                        protocol: "anthropic".into(),
                        model: "m".into(),
                        json: r#"{"signature":"s"}"#.into(),
                    }),
                })),
            },
            pb::OutputPart {
                kind: Some(Kind::Text(pb::TextPart { text: "Hi".into() })),
            },
            pb::OutputPart {
                kind: Some(Kind::ToolCall(pb::ToolCallPart {
                    call_id: "toolu_1".into(),
                    tool_name: "t".into(),
                    input_json: "{\"a\":1}".into(),
                    provider_metadata: None,
                })),
            },
        ],
        finish: Some(pb::StepFinish {
            finish_reason: pb::FinishReason::Stop as i32,
            raw_finish_reason: "stop_sequence".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = message("msg_1", "m", &reply);
    assert_eq!(
        m["content"],
        json!([
            {"type": "thinking", "thinking": "think", "signature": "s"},
            {"type": "text", "text": "Hi"},
            {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}}
        ])
    );
    assert_eq!(m["stop_reason"], "stop_sequence");
    assert_eq!(m["type"], "message");
}
