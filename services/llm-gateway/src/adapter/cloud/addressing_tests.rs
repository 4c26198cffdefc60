//! The addressing rule for every adapter: a model name, whatever a caller wrote in it (`../`, `?`, `#`, `%2F`, `@`,
//! CR/LF, spaces, unicode), either is refused as `generation.model` or leaves the request's URL exactly the shape a
//! plain name gives: the same host and port, no credentials, the same number of path segments, the same query, no
//! fragment, and a path a URL parser (the one the transport sends through) keeps byte for byte, so no dot segment
//! is resolved and no character is dropped or re-encoded on the way.

use llm_proto::gateway as pb;
use proptest::prelude::*;

use crate::adapter::cloud::azure::{AzureApi, Surface};
use crate::adapter::{Protocol, Target};
use crate::catalog::ModelInfo;

const BASE: &str = "https://provider.example:8443/base";

/// Every protocol, so a new one cannot be added without passing this rule.
fn protocols() -> Vec<Protocol> {
    for p in Protocol::ALL {
        // Exhaustive: a new variant fails to compile here until it is added to `Protocol::ALL` and here.
        match p {
            Protocol::OpenaiChat
            | Protocol::OpenaiResponses
            | Protocol::Anthropic
            | Protocol::Gemini
            | Protocol::VertexGemini
            | Protocol::VertexAnthropic
            | Protocol::Bedrock
            | Protocol::AzureChat
            | Protocol::AzureResponses => {}
        }
    }
    Protocol::ALL.to_vec()
}

/// The addressing settings a protocol is tried with: Azure's two surfaces, nothing for the others.
fn apis(protocol: Protocol) -> Vec<Option<AzureApi>> {
    if !protocol.is_azure() {
        return vec![None];
    }
    vec![
        Some(AzureApi::default()),
        Some(AzureApi {
            surface: Surface::Deployments,
            api_version: Some("2024-10-21".into()),
        }),
    ]
}

fn ask(model: &str) -> pb::Generation {
    pb::Generation {
        model: format!("p/{model}"),
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart { text: "Hi".into() })),
            }],
        }],
        ..Default::default()
    }
}

/// The URL the transport would send for `name`, or `None` when the adapter refused the name (as `generation.model`).
fn url_of(protocol: Protocol, api: Option<&AzureApi>, name: &str) -> Option<String> {
    let model = ModelInfo::for_tests(name, protocol);
    let target = Target {
        model: &model,
        azure: api,
    };
    match protocol.adapter().build(&ask(name), &target) {
        Ok(req) => Some(format!("{BASE}{}", req.path)),
        Err(e) => {
            assert_eq!(e.field, "generation.model", "{protocol:?} {name:?}: {e}");
            None
        }
    }
}

fn assert_addressed_like_a_plain_name(name: &str) {
    for protocol in protocols() {
        for api in apis(protocol) {
            let plain = url_of(protocol, api.as_ref(), "plain-model-1")
                .map(|u| reqwest::Url::parse(&u).unwrap())
                .unwrap();
            let Some(raw) = url_of(protocol, api.as_ref(), name) else {
                continue;
            };
            let what = format!("{protocol:?} {api:?} {name:?} -> {raw}");
            let url = reqwest::Url::parse(&raw).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(url.as_str(), raw, "{what}: the URL parser changed the URL");
            assert_eq!(url.host_str(), plain.host_str(), "{what}");
            assert_eq!(url.port(), plain.port(), "{what}");
            assert_eq!((url.username(), url.password()), ("", None), "{what}");
            assert_eq!(url.query(), plain.query(), "{what}");
            assert_eq!(url.fragment(), None, "{what}");
            let segments = |u: &reqwest::Url| u.path_segments().map_or(0, Iterator::count);
            assert_eq!(segments(&url), segments(&plain), "{what}");
            assert!(url.path().starts_with("/base/"), "{what}");
        }
    }
}

#[test]
fn hostile_model_names_are_refused_or_stay_inside_their_path_segment() {
    let long = "a".repeat(10_000);
    for name in [
        ".",
        "..",
        "../../admin",
        "..%2F..%2Fadmin",
        "%2e%2e",
        ".%2E",
        "model?x=1",
        "model#frag",
        "model%2Fother",
        "a/b",
        "a\\b",
        "user@evil.example",
        "@evil.example",
        "//evil.example/x",
        "https://evil.example/",
        "model\r\nx-injected: 1",
        "model\n",
        "model\t",
        "a b",
        "modèle-ü",
        "模型",
        "model:streamGenerateContent?alt=sse#",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude",
        "claude-sonnet-4-5@20250929",
        "%",
        "%%32%65",
        long.as_str(),
    ] {
        assert_addressed_like_a_plain_name(name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn any_name_is_refused_or_stays_inside_its_path_segment(
        name in proptest::collection::vec(
            prop_oneof![
                Just("."), Just(".."), Just("/"), Just("\\"), Just("?"), Just("#"), Just("%"), Just("%2F"),
                Just("%2e"), Just("@"), Just(":"), Just(" "), Just("\r\n"), Just("\t"), Just("é"), Just("a"),
                Just("-"), Just("~"), Just(";"), Just("&"), Just("="),
            ],
            1..12,
        )
    ) {
        assert_addressed_like_a_plain_name(&name.concat());
    }
}
