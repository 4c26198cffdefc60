use super::*;
use crate::catalog::ModelInfo;

fn how(name: &str, protocol: Protocol, configured: Option<TokenizerName>) -> String {
    let model = ModelInfo::for_tests(name, protocol);
    format!("{:?}", counting(&Target::new(&model), configured))
}

#[test]
fn providers_with_a_counting_endpoint_count_there() {
    for (protocol, endpoint) in [
        (Protocol::Anthropic, "anthropic count_tokens"),
        (Protocol::VertexAnthropic, "vertex anthropic count-tokens"),
        (Protocol::Gemini, "gemini countTokens"),
        (Protocol::VertexGemini, "vertex gemini countTokens"),
        (Protocol::Bedrock, "bedrock CountTokens"),
    ] {
        // Even with a tokenizer configured: the provider's count is the one it bills.
        assert_eq!(
            how("m", protocol, Some(TokenizerName::O200kBase)),
            format!("Provider({endpoint})")
        );
    }
}

#[test]
fn openai_models_are_counted_locally_with_their_tokenizer() {
    for protocol in [
        Protocol::OpenaiChat,
        Protocol::OpenaiResponses,
        Protocol::AzureChat,
        Protocol::AzureResponses,
    ] {
        assert_eq!(how("gpt-4o", protocol, None), "Local(o200k_base)");
        assert_eq!(how("gpt-4-turbo", protocol, None), "Local(cl100k_base)");
    }
}

#[test]
fn an_open_model_behind_an_openai_server_has_no_count_unless_its_entry_names_a_tokenizer() {
    assert_eq!(
        how("llama-3.3-70b", Protocol::OpenaiChat, None),
        "Unavailable"
    );
    assert_eq!(
        how(
            "llama-3.3-70b",
            Protocol::OpenaiChat,
            Some(TokenizerName::Cl100kBase)
        ),
        "Local(cl100k_base)"
    );
    // An Azure deployment's own name says nothing; its entry carries the model's tokenizer (cloud/azure/config.rs).
    assert_eq!(how("prod-4o", Protocol::AzureChat, None), "Unavailable");
}
