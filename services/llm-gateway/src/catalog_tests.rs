use super::*;

fn providers() -> BTreeMap<String, Protocol> {
    [
        ("openai".to_string(), Protocol::OpenaiChat),
        ("anthropic".to_string(), Protocol::Anthropic),
        ("bedrock".to_string(), Protocol::Bedrock),
        ("azure".to_string(), Protocol::AzureChat),
    ]
    .into_iter()
    .collect()
}

#[test]
fn bundled_catalog_parses_and_prices_every_model() {
    let file: CatalogFile = toml::from_str(BUNDLED).unwrap();
    let catalog = Catalog::build(&[&file], &providers()).unwrap();
    assert!(catalog.iter().count() >= 8);
    for m in catalog.iter() {
        assert!(m.pricing.is_some(), "{} has no price", m.id);
        assert!(m.max_output_tokens <= m.context_window, "{}", m.id);
    }
}

#[test]
fn cost_is_exact_and_rounded_once() {
    // $3 in, $15 out, $0.30 cache read, $3.75 cache write per MTok.
    let pricing = PricingEntry {
        input: 3.0,
        output: 15.0,
        cache_read: Some(0.3),
        cache_write: Some(3.75),
        tiers: vec![],
    }
    .to_pricing();
    let usage = Usage {
        input: 1,
        cache_read: 1,
        cache_write: 1,
        output: 1,
        reasoning: 1,
    };
    // 3000 + 300 + 3750 + 15000*2 nano-USD = 37050.
    assert_eq!(pricing.cost_nano_usd(&usage), 37_050);
    // 1 token at $0.075/MTok = 75 nano; 1 token at $0.0375 = 37.5 → the sum is rounded once, not each term.
    let cheap = PricingEntry {
        input: 0.0375,
        output: 0.0375,
        ..Default::default()
    }
    .to_pricing();
    let u = Usage {
        input: 1,
        output: 1,
        ..Default::default()
    };
    assert_eq!(cheap.cost_nano_usd(&u), 75);
}

#[test]
fn tier_applies_above_threshold_of_whole_prompt() {
    let pricing = PricingEntry {
        input: 3.0,
        output: 15.0,
        cache_read: Some(0.3),
        cache_write: None,
        tiers: vec![TierEntry {
            above_input_tokens: 200_000,
            input: 6.0,
            output: 22.5,
            cache_read: Some(0.6),
            cache_write: None,
        }],
    }
    .to_pricing();
    let at = Usage {
        input: 100_000,
        cache_read: 100_000,
        ..Default::default()
    };
    assert_eq!(pricing.cost_nano_usd(&at), 300_000_000 + 30_000_000);
    let above = Usage {
        input: 100_001,
        cache_read: 100_000,
        ..Default::default()
    };
    assert_eq!(pricing.cost_nano_usd(&above), 600_006_000 + 60_000_000);
}

#[test]
fn config_layer_overrides_single_fields() {
    let bundled: CatalogFile = toml::from_str(BUNDLED).unwrap();
    let over: CatalogFile = toml::from_str(
            "[models.\"openai/gpt-4o\"]\nmax_output_tokens = 1000\n[models.\"openai/my-finetune\"]\ncontext_window = 8000\nmax_output_tokens = 512\n",
        )
        .unwrap();
    let catalog = Catalog::build(&[&bundled, &over], &providers()).unwrap();
    let m = catalog.get("openai/gpt-4o").unwrap();
    assert_eq!(m.max_output_tokens, 1000);
    assert!(m.context_window > 1000);
    assert!(m.pricing.is_some());
    assert_eq!(catalog.get("openai/my-finetune").unwrap().pricing, None);
}

