use super::*;
use crate::adapter::embed::Input;
use crate::catalog::ModelInfo;
use crate::protocol::Protocol;

fn texts(t: &[&str]) -> Vec<Input> {
    t.iter().map(|s| Input::Text((*s).into())).collect()
}

fn body_text(req: &EncodedRequest) -> &str {
    std::str::from_utf8(&req.body).unwrap()
}

fn answer(body: &str) -> Answer {
    Answer {
        body: body.to_string().into(),
        ..Default::default()
    }
}

#[test]
fn gemini_batches_one_embed_content_request_per_input() {
    let model = ModelInfo::for_tests("gemini-embedding-001", Protocol::Gemini);
    let inputs = texts(&["hello", "world"]);
    let batch = Batch {
        inputs: &inputs,
        offset: 0,
        dimensions: Some(768),
        user: Some("ignored: Gemini takes no end-user id"),
    };
    let req = Gemini.build(&batch, &Target::new(&model)).unwrap();
    assert_eq!(
        req.path,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    assert_eq!(
        body_text(&req),
        r#"{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hello"}]},"outputDimensionality":768},{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"world"}]},"outputDimensionality":768}]}"#
    );
    let v = Gemini
        .decode(
            &answer(r#"{"embeddings": [{"values": [0.5, 1]}, {"values": [-1, 0]}]}"#),
            2,
        )
        .unwrap();
    assert_eq!(v.vectors, [vec![0.5, 1.0], vec![-1.0, 0.0]]);
    assert_eq!(v.input_tokens, None, "the Gemini API counts no tokens");
    assert!(Gemini.decode(&answer(r#"{"embeddings": []}"#), 1).is_err());
}

#[test]
fn vertex_predicts_without_truncation_and_sums_the_token_counts() {
    let model = ModelInfo::for_tests("text-embedding-005", Protocol::VertexGemini);
    let inputs = texts(&["hello", "world"]);
    let batch = Batch {
        inputs: &inputs,
        offset: 0,
        dimensions: None,
        user: None,
    };
    let req = Vertex.build(&batch, &Target::new(&model)).unwrap();
    assert_eq!(
        req.path,
        "/publishers/google/models/text-embedding-005:predict"
    );
    assert_eq!(
        body_text(&req),
        r#"{"instances":[{"content":"hello"},{"content":"world"}],"parameters":{"autoTruncate":false}}"#
    );
    let body = r#"{"predictions": [
        {"embeddings": {"statistics": {"truncated": false, "token_count": 2}, "values": [0.1, 0.2]}},
        {"embeddings": {"statistics": {"truncated": false, "token_count": 3.0}, "values": [0.3, 0.4]}}
      ], "metadata": {"billableCharacterCount": 10}}"#;
    let v = Vertex.decode(&answer(body), 2).unwrap();
    assert_eq!(v.vectors, [vec![0.1f32, 0.2], vec![0.3, 0.4]]);
    assert_eq!(v.input_tokens, Some(5));
}

#[test]
fn names_that_could_leave_the_path_are_refused_naming_model() {
    let inputs = texts(&["a"]);
    let batch = Batch {
        inputs: &inputs,
        offset: 0,
        dimensions: None,
        user: None,
    };
    for protocol in [Protocol::Gemini, Protocol::VertexGemini] {
        let model = ModelInfo::for_tests("../x:predict?", protocol);
        let t = Target::new(&model);
        let e = match protocol {
            Protocol::Gemini => Gemini.build(&batch, &t).unwrap_err(),
            _ => Vertex.build(&batch, &t).unwrap_err(),
        };
        assert_eq!(e.field, "model");
    }
}
