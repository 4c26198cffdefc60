#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use bytes::Bytes;
use serde_json::json;

use super::*;
use crate::azure::{EntraTokens, TEST_API_KEY};

fn request(path: &str, auth: (&str, &str), body: &Value) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: path.into(),
        headers: vec![(auth.0.into(), auth.1.into())],
        body: Bytes::from(body.to_string()),
        received_at: Instant::now(),
    }
}

fn chat(model: &str) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

fn resource(entra: &EntraTokens) -> AzureResource {
    let r = AzureResource::new(TEST_API_KEY, Some(entra));
    r.deploy("prod-4o", "gpt-4o");
    r.deploy("reasoner", "o4-mini");
    r
}

const KEY: (&str, &str) = ("api-key", TEST_API_KEY);
const DATED: &str = "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21";

#[test]
fn both_surfaces_and_both_credentials_are_served() {
    let entra = EntraTokens::test_app();
    let r = resource(&entra);
    assert_eq!(check(&r, &request(DATED, KEY, &chat("prod-4o"))), Ok(()));
    let (token, _) = entra.grant();
    let bearer = format!("Bearer {token}");
    let v1 = request(
        "/openai/v1/chat/completions",
        ("authorization", &bearer),
        &chat("prod-4o"),
    );
    assert_eq!(check(&r, &v1), Ok(()));
    let responses = json!({"model": "reasoner", "input": "Hi", "store": false});
    for path in [
        "/openai/v1/responses",
        "/openai/responses?api-version=2025-04-01-preview",
    ] {
        assert_eq!(check(&r, &request(path, KEY, &responses)), Ok(()), "{path}");
    }
}

#[test]
fn each_azure_refusal_has_its_status_and_body() {
    let entra = EntraTokens::test_app();
    let r = resource(&entra);
    let cases = [
        (request(DATED, ("api-key", "wrong"), &chat("x")), 401, "401"),
        (
            request(DATED, ("authorization", "Bearer forged"), &chat("x")),
            401,
            "401",
        ),
        (
            request(
                "/openai/deployments/prod-4o/chat/completions",
                KEY,
                &chat("x"),
            ),
            404,
            "404",
        ),
        (
            request(
                "/openai/engines/x/completions?api-version=2024-10-21",
                KEY,
                &chat("x"),
            ),
            404,
            "404",
        ),
        (
            request(
                "/openai/deployments/prod-4o/chat/completions?api-version=2023-05-15",
                KEY,
                &chat("x"),
            ),
            400,
            "BadRequest",
        ),
        (
            request(
                "/openai/responses?api-version=2024-10-21",
                KEY,
                &json!({"model": "reasoner", "input": "Hi"}),
            ),
            400,
            "BadRequest",
        ),
        (
            request(
                "/openai/v1/chat/completions?api-version=2024-10-21",
                KEY,
                &chat("prod-4o"),
            ),
            400,
            "BadRequest",
        ),
        (
            request(
                "/openai/deployments/nope/chat/completions?api-version=2024-10-21",
                KEY,
                &chat("x"),
            ),
            404,
            "DeploymentNotFound",
        ),
        (
            request("/openai/v1/chat/completions", KEY, &chat("nope")),
            404,
            "DeploymentNotFound",
        ),
    ];
    for (req, status, code) in cases {
        let rejection = check(&r, &req).unwrap_err();
        assert_eq!(
            (rejection.status, rejection.code.as_deref()),
            (status, Some(code)),
            "{}",
            req.path
        );
        let body: Value = serde_json::from_str(&rejection.body()).unwrap();
        assert_eq!(body["error"]["code"], code, "{}", req.path);
        assert!(body["error"]["message"].is_string());
        assert!(body["error"].get("type").is_none(), "Azure's own shape");
    }
}

#[test]
fn openai_body_rules_apply_to_the_deployments_model() {
    let entra = EntraTokens::test_app();
    let r = resource(&entra);
    // `reasoner` runs o4-mini: a reasoning model refuses temperature, whatever the deployment is called.
    let mut body = chat("reasoner");
    body["temperature"] = json!(0.2);
    let rejection = check(&r, &request("/openai/v1/chat/completions", KEY, &body)).unwrap_err();
    assert_eq!(rejection.status, 400);
    assert_eq!(rejection.param.as_deref(), Some("temperature"));
    let shown: Value = serde_json::from_str(&rejection.body()).unwrap();
    assert_eq!(
        shown["error"]["type"], "invalid_request_error",
        "OpenAI's shape"
    );
    let mut body = chat("prod-4o");
    body["stream_options"] = json!({});
    assert!(check(&r, &request(DATED, KEY, &body)).is_err());
}
