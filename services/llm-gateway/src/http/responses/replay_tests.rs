use super::*;

#[test]
fn sealed_metadata_opens_to_itself_whatever_it_holds() {
    let meta = pb::ProviderMetadata {
        protocol: "anthropic".into(),
        model: "anthropic/claude-sonnet-4-5".into(),
        json: r#"{"signature":"Ep\"YC/+=\n","redacted_data":null}"#.into(),
    };
    let sealed = seal(&meta);
    assert!(
        sealed.starts_with("gwr1.") && !sealed.contains(['+', '/', '=']),
        "{sealed}"
    );
    assert_eq!(open(&sealed, "rs_1"), meta);
}

#[test]
fn someone_elses_encrypted_content_is_responses_reasoning_of_the_model_it_goes_to() {
    for foreign in ["gAAAAABpVxqh", "gwr1.not-base64!", "gwr1.e30"] {
        let meta = open(foreign, "rs_9");
        assert_eq!(meta.protocol, "openai_responses");
        assert_eq!(meta.model, "");
        let json: serde_json::Value = serde_json::from_str(&meta.json).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"item_id": "rs_9", "encrypted_content": foreign})
        );
    }
    let mut g = pb::Generation::default();
    let reasoning = |model: &str| pb::Part {
        kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
            text: String::new(),
            provider_metadata: Some(pb::ProviderMetadata {
                model: model.into(),
                ..Default::default()
            }),
        })),
    };
    g.messages.push(crate::http::unified::message(
        pb::Role::Assistant,
        vec![reasoning(""), reasoning("anthropic/x")],
    ));
    crate::http::unified::fill_model(&mut g, "openai/gpt-5");
    let models: Vec<_> = g.messages[0]
        .parts
        .iter()
        .map(|p| match &p.kind {
            Some(pb::part::Kind::Reasoning(r)) => {
                r.provider_metadata.as_ref().unwrap().model.clone()
            }
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(models, ["openai/gpt-5", "anthropic/x"]);
}
