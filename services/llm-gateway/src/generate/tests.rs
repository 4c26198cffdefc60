use super::*;
use crate::error::ErrorKind;
use attempt::falls_back;
use run::summarize;

#[test]
fn fallback_kinds_are_the_ones_another_model_can_fix() {
    use ErrorKind::*;
    for k in [
        RateLimited,
        Overloaded,
        Timeout,
        Network,
        ProviderError,
        Auth,
    ] {
        assert!(falls_back(k), "{k:?}");
    }
    for k in [InvalidRequest, ContentFilter, ContextOverflow, Cancelled] {
        assert!(!falls_back(k), "{k:?}");
    }
}

/// Every open stream keeps its whole state machine in one allocation (server.rs boxes it), so its size is part
/// of the memory per open stream. Rare, large awaits (fallback hooks, retry back-off, the request future) are
/// boxed separately; this keeps them from creeping back in.
#[tokio::test]
async fn an_open_stream_holds_a_small_state() {
    let file = Config::parse(
            "[server]\nallow_unauthenticated = true\n[providers.local]\nprotocol = \"openai_chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\nallow_unlisted_models = true\n",
        )
        .unwrap();
    let gateway = Gateway::new(Config::from_file(file, &[("X", "")]).unwrap()).unwrap();
    let generation = pb::Generation {
        model: "local/m".into(),
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart { text: "hi".into() })),
            }],
        }],
        ..Default::default()
    };
    let stream = gateway.stream(generation).await.unwrap();
    let size = std::mem::size_of_val(&stream);
    assert!(size <= 2048, "an open stream's state is {size} bytes");
}

#[test]
fn summaries_name_the_model_kind_status_and_attempts() {
    let mut e = crate::error::ProviderError::new(ErrorKind::RateLimited, "slow down");
    e.http_status = Some(429);
    assert_eq!(
        summarize("openai/gpt-4o", &e, 3),
        "openai/gpt-4o: rate_limited (429) after 3 attempts: slow down"
    );
    let e = crate::error::ProviderError::new(ErrorKind::Timeout, "");
    assert_eq!(summarize("a/b", &e, 1), "a/b: timeout");
}

/// A catalog model whose provider has no credentials says what enables it (a built-in provider's key variable,
/// another provider's table), by full id and by bare name; a name the catalog lacks still lists what is served.
#[tokio::test]
async fn a_catalog_model_of_an_unconfigured_provider_names_the_fix() {
    let file = Config::parse(
        "[server]\nallow_unauthenticated = true\n[providers.demo]\nprotocol = \"openai_chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let gateway = Gateway::new(Config::from_file(file, &[("X", "")]).unwrap()).unwrap();
    let gateway = &gateway;
    let message = |model: &str| {
        let generation = pb::Generation {
            model: model.into(),
            messages: vec![pb::Message {
                role: pb::Role::User as i32,
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text(pb::TextPart { text: "hi".into() })),
                }],
            }],
            ..Default::default()
        };
        async move {
            match gateway.stream(generation).await {
                Err(e @ StartError::UnknownModel { .. }) => e.to_string(),
                Err(other) => panic!("{other:?}"),
                Ok(_) => panic!("served"),
            }
        }
    };
    let by_id = message("openai/gpt-4o-mini").await;
    assert!(by_id.contains("set OPENAI_API_KEY"), "{by_id}");
    let bare = message("claude-sonnet-4-5").await;
    assert!(bare.contains("set ANTHROPIC_API_KEY"), "{bare}");
    let bedrock = message("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0").await;
    assert!(bedrock.contains("[providers.bedrock]"), "{bedrock}");
    let shared = message("gpt-4o-mini").await;
    assert!(
        shared.contains("set OPENAI_API_KEY") && !shared.contains("azure"),
        "a built-in provider's variable first: {shared}"
    );
    let unknown = message("no-such-model-anywhere").await;
    assert!(unknown.contains("served: demo/scripted"), "{unknown}");
}
