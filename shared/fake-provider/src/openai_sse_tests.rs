use super::*;

#[test]
fn split_words_round_trips() {
    let text = "Let me  check the time.";
    let pieces = split_words(text);
    assert_eq!(pieces, vec!["Let", " me", "  check", " the", " time."]);
    assert_eq!(pieces.concat(), text);
    assert!(split_words("").is_empty());
}

#[test]
fn text_stream_has_openai_shape() {
    let body = ChatStream::new("gpt-x", "chatcmpl-1")
        .created(7)
        .text(&["Hi"])
        .finish("stop", Some((3, 1)));
    let events: Vec<&str> = body.split_terminator("\n\n").collect();
    assert_eq!(events.len(), 5);
    assert_eq!(
        events[0],
        r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"gpt-x","system_fingerprint":"fp_fakeprov01","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#
    );
    assert!(events[1].contains(r#""delta":{"content":"Hi"}"#));
    assert!(events[2].contains(r#""delta":{},"logprobs":null,"finish_reason":"stop""#));
    assert!(events[3].contains(
        r#""choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"#
    ));
    assert_eq!(events[4], "data: [DONE]");
}

#[test]
fn tool_call_fragments() {
    let body = tool_call_stream("m", "c", "call_1", "get_time", &["{\"a\"", ":1}"], (1, 2));
    assert!(body.contains(r#""tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]"#));
    assert!(body.contains(r#""tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]"#));
    assert!(body.contains(r#""finish_reason":"tool_calls""#));
}
