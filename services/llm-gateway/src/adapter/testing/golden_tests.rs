#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use prost::Message;

use super::*;
use crate::adapter::Target;

/// The recorded builds, per protocol, at least as many as were recorded before the typed wire structs: a fixture
/// that lost its cases fails here rather than passing on nothing.
const PROTOCOLS: [(Protocol, usize); 5] = [
    (Protocol::OpenaiChat, 66),
    (Protocol::OpenaiResponses, 64),
    (Protocol::Anthropic, 88),
    (Protocol::Gemini, 92),
    (Protocol::Bedrock, 20),
];

fn cases(protocol: Protocol) -> Vec<Case> {
    let path = format!(
        "{}/src/adapter/testing/testdata/golden/{}.jsonl",
        env!("CARGO_MANIFEST_DIR"),
        protocol.as_str()
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}: {l}")))
        .collect()
}

/// The body (or the refusal) today's builder gives for a recorded case.
fn rebuild(case: &Case) -> (Option<String>, Option<(String, String)>) {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&case.generation)
        .unwrap();
    let g = pb::Generation::decode(bytes.as_slice()).unwrap();
    let model = case.model.info();
    let built = case.protocol.adapter().build(&g, &Target::new(&model));
    match built {
        Ok(request) => (Some(request.body.to_string()), None),
        Err(e) => (None, Some((e.field, e.message))),
    }
}

#[test]
fn every_recorded_request_is_built_byte_for_byte_as_recorded() {
    for (protocol, at_least) in PROTOCOLS {
        let cases = cases(protocol);
        assert!(
            cases.len() >= at_least,
            "{protocol:?}: {} cases recorded",
            cases.len()
        );
        for (n, case) in cases.iter().enumerate() {
            let (body, error) = rebuild(case);
            assert_eq!(body, case.body, "{protocol:?} case {n}");
            assert_eq!(error, case.error, "{protocol:?} case {n}");
        }
    }
}
