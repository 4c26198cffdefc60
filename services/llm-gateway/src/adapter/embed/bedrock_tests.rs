use super::*;
use crate::adapter::embed::Input;
use crate::catalog::ModelInfo;
use crate::protocol::Protocol;

fn texts(t: &[&str]) -> Vec<Input> {
    t.iter().map(|s| Input::Text((*s).into())).collect()
}

fn batch(inputs: &[Input], dimensions: Option<u32>) -> Batch<'_> {
    Batch {
        inputs,
        offset: 0,
        dimensions,
        user: None,
    }
}

fn body_text(req: &EncodedRequest) -> &str {
    std::str::from_utf8(&req.body).unwrap()
}

#[test]
fn titan_embeds_one_text_with_its_dimensions() {
    let model = ModelInfo::for_tests("amazon.titan-embed-text-v2:0", Protocol::Bedrock);
    let t = Target::new(&model);
    let inputs = texts(&["hello"]);
    let req = Titan.build(&batch(&inputs, Some(512)), &t).unwrap();
    assert_eq!(req.path, "/model/amazon.titan-embed-text-v2%3A0/invoke");
    assert_eq!(body_text(&req), r#"{"inputText":"hello","dimensions":512}"#);
    let e = Titan.build(&batch(&inputs, Some(300)), &t).unwrap_err();
    assert_eq!(e.field, "dimensions");
    let v1 = ModelInfo::for_tests("amazon.titan-embed-text-v1", Protocol::Bedrock);
    let e = Titan
        .build(&batch(&inputs, Some(512)), &Target::new(&v1))
        .unwrap_err();
    assert_eq!(e.field, "dimensions");

    let answer = Answer {
        body: r#"{"embedding":[0.5,-0.25],"embeddingsByType":{"float":[0.5,-0.25]},"inputTextTokenCount":3}"#.into(),
        ..Default::default()
    };
    let v = Titan.decode(&answer, 1).unwrap();
    assert_eq!(v.vectors, [vec![0.5, -0.25]]);
    assert_eq!(v.input_tokens, Some(3));
}

#[test]
fn cohere_embeds_documents_untruncated_and_counts_from_the_header() {
    let model = ModelInfo::for_tests("cohere.embed-english-v3", Protocol::Bedrock);
    let t = Target::new(&model);
    let inputs = texts(&["hello", "world"]);
    let req = Cohere.build(&batch(&inputs, None), &t).unwrap();
    assert_eq!(req.path, "/model/cohere.embed-english-v3/invoke");
    assert_eq!(
        body_text(&req),
        r#"{"texts":["hello","world"],"input_type":"search_document","truncate":"NONE"}"#
    );
    let e = Cohere.build(&batch(&inputs, Some(512)), &t).unwrap_err();
    assert_eq!(e.field, "dimensions");
    let v4 = ModelInfo::for_tests("cohere.embed-v4:0", Protocol::Bedrock);
    let req = Cohere
        .build(&batch(&inputs, Some(512)), &Target::new(&v4))
        .unwrap();
    assert!(body_text(&req).ends_with(r#""output_dimension":512}"#));

    let floats = Answer {
        headers: vec![(INPUT_TOKENS_HEADER.into(), "4".into())],
        body: r#"{"embeddings":[[0.1,0.2],[0.3,0.4]],"id":"e1","response_type":"embeddings_floats","texts":["hello","world"]}"#.into(),
        ..Default::default()
    };
    let v = Cohere.decode(&floats, 2).unwrap();
    assert_eq!(v.vectors, [vec![0.1f32, 0.2], vec![0.3, 0.4]]);
    assert_eq!(v.input_tokens, Some(4));
    let by_type = Answer {
        headers: Vec::new(),
        body: r#"{"embeddings":{"float":[[1,2]]},"id":"e2","response_type":"embeddings_by_type"}"#
            .into(),
        ..Default::default()
    };
    let v = Cohere.decode(&by_type, 1).unwrap();
    assert_eq!((v.vectors, v.input_tokens), (vec![vec![1.0, 2.0]], None));
    assert!(Cohere.decode(&by_type, 2).is_err());
}

#[test]
fn other_bedrock_models_have_no_embeddings_here() {
    assert!(family("amazon.titan-embed-text-v2:0").is_ok());
    assert!(family("us.cohere.embed-v4:0").is_ok());
    let e = family("amazon.nova-pro-v1:0").err().unwrap();
    assert_eq!(e.field, "model");
}
