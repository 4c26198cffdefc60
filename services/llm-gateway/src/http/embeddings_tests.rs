use super::*;
use serde_json::json;

fn translated(body: Value) -> Result<Translated, ApiError> {
    translate(body)
}

#[test]
fn every_input_shape_openai_takes_is_read() {
    let one = translated(json!({"model": "openai/text-embedding-3-small", "input": "hi"})).unwrap();
    assert_eq!(one.call.inputs, [Input::Text("hi".into())]);
    assert!(one.format == Format::Float);
    let many = translated(
        json!({"model": "m", "input": ["a", "b"], "encoding_format": "base64",
        "dimensions": 256, "user": "u"}),
    )
    .unwrap();
    assert_eq!(many.call.inputs.len(), 2);
    assert!(many.format == Format::Base64);
    assert_eq!(
        (many.call.dimensions, many.call.user.as_deref()),
        (Some(256), Some("u"))
    );
    let ids = translated(json!({"model": "m", "input": [1, 2, 3]})).unwrap();
    assert_eq!(ids.call.inputs, [Input::Tokens(vec![1, 2, 3])]);
    let lists = translated(json!({"model": "m", "input": [[1], [2, 3]]})).unwrap();
    assert_eq!(
        lists.call.inputs,
        [Input::Tokens(vec![1]), Input::Tokens(vec![2, 3])]
    );
}

#[test]
fn unknown_or_wrong_fields_are_refused_naming_them() {
    for (body, param) in [
        (
            json!({"model": "m", "input": "a", "task_type": "x"}),
            "task_type",
        ),
        (json!({"model": "m", "input": {"text": "a"}}), "input"),
        (json!({"model": "m", "input": [1, "a"]}), "input"),
        (
            json!({"model": "m", "input": "a", "encoding_format": "int8"}),
            "encoding_format",
        ),
        (
            json!({"model": "m", "input": "a", "dimensions": 0}),
            "dimensions",
        ),
        (
            json!({"model": "m", "input": "a", "dimensions": -1}),
            "dimensions",
        ),
        (json!({"input": "a"}), "body"),
    ] {
        let e = translated(body.clone()).err().unwrap();
        assert_eq!(e.param.as_deref(), Some(param), "{body}: {e:?}");
        assert_eq!(e.class, Class::InvalidRequest);
    }
}

#[test]
fn the_reply_is_openais_list_with_floats_or_base64() {
    let done = Embeddings {
        model: "openai/text-embedding-3-small".into(),
        provider: "openai".into(),
        vectors: vec![vec![1.0, -0.5], vec![0.25, 0.0]],
        input_tokens: 7,
        estimated: false,
        cost_nano_usd: Some(140),
        provider_requests: 1,
        headers: Vec::new(),
    };
    let floats = reply(done.clone(), "openai/text-embedding-3-small", Format::Float).unwrap();
    assert_eq!(
        String::from_utf8(floats).unwrap(),
        r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1.0,-0.5]},{"object":"embedding","index":1,"embedding":[0.25,0.0]}],"model":"openai/text-embedding-3-small","usage":{"prompt_tokens":7,"total_tokens":7}}"#
    );
    let b64: Value = serde_json::from_slice(&reply(done, "m", Format::Base64).unwrap()).unwrap();
    // 1.0 and -0.5 as little-endian f32: 00 00 80 3f, 00 00 00 bf.
    assert_eq!(b64["data"][0]["embedding"], "AACAPwAAAL8=");
}

#[test]
fn call_errors_name_the_bodys_input_field() {
    let e = api_error(&CallError::from(crate::adapter::BuildError::new(
        "inputs[3]",
        "this model takes text only, not token ids",
    )));
    assert_eq!(e.param.as_deref(), Some("input[3]"));
    assert!(e.message.starts_with("input[3]: "), "{}", e.message);
    let e = api_error(&CallError::TooLarge {
        field: "inputs".into(),
        message: "at most 2048 inputs per call".into(),
    });
    assert_eq!(
        (e.param.as_deref(), e.class),
        (Some("input"), Class::TooLarge)
    );
}