#[test]
fn fallbacks_are_layered_and_checked() {
    let bundled: CatalogFile = toml::from_str(BUNDLED).unwrap();
    let over: CatalogFile = toml::from_str(
            "[models.\"openai/gpt-4o\"]\nfallbacks = [\"anthropic/claude-sonnet-4-5\", \"openai/gpt-4o-mini\"]\n",
        )
        .unwrap();
    let catalog = Catalog::build(&[&bundled, &over], &providers()).unwrap();
    assert_eq!(
        catalog.fallbacks("openai/gpt-4o"),
        ["anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini"]
    );
    assert!(catalog.fallbacks("openai/gpt-4o-mini").is_empty());
    assert!(
        catalog
            .check_fallbacks(|id| catalog.get(id).is_some())
            .is_ok()
    );
    let e = catalog
        .check_fallbacks(|id| id != "openai/gpt-4o-mini")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "models.\"openai/gpt-4o\".fallbacks[1]: `openai/gpt-4o-mini` is not a model this gateway serves"
    );
    for (list, field) in [
        ("[\"gpt-4o-mini\"]", "fallbacks[0]"),
        ("[\"openai/gpt-4o\"]", "fallbacks[0]"),
        ("[\"openai/o3\", \"openai/o3\"]", "fallbacks[1]"),
        ("[\"a/1\", \"a/2\", \"a/3\", \"a/4\", \"a/5\"]", "fallbacks"),
    ] {
        let bad: CatalogFile =
            toml::from_str(&format!("[models.\"openai/gpt-4o\"]\nfallbacks = {list}\n")).unwrap();
        let e = Catalog::build(&[&bundled, &bad], &providers()).unwrap_err();
        assert_eq!(e.field, field, "{list}");
    }
}

#[test]
fn compatibility_capabilities_parse_and_layer() {
    let bundled: CatalogFile = toml::from_str(BUNDLED).unwrap();
    // Defaults: the protocol's own id rule, no strict schemas, no reasoning replay.
    let catalog = Catalog::build(&[&bundled], &providers()).unwrap();
    let c = catalog.get("openai/gpt-4o").unwrap().capabilities;
    assert_eq!(c.tool_call_ids, ToolCallIds::Standard);
    assert!(!c.strict_schemas);
    assert_eq!(c.reasoning_replay, ReasoningReplay::None);
    assert!(c.streaming_tool_use);
    // Bedrock's Llama models take tools only on the non-streaming Converse; Azure's Responses-only model says so.
    let llama = catalog
        .get("bedrock/us.meta.llama3-3-70b-instruct-v1:0")
        .unwrap();
    assert!(!llama.capabilities.streaming_tool_use);
    assert_eq!(
        catalog.get("azure/gpt-5-codex").unwrap().protocol,
        Protocol::AzureResponses
    );
    assert_eq!(
        catalog.get("azure/gpt-4o").unwrap().protocol,
        Protocol::AzureChat
    );

    let over: CatalogFile = toml::from_str(
        r#"
[models."openai/mistral-large-latest"]
context_window = 131072
max_output_tokens = 8192
capabilities = { tool_call_ids = "mistral" }
[models."openai/deepseek-v4"]
context_window = 131072
max_output_tokens = 8192
capabilities = { reasoning_replay = "reasoning_content" }
[models."openai/gpt-4o"]
capabilities = { strict_schemas = true }
"#,
    )
    .unwrap();
    let catalog = Catalog::build(&[&bundled, &over], &providers()).unwrap();
    let mistral = catalog.get("openai/mistral-large-latest").unwrap();
    assert_eq!(mistral.capabilities.tool_call_ids, ToolCallIds::Mistral);
    assert_eq!(
        catalog
            .get("openai/deepseek-v4")
            .unwrap()
            .capabilities
            .reasoning_replay,
        ReasoningReplay::ReasoningContent
    );
    // A config layer changes one capability and keeps the bundled others.
    let gpt4o = catalog.get("openai/gpt-4o").unwrap().capabilities;
    assert!(gpt4o.strict_schemas);
    assert!(gpt4o.vision && gpt4o.json_schema);

    for bad in [
        "capabilities = { tool_call_ids = \"kimi\" }",
        "capabilities = { reasoning_replay = \"reasoning_details\" }",
    ] {
        let text = format!("[models.\"openai/gpt-4o\"]\n{bad}\n");
        assert!(toml::from_str::<CatalogFile>(&text).is_err(), "{bad}");
    }
}

