use super::*;
use crate::catalog::{BUNDLED, CatalogFile};
use crate::protocol::Protocol;
use std::collections::BTreeMap;

fn providers() -> BTreeMap<String, Protocol> {
    [
        ("openai".to_string(), Protocol::OpenaiChat),
        ("vertex".to_string(), Protocol::VertexGemini),
        ("bedrock".to_string(), Protocol::Bedrock),
    ]
    .into_iter()
    .collect()
}

fn build(extra: &str) -> Result<Catalog, CatalogError> {
    let bundled: CatalogFile = toml::from_str(BUNDLED).unwrap();
    let over: CatalogFile = toml::from_str(extra).unwrap();
    Catalog::build(&[&bundled, &over], &providers())
}

#[test]
fn the_bundled_embedding_models_are_embedding_models_with_input_prices() {
    let c = build("").unwrap();
    for id in [
        "openai/text-embedding-3-small",
        "openai/text-embedding-3-large",
        "vertex/gemini-embedding-001",
        "bedrock/amazon.titan-embed-text-v2:0",
        "bedrock/cohere.embed-english-v3",
    ] {
        assert_eq!(c.kind(id), ModelKind::Embedding, "{id}");
        let p = c.get(id).unwrap().pricing.as_ref().unwrap();
        assert!(p.base.input > 0 && p.base.output == 0, "{id}");
    }
    assert_eq!(c.kind("openai/gpt-4o"), ModelKind::Chat);
    assert_eq!(c.kind("openai/not-in-the-catalog"), ModelKind::Chat);
    assert_eq!(c.uses("vertex/gemini-embedding-001").max_inputs, Some(1));
    assert_eq!(c.uses("vertex/text-embedding-005").max_inputs, None);
    // Vertex bills this one by characters: no token price.
    assert!(
        c.get("vertex/text-embedding-005")
            .unwrap()
            .pricing
            .is_none()
    );
}

#[test]
fn an_embedding_model_needs_no_output_limit_and_may_name_its_batch_size() {
    let c = build(
        r#"
        [models."openai/my-embedder"]
        kind = "embedding"
        context_window = 512
        embedding = { max_inputs = 16 }
        "#,
    )
    .unwrap();
    assert_eq!(c.kind("openai/my-embedder"), ModelKind::Embedding);
    assert_eq!(c.uses("openai/my-embedder").max_inputs, Some(16));
}

#[test]
fn mistakes_name_the_model_and_the_field() {
    for (extra, field) in [
        (
            r#"[models."openai/e"]
               kind = "embedding"
               context_window = 512
               fallbacks = ["openai/text-embedding-3-small"]"#,
            "fallbacks",
        ),
        (
            r#"[models."openai/e"]
               kind = "embedding"
               context_window = 512
               embedding = { max_inputs = 0 }"#,
            "embedding.max_inputs",
        ),
        (
            r#"[models."openai/gpt-4o"]
               embedding = { max_inputs = 4 }"#,
            "embedding",
        ),
        // A chat model still needs its output limit.
        (
            r#"[models."openai/c"]
               context_window = 512"#,
            "max_output_tokens",
        ),
    ] {
        let e = build(extra).unwrap_err();
        assert_eq!(e.field, field, "{extra}: {e}");
    }
}

#[test]
fn a_chat_model_cannot_fall_back_to_an_embedding_model() {
    let c = build(
        r#"[models."openai/gpt-4o"]
           fallbacks = ["openai/text-embedding-3-small"]"#,
    )
    .unwrap();
    let e = c.check_fallbacks(|_| true).unwrap_err();
    assert_eq!(e.field, "fallbacks[0]");
    assert!(e.message.contains("embedding model"), "{e}");
}

#[test]
fn layers_override_kind_tokenizer_and_batching_field_by_field() {
    let c = build(
        r#"
        [models."openai/gpt-4o"]
        tokenizer = "cl100k_base"

        [models."vertex/gemini-embedding-001"]
        display_name = "Renamed"
        "#,
    )
    .unwrap();
    assert_eq!(
        c.uses("openai/gpt-4o").tokenizer,
        Some(TokenizerName::Cl100kBase)
    );
    let kept = c.uses("vertex/gemini-embedding-001");
    assert_eq!(
        (kept.kind, kept.max_inputs),
        (ModelKind::Embedding, Some(1))
    );
}

#[test]
fn model_names_map_to_openais_tokenizers() {
    for (name, t) in [
        ("gpt-4o", Some(TokenizerName::O200kBase)),
        ("gpt-4o-mini-2024-07-18", Some(TokenizerName::O200kBase)),
        ("gpt-4.1-mini", Some(TokenizerName::O200kBase)),
        ("gpt-5-codex", Some(TokenizerName::O200kBase)),
        ("o3-pro", Some(TokenizerName::O200kBase)),
        ("codex-mini-latest", Some(TokenizerName::O200kBase)),
        (
            "ft:gpt-4o-mini:acme::abc123",
            Some(TokenizerName::O200kBase),
        ),
        ("gpt-4-turbo", Some(TokenizerName::Cl100kBase)),
        ("gpt-3.5-turbo", Some(TokenizerName::Cl100kBase)),
        ("text-embedding-3-small", Some(TokenizerName::Cl100kBase)),
        ("llama-3.3-70b-versatile", None),
        ("deepseek-chat", None),
        ("prod-4o", None),
    ] {
        assert_eq!(TokenizerName::of_model(name), t, "{name}");
    }
}
