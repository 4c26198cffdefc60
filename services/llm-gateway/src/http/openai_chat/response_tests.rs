use super::*;
use pb::stream_response::Event as E;

fn ev(e: E) -> pb::StreamResponse {
    pb::StreamResponse { event: Some(e) }
}

fn frames(events: Vec<E>, include_usage: bool) -> Vec<Value> {
    let mut enc = ChunkEncoder::new(
        "chatcmpl-1".into(),
        7,
        "openai/gpt-4o".into(),
        include_usage,
        None,
    );
    let mut out = BytesMut::new();
    for e in events {
        enc.push(ev(e), &mut out);
    }
    let text = String::from_utf8(out.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let data = f.strip_prefix("data: ").unwrap();
            if data == "[DONE]" {
                Value::from("[DONE]")
            } else {
                serde_json::from_str(data).unwrap()
            }
        })
        .collect()
}

fn finish(reason: pb::FinishReason) -> E {
    E::StepFinish(pb::StepFinish {
        finish_reason: reason as i32,
        usage: Some(pb::Usage {
            input_tokens: 10,
            cache_read_tokens: 90,
            output_tokens: 5,
            reasoning_tokens: 3,
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn text_and_reasoning_stream_as_deltas_then_finish_usage_and_done() {
    let f = frames(
        vec![
            E::StreamStart(pb::StreamStart::default()),
            E::StepStart(pb::StepStart {}),
            E::ReasoningDelta(pb::ReasoningDelta {
                id: "r".into(),
                delta: "hmm".into(),
            }),
            E::TextDelta(pb::TextDelta {
                id: "t".into(),
                delta: "Hi".into(),
            }),
            finish(pb::FinishReason::Stop),
        ],
        true,
    );
    let deltas: Vec<&Value> = f
        .iter()
        .filter_map(|c| c["choices"].get(0).map(|ch| &ch["delta"]))
        .collect();
    assert_eq!(
        deltas,
        [
            &json!({"role": "assistant", "content": ""}),
            &json!({"reasoning_content": "hmm"}),
            &json!({"content": "Hi"}),
            &json!({})
        ]
    );
    assert_eq!(f[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(f[3]["object"], "chat.completion.chunk");
    assert_eq!(f[4]["choices"], json!([]));
    assert_eq!(
        f[4]["usage"],
        json!({"prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108,
                   "prompt_tokens_details": {"cached_tokens": 90}, "completion_tokens_details": {"reasoning_tokens": 3}})
    );
    assert_eq!(f[5], "[DONE]");
}

#[test]
fn parallel_calls_stream_with_one_index_each_and_complete_whole() {
    let f = frames(
        vec![
            E::ToolInputStart(pb::ToolInputStart {
                call_id: "a".into(),
                tool_name: "get_weather".into(),
            }),
            E::ToolInputDelta(pb::ToolInputDelta {
                call_id: "a".into(),
                delta: "{\"city\":".into(),
            }),
            E::ToolInputDelta(pb::ToolInputDelta {
                call_id: "a".into(),
                delta: "\"Paris\"}".into(),
            }),
            E::ToolCall(pb::ToolCall {
                call_id: "a".into(),
                tool_name: "get_weather".into(),
                input_json: "{\"city\":\"Paris\"}".into(),
                ..Default::default()
            }),
            E::ToolInputStart(pb::ToolInputStart {
                call_id: "b".into(),
                tool_name: "get_time".into(),
            }),
            E::ToolCall(pb::ToolCall {
                call_id: "b".into(),
                tool_name: "get_time".into(),
                input_json: "{}".into(),
                ..Default::default()
            }),
            E::ToolCall(pb::ToolCall {
                call_id: "c".into(),
                tool_name: "now".into(),
                input_json: "{\"x\":1}".into(),
                ..Default::default()
            }),
            finish(pb::FinishReason::ToolCalls),
        ],
        false,
    );
    let calls: Vec<&Value> = f
        .iter()
        .filter_map(|c| c["choices"].get(0)?["delta"].get("tool_calls"))
        .collect();
    assert_eq!(
        calls[0][0],
        json!({"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather", "arguments": ""}})
    );
    assert_eq!(
        calls[1][0],
        json!({"index": 0, "function": {"arguments": "{\"city\":"}})
    );
    assert_eq!(
        calls[2][0],
        json!({"index": 0, "function": {"arguments": "\"Paris\"}"}})
    );
    assert_eq!(calls[3][0]["index"], 1);
    assert_eq!(
        calls[4][0],
        json!({"index": 1, "function": {"arguments": "{}"}})
    );
    assert_eq!(
        calls[5][0],
        json!({"index": 2, "id": "c", "type": "function", "function": {"name": "now", "arguments": "{\"x\":1}"}})
    );
    assert_eq!(calls.len(), 6);
    assert_eq!(f[f.len() - 2]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(f[f.len() - 1], "[DONE]");
}

#[test]
fn an_error_mid_stream_is_an_error_frame_without_done() {
    let f = frames(
        vec![
            E::TextDelta(pb::TextDelta {
                id: "t".into(),
                delta: "Hi".into(),
            }),
            E::Error(pb::Error {
                kind: pb::ErrorKind::Overloaded as i32,
                message: "busy".into(),
                ..Default::default()
            }),
        ],
        true,
    );
    assert_eq!(
        f[1],
        json!({"error": {"message": "busy", "type": "server_error", "param": null, "code": "overloaded"}})
    );
    assert_eq!(f.len(), 2);
}

#[test]
fn a_collected_reply_is_one_completion() {
    use pb::output_part::Kind;
    let reply = pb::GenerateResponse {
        output: vec![
            pb::OutputPart {
                kind: Some(Kind::Reasoning(pb::ReasoningPart {
                    text: "think".into(),
                    provider_metadata: None,
                })),
            },
            pb::OutputPart {
                kind: Some(Kind::ToolCall(pb::ToolCallPart {
                    call_id: "a".into(),
                    tool_name: "t".into(),
                    input_json: "{}".into(),
                    provider_metadata: None,
                })),
            },
        ],
        finish: Some(pb::StepFinish {
            finish_reason: pb::FinishReason::ToolCalls as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    let c = completion("chatcmpl-1", 7, "m", &reply);
    let m = &c["choices"][0]["message"];
    assert_eq!(m["content"], Value::Null);
    assert_eq!(m["reasoning_content"], "think");
    assert_eq!(
        m["tool_calls"][0],
        json!({"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}})
    );
    assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(c["object"], "chat.completion");
}