#[test]
fn sampling_defaults_layer_field_by_field_and_fill_only_unset_values() {
    let bundled: CatalogFile = toml::from_str(BUNDLED).unwrap();
    let first: CatalogFile = toml::from_str(
        "[models.\"openai/gpt-4o\"]\ndefaults = { temperature = 0.7, top_p = 0.95 }\n",
    )
    .unwrap();
    let second: CatalogFile = toml::from_str(
        "[models.\"openai/gpt-4o\"]\ndefaults = { top_p = 0.9, max_output_tokens = 8192 }\n",
    )
    .unwrap();
    let catalog = Catalog::build(&[&bundled, &first, &second], &providers()).unwrap();
    let d = *catalog.defaults("openai/gpt-4o").unwrap();
    assert_eq!(
        d,
        SamplingDefaults {
            temperature: Some(0.7),
            top_p: Some(0.9),
            top_k: None,
            max_output_tokens: Some(8192),
        }
    );
    assert!(catalog.defaults("openai/gpt-4o-mini").is_none());

    // No sampling at all: every default fills in.
    let mut g = pb::Generation::default();
    d.apply(&mut g);
    let s = g.sampling.clone().unwrap();
    assert_eq!(
        (s.temperature, s.top_p, s.top_k, s.max_output_tokens),
        (Some(0.7), Some(0.9), None, Some(8192))
    );
    // The caller's values win, even a temperature of 0; stop sequences and seed are untouched.
    let mut g = pb::Generation {
        sampling: Some(pb::Sampling {
            temperature: Some(0.0),
            max_output_tokens: Some(100),
            stop_sequences: vec!["END".into()],
            seed: Some(3),
            ..Default::default()
        }),
        ..Default::default()
    };
    d.apply(&mut g);
    let s = g.sampling.unwrap();
    assert_eq!(
        (s.temperature, s.top_p, s.max_output_tokens, s.seed),
        (Some(0.0), Some(0.9), Some(100), Some(3))
    );
    assert_eq!(s.stop_sequences, ["END"]);
    // Empty defaults never create a sampling message.
    let mut g = pb::Generation::default();
    SamplingDefaults::default().apply(&mut g);
    assert_eq!(g.sampling, None);
}

#[test]
fn sampling_defaults_are_range_checked_naming_the_field() {
    let bundled: CatalogFile = toml::from_str(BUNDLED).unwrap();
    for (defaults, field) in [
        ("{ temperature = 2.5 }", "defaults.temperature"),
        ("{ top_p = 1.5 }", "defaults.top_p"),
        ("{ top_k = 0 }", "defaults.top_k"),
        ("{ max_output_tokens = 0 }", "defaults.max_output_tokens"),
        // gpt-4o's limit is 16384.
        (
            "{ max_output_tokens = 20000 }",
            "defaults.max_output_tokens",
        ),
    ] {
        let bad: CatalogFile = toml::from_str(&format!(
            "[models.\"openai/gpt-4o\"]\ndefaults = {defaults}\n"
        ))
        .unwrap();
        let e = Catalog::build(&[&bundled, &bad], &providers()).unwrap_err();
        assert_eq!(e.field, field, "{defaults}");
        assert_eq!(e.model, "openai/gpt-4o");
    }
    let unknown = "[models.\"openai/gpt-4o\"]\ndefaults = { seed = 1 }\n";
    assert!(toml::from_str::<CatalogFile>(unknown).is_err());
}

#[test]
fn close_matches_suggest_typos() {
    let file: CatalogFile = toml::from_str(BUNDLED).unwrap();
    let catalog = Catalog::build(&[&file], &providers()).unwrap();
    assert!(
        catalog
            .close_matches("openai/gpt-4")
            .contains(&"openai/gpt-4o")
    );
    assert!(catalog.close_matches("zzzzzzzzzzzzzzzzzzz").is_empty());
}
