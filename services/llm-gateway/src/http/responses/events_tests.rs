use pb::stream_response::Event as E;

use super::*;

fn ev(e: E) -> pb::StreamResponse {
    pb::StreamResponse { event: Some(e) }
}

fn finish(reason: pb::FinishReason) -> E {
    E::StepFinish(pb::StepFinish {
        finish_reason: reason as i32,
        usage: Some(pb::Usage {
            input_tokens: 3,
            output_tokens: 4,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The `(event:, data)` of every frame the encoder writes for `events`.
fn encode(events: Vec<E>) -> Vec<(String, Value)> {
    let head = Head {
        id: "resp_1".into(),
        created_at: 1,
        model: "gpt-4o".into(),
        echo: serde_json::Map::new(),
    };
    let mut enc = EventEncoder::new(head, Some(Protocol::Anthropic));
    let mut out = BytesMut::new();
    for e in events {
        enc.push(ev(e), &mut out);
    }
    let text = String::from_utf8(out.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (event, data) = f.split_once('\n').unwrap();
            let event = event.strip_prefix("event: ").unwrap().to_string();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], event.as_str(), "event: equals the type");
            (event, data)
        })
        .collect()
}

fn types(frames: &[(String, Value)]) -> Vec<&str> {
    frames.iter().map(|(t, _)| t.as_str()).collect()
}

fn sequence_is_contiguous(frames: &[(String, Value)]) {
    let seq: Vec<u64> = frames
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(seq, (0..frames.len() as u64).collect::<Vec<_>>());
}

#[test]
fn text_streams_as_the_sdks_parse_it() {
    let frames = encode(vec![
        E::StreamStart(pb::StreamStart::default()),
        E::StepStart(pb::StepStart {}),
        E::TextStart(pb::TextStart { id: "0".into() }),
        E::TextDelta(pb::TextDelta {
            id: "0".into(),
            delta: "Hel".into(),
        }),
        E::TextDelta(pb::TextDelta {
            id: "0".into(),
            delta: "lo".into(),
        }),
        E::TextEnd(pb::TextEnd { id: "0".into() }),
        finish(pb::FinishReason::Stop),
    ]);
    sequence_is_contiguous(&frames);
    assert_eq!(
        types(&frames),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let delta = &frames[4].1;
    assert_eq!(
        (
            delta["output_index"].as_u64(),
            delta["content_index"].as_u64()
        ),
        (Some(0), Some(0))
    );
    let done = &frames[9].1["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(done["usage"]["output_tokens"], 4);
    assert_eq!(done["status"], "completed");
    assert_eq!(frames[8].1["item"]["id"], frames[2].1["item"]["id"]);
}

#[test]
fn calls_stream_their_arguments_and_end_with_the_final_ones() {
    let call = |id: &str, input: &str| {
        E::ToolCall(pb::ToolCall {
            call_id: id.into(),
            tool_name: "w".into(),
            input_json: input.into(),
            provider_metadata: None,
        })
    };
    let frames = encode(vec![
        E::StepStart(pb::StepStart {}),
        E::ToolInputStart(pb::ToolInputStart {
            call_id: "c1".into(),
            tool_name: "w".into(),
        }),
        E::ToolInputDelta(pb::ToolInputDelta {
            call_id: "c1".into(),
            delta: "{\"a\":".into(),
        }),
        E::ToolInputDelta(pb::ToolInputDelta {
            call_id: "c1".into(),
            delta: "1}".into(),
        }),
        E::ToolInputEnd(pb::ToolInputEnd {
            call_id: "c1".into(),
        }),
        call("c1", "{\"a\":1}"),
        // A call whose input was never streamed (Gemini sends calls whole).
        call("c2", "{}"),
        finish(pb::FinishReason::ToolCalls),
    ]);
    sequence_is_contiguous(&frames);
    let done: Vec<_> = frames
        .iter()
        .filter(|(t, _)| t == "response.function_call_arguments.done")
        .map(|(_, d)| d["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(done, ["{\"a\":1}", "{}"]);
    let out = &frames.last().unwrap().1["response"]["output"];
    assert_eq!(
        (out[0]["call_id"].as_str(), out[1]["call_id"].as_str()),
        (Some("c1"), Some("c2"))
    );
    assert_eq!(out[1]["arguments"], "{}");
}

#[test]
fn reasoning_is_a_summary_with_its_replay_data_sealed() {
    let meta = pb::ProviderMetadata {
        protocol: "anthropic".into(),
        model: "anthropic/claude".into(),
        json: "{\"signature\":\"s\"}".into(),
    };
    let frames = encode(vec![
        E::StepStart(pb::StepStart {}),
        E::ReasoningStart(pb::ReasoningStart { id: "0".into() }),
        E::ReasoningDelta(pb::ReasoningDelta {
            id: "0".into(),
            delta: "hm".into(),
        }),
        E::ReasoningEnd(pb::ReasoningEnd {
            id: "0".into(),
            provider_metadata: Some(meta.clone()),
        }),
        finish(pb::FinishReason::Stop),
    ]);
    assert!(types(&frames).contains(&"response.reasoning_summary_text.delta"));
    let item = &frames
        .iter()
        .find(|(t, _)| t == "response.output_item.done")
        .unwrap()
        .1["item"];
    assert_eq!(item["summary"][0]["text"], "hm");
    let sealed = item["encrypted_content"].as_str().unwrap();
    assert_eq!(replay::open(sealed, "x"), meta);
}

#[test]
fn a_cut_short_answer_is_incomplete_and_an_error_fails_the_response() {
    let frames = encode(vec![
        E::StepStart(pb::StepStart {}),
        finish(pb::FinishReason::Length),
    ]);
    assert_eq!(frames.last().unwrap().0, "response.incomplete");
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let frames = encode(vec![
        E::StepStart(pb::StepStart {}),
        E::Error(pb::Error {
            kind: pb::ErrorKind::Overloaded as i32,
            message: "Overloaded".into(),
            provider_body: body.into(),
            ..Default::default()
        }),
    ]);
    sequence_is_contiguous(&frames);
    assert_eq!(types(&frames)[2..], ["error", "response.failed"]);
    assert_eq!(frames[2].1["code"], "overloaded");
    assert_eq!(frames[3].1["response"]["status"], "failed");
    assert_eq!(frames[3].1["response"]["error"]["message"], "Overloaded");
}
