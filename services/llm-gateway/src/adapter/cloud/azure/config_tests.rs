#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::config::Config;
use crate::protocol::Protocol;

const TOKEN: &str = "a-caller-token-of-length";

fn azure(api: Option<Surface>, version: Option<&str>) -> AzureFile {
    AzureFile {
        api,
        api_version: version.map(String::from),
        ..AzureFile::default()
    }
}

#[test]
fn the_endpoint_gets_openai_and_the_surface_its_version() {
    let env: [(&str, &str); 0] = [];
    for endpoint in [
        "https://acme.openai.azure.com",
        "https://acme.openai.azure.com/openai",
        "https://acme.openai.azure.com/openai/v1",
    ] {
        let a = build("az", None, endpoint, true, &env).unwrap();
        assert_eq!(a.base_url, "https://acme.openai.azure.com/openai");
        assert_eq!(a.api, AzureApi::default());
        assert!(a.tokens.is_none());
    }
    let dated = azure(Some(Surface::Deployments), Some("2024-10-21"));
    let a = build("az", Some(&dated), "http://127.0.0.1:9", true, &env).unwrap();
    assert_eq!(a.api.surface, Surface::Deployments);
    assert_eq!(a.api.api_version.as_deref(), Some("2024-10-21"));
}

#[test]
fn bad_settings_name_their_key() {
    let env = [("AZURE_CLIENT_SECRET", "s3cr3t")];
    let entra = EntraFile {
        tenant_id: Some("t1".into()),
        client_id: Some("c1".into()),
        ..EntraFile::default()
    };
    let cases = [
        (
            azure(Some(Surface::Deployments), None),
            true,
            "providers.az.azure.api_version",
        ),
        (
            azure(None, Some("2024-10-21&x=1")),
            true,
            "providers.az.azure.api_version",
        ),
        (
            AzureFile {
                deployments: [("../x".to_string(), "gpt-4o".to_string())].into(),
                ..AzureFile::default()
            },
            true,
            "providers.az.azure.deployments.../x",
        ),
        (
            AzureFile {
                entra: Some(entra.clone()),
                ..AzureFile::default()
            },
            true,
            "providers.az.api_key_env",
        ),
        (
            AzureFile {
                entra: Some(EntraFile {
                    client_secret_env: Some("MISSING".into()),
                    ..entra.clone()
                }),
                ..AzureFile::default()
            },
            false,
            "providers.az.azure.entra.client_secret_env",
        ),
        (
            AzureFile {
                entra: Some(EntraFile {
                    tenant_id: Some("a/b".into()),
                    ..entra.clone()
                }),
                ..AzureFile::default()
            },
            false,
            "providers.az.azure.entra.tenant_id",
        ),
    ];
    for (file, has_key, key) in cases {
        let err = build(
            "az",
            Some(&file),
            "https://x.openai.azure.com",
            has_key,
            &env,
        )
        .err()
        .unwrap();
        assert_eq!(err.key, key, "{err}");
    }
}

#[test]
fn entra_settings_default_from_azure_variables_and_never_print_the_secret() {
    let env = [
        ("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ("AZURE_CLIENT_ID", "6731de76-14a6-49ae-97bc-6eba6914391e"),
        ("AZURE_CLIENT_SECRET", "qWe8Q~secret-value"),
    ];
    let file = AzureFile {
        entra: Some(EntraFile::default()),
        ..AzureFile::default()
    };
    let a = build("az", Some(&file), "https://x.openai.azure.com", false, &env).unwrap();
    let tokens = a.tokens.unwrap();
    let shown = format!("{tokens:?}");
    assert!(
        shown.contains("https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/token"),
        "{shown}"
    );
    assert!(
        shown.contains("https://cognitiveservices.azure.com/.default"),
        "{shown}"
    );
    assert!(!shown.contains("qWe8Q"), "{shown}");
    assert_eq!(tokens.secrets(), vec!["qWe8Q~secret-value".to_string()]);
}

#[test]
fn deployments_get_the_catalog_entry_of_their_model() {
    let text = r#"
[providers.az]
protocol = "azure_chat"
base_url = "https://acme.openai.azure.com"
api_key_env = "AZ_KEY"
azure = { api = "deployments", api_version = "2024-10-21", deployments = { "prod-4o" = "gpt-4o", "reasoner" = "o4-mini", "codex" = "gpt-5-codex" } }

[models."az/prod-4o"]
max_output_tokens = 4096
"#;
    let env = [("GATEWAY_AUTH_TOKENS", TOKEN), ("AZ_KEY", "k")];
    let c = Config::from_file(Config::parse(text).unwrap(), &env).unwrap();
    let p = &c.providers["az"];
    assert_eq!(p.base_url, "https://acme.openai.azure.com/openai");
    assert_eq!(p.azure.as_ref().unwrap().surface, Surface::Deployments);

    let m = c.catalog.get("az/prod-4o").unwrap();
    let template = {
        let file: CatalogFile = toml::from_str(crate::catalog::BUNDLED).unwrap();
        file.models["azure/gpt-4o"].clone()
    };
    assert_eq!(m.name, "prod-4o");
    assert_eq!(m.protocol, Protocol::AzureChat);
    assert_eq!(m.display_name, "GPT-4o (Azure): prod-4o");
    assert_eq!(Some(m.context_window), template.context_window);
    assert_eq!(
        m.max_output_tokens, 4096,
        "the deployment's own entry overrides"
    );
    assert!(m.pricing.is_some(), "priced from the catalog");
    assert!(c.catalog.get("az/reasoner").unwrap().capabilities.reasoning);
    assert_eq!(
        c.catalog.get("az/codex").unwrap().protocol,
        Protocol::AzureResponses
    );
    // The templates themselves are not served by a provider that is not named `azure`.
    assert!(c.catalog.get("azure/gpt-4o").is_none());

    let unknown = text.replace("\"gpt-4o\"", "\"gpt-2\"");
    let err = Config::from_file(Config::parse(&unknown).unwrap(), &env)
        .err()
        .unwrap();
    assert_eq!(err.key, "providers.az.azure.deployments.prod-4o", "{err}");
    let misplaced =
        "[providers.o]\nprotocol = \"openai_chat\"\nbase_url = \"http://x\"\nazure = {}\n";
    let err = Config::from_file(Config::parse(misplaced).unwrap(), &env)
        .err()
        .unwrap();
    assert_eq!(err.key, "providers.o.azure", "{err}");
}

#[test]
fn the_commented_azure_example_operators_copy_is_valid() {
    let example = include_str!("../../../../../../deploy/gateway.example.toml");
    let start = example.find("# [providers.azure]").unwrap();
    // Uncommented, without the Entra line (an alternative to the key).
    let block: String = example[start..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .filter(|l| !l.starts_with("# entra"))
        .map(|l| format!("{}\n", &l[2..]))
        .collect();
    let env = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("AZURE_OPENAI_ENDPOINT", "https://acme.openai.azure.com"),
        ("AZURE_OPENAI_API_KEY", "k"),
    ];
    let c = Config::from_file(Config::parse(&block).unwrap(), &env).unwrap();
    let m = c.catalog.get("azure/prod-4o").unwrap();
    assert!(m.pricing.is_some());
    assert!(
        c.catalog
            .get("azure/reasoner")
            .unwrap()
            .capabilities
            .reasoning
    );
}
