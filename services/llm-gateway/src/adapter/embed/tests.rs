use super::*;
use crate::catalog::ModelInfo;

fn embedder_of(name: &str, protocol: Protocol) -> Result<usize, BuildError> {
    let model = ModelInfo::for_tests(name, protocol);
    embedder(&Target::new(&model)).map(|e| e.max_inputs())
}

#[test]
fn each_protocol_has_its_embeddings_api_and_batch_limit() {
    assert_eq!(
        embedder_of("text-embedding-3-small", Protocol::OpenaiChat),
        Ok(2048)
    );
    assert_eq!(
        embedder_of("text-embedding-3-small", Protocol::OpenaiResponses),
        Ok(2048)
    );
    assert_eq!(embedder_of("emb", Protocol::AzureChat), Ok(2048));
    assert_eq!(
        embedder_of("gemini-embedding-001", Protocol::Gemini),
        Ok(100)
    );
    assert_eq!(
        embedder_of("text-embedding-005", Protocol::VertexGemini),
        Ok(250)
    );
    assert_eq!(
        embedder_of("amazon.titan-embed-text-v2:0", Protocol::Bedrock),
        Ok(1)
    );
    assert_eq!(
        embedder_of("cohere.embed-english-v3", Protocol::Bedrock),
        Ok(96)
    );
    assert_eq!(
        embedder_of("us.cohere.embed-v4:0", Protocol::Bedrock),
        Ok(96)
    );
}

#[test]
fn a_model_no_embeddings_api_serves_is_refused_naming_model() {
    for (name, protocol) in [
        ("claude-sonnet-4-5", Protocol::Anthropic),
        ("claude-haiku-4-5@20251001", Protocol::VertexAnthropic),
        (
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            Protocol::Bedrock,
        ),
    ] {
        let e = embedder_of(name, protocol).unwrap_err();
        assert_eq!(e.field, "model", "{name}: {e}");
    }
}

#[test]
fn token_ids_are_refused_by_text_only_apis_naming_the_input() {
    let inputs = [Input::Text("a".into()), Input::Tokens(vec![1, 2])];
    let batch = Batch {
        inputs: &inputs,
        offset: 130,
        dimensions: None,
        user: None,
    };
    let e = batch.texts().unwrap_err();
    assert_eq!(e.field, "inputs[131]");
}

#[test]
fn estimates_are_four_characters_a_token_rounded_up_per_input() {
    let inputs = [
        Input::Text("abcd".into()),
        Input::Text("abcde".into()),
        Input::Text("ééé".into()),
        Input::Tokens(vec![1, 2, 3]),
    ];
    assert_eq!(estimate_tokens(&inputs), 1 + 2 + 1 + 3);
}
