use std::collections::BTreeMap;

use super::*;
use crate::catalog::CatalogFile;
use crate::protocol::Protocol;

/// A catalog where `gpt-4o` is served by two providers and `gpt-4.1-mini` by one.
fn catalog() -> Catalog {
    let file: CatalogFile = toml::from_str(
        r#"
[models."openai/gpt-4.1-mini"]
context_window = 1000
max_output_tokens = 100
[models."openai/gpt-4o"]
context_window = 1000
max_output_tokens = 100
[models."azure/gpt-4o"]
context_window = 1000
max_output_tokens = 100
[models."anthropic/claude-haiku-4-5"]
context_window = 1000
max_output_tokens = 100
"#,
    )
    .unwrap();
    let providers: BTreeMap<String, Protocol> = [
        ("openai", Protocol::OpenaiChat),
        ("azure", Protocol::AzureChat),
        ("anthropic", Protocol::Anthropic),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Catalog::build(&[&file], &providers).unwrap()
}

fn aliases(toml_text: &str) -> Result<ModelNames, ConfigError> {
    #[derive(Deserialize)]
    struct File {
        aliases: BTreeMap<String, AliasFile>,
    }
    let file: File = toml::from_str(toml_text).unwrap();
    let catalog = catalog();
    ModelNames::compile(&file.aliases, &catalog, |id| {
        catalog.get(id).is_some() || id.starts_with("local/")
    })
}

fn is_provider(p: &str) -> bool {
    matches!(p, "openai" | "azure" | "anthropic" | "local")
}

#[test]
fn a_name_is_an_id_then_an_alias_then_a_providers_then_a_bare_name() {
    let names = aliases(
        r#"[aliases]
fast = "openai/gpt-4.1-mini"
smart = { model = "openai/gpt-4o", fallbacks = ["anthropic/claude-haiku-4-5"] }
"#,
    )
    .unwrap();
    let catalog = catalog();
    let look = |name| names.lookup(&catalog, is_provider, name);
    assert_eq!(look("openai/gpt-4o"), Ok(Named::Id("openai/gpt-4o")));
    let Ok(Named::Alias(smart)) = look("smart") else {
        panic!()
    };
    assert_eq!(smart.model, "openai/gpt-4o");
    assert_eq!(smart.fallbacks, ["anthropic/claude-haiku-4-5"]);
    assert_eq!(look("gpt-4.1-mini"), Ok(Named::Id("openai/gpt-4.1-mini")));
    assert_eq!(
        look("claude-haiku-4-5"),
        Ok(Named::Id("anthropic/claude-haiku-4-5"))
    );
    // A configured provider's prefix is left to that provider (it may serve unlisted models).
    assert_eq!(look("local/llama3"), Ok(Named::Id("local/llama3")));
    // Nothing known: the name itself, which the core reports as not served.
    assert_eq!(look("gpt-9"), Ok(Named::Id("gpt-9")));
    assert_eq!(look("nobody/gpt-4o"), Ok(Named::Id("nobody/gpt-4o")));
}

#[test]
fn a_bare_name_several_providers_serve_is_ambiguous_listing_them() {
    let names = ModelNames::default();
    let catalog = catalog();
    assert_eq!(
        names.lookup(&catalog, is_provider, "gpt-4o"),
        Err(Ambiguous {
            candidates: vec!["azure/gpt-4o".into(), "openai/gpt-4o".into()]
        })
    );
}

#[test]
fn an_alias_may_settle_an_ambiguous_name() {
    let names = aliases("[aliases]\n\"gpt-4o\" = \"openai/gpt-4o\"\n").unwrap();
    let catalog = catalog();
    let Ok(Named::Alias(a)) = names.lookup(&catalog, is_provider, "gpt-4o") else {
        panic!()
    };
    assert_eq!(a.model, "openai/gpt-4o");
}

#[test]
fn aliases_are_checked_naming_the_key() {
    for (text, key) in [
        ("[aliases]\nx = \"openai/nope\"\n", "aliases.\"x\".model"),
        (
            "[aliases]\n\"openai/gpt-4o\" = \"openai/gpt-4.1-mini\"\n",
            "aliases.\"openai/gpt-4o\"",
        ),
        ("[aliases]\n\" x\" = \"openai/gpt-4o\"\n", "aliases.\" x\""),
        (
            "[aliases]\nx = { model = \"openai/gpt-4o\", fallbacks = [\"openai/nope\"] }\n",
            "aliases.\"x\".fallbacks[0]",
        ),
        (
            "[aliases]\nx = { model = \"openai/gpt-4o\", fallbacks = [\"local/a\", \"local/b\", \"local/c\", \"local/d\", \"local/e\"] }\n",
            "aliases.\"x\".fallbacks",
        ),
    ] {
        assert_eq!(aliases(text).unwrap_err().key, key, "{text}");
    }
}

#[test]
fn the_served_list_has_the_aliases_among_the_models_in_id_order() {
    let names =
        aliases("[aliases]\nfast = \"openai/gpt-4.1-mini\"\nlocal = \"local/llama3\"\n").unwrap();
    let catalog = catalog();
    let listed: Vec<(&str, Option<&str>)> = names
        .listed(&catalog)
        .iter()
        .map(|l| (l.id, l.alias_of))
        .collect();
    assert_eq!(
        listed,
        [
            ("anthropic/claude-haiku-4-5", None),
            ("azure/gpt-4o", None),
            ("fast", Some("openai/gpt-4.1-mini")),
            ("openai/gpt-4.1-mini", None),
            ("openai/gpt-4o", None),
        ]
    );
}
