#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use bytes::Bytes;

use super::*;

fn grant(path: &str, body: &str) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: path.into(),
        headers: vec![(
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        )],
        body: Bytes::from(body.to_string()),
        received_at: Instant::now(),
    }
}

fn body(secret: &str, scope: &str) -> String {
    format!(
        "grant_type=client_credentials&client_id={TEST_CLIENT_ID}&client_secret={}&scope={}",
        secret.replace('~', "%7E"),
        scope.replace(':', "%3A").replace('/', "%2F")
    )
}

#[test]
fn the_grant_is_checked_as_entra_checks_it() {
    let entra = EntraTokens::test_app();
    let path = format!("/{TEST_TENANT_ID}/oauth2/v2.0/token");
    assert_eq!(
        entra.check_grant(&grant(
            &path,
            &body(TEST_CLIENT_SECRET, COGNITIVE_SERVICES_SCOPE)
        )),
        Ok(())
    );
    let cases = [
        (
            grant(
                "/other-tenant/oauth2/v2.0/token",
                &body(TEST_CLIENT_SECRET, COGNITIVE_SERVICES_SCOPE),
            ),
            "AADSTS90002",
        ),
        (
            grant(&path, &body("wrong", COGNITIVE_SERVICES_SCOPE)),
            "AADSTS7000215",
        ),
        (
            grant(
                &path,
                &body(TEST_CLIENT_SECRET, "https://graph.microsoft.com/.default"),
            ),
            "AADSTS70011",
        ),
        (
            grant(
                &path,
                &body(TEST_CLIENT_SECRET, COGNITIVE_SERVICES_SCOPE)
                    .replace("client_credentials", "password"),
            ),
            "AADSTS70003",
        ),
        (
            grant(
                &path,
                &body(TEST_CLIENT_SECRET, COGNITIVE_SERVICES_SCOPE)
                    .replace(TEST_CLIENT_ID, "someone"),
            ),
            "AADSTS700016",
        ),
    ];
    for (req, code) in cases {
        let (_, _, description) = entra.check_grant(&req).unwrap_err();
        assert!(description.starts_with(code), "{description}");
    }
    assert_eq!(aadsts_code("AADSTS7000215: Invalid"), Some(7_000_215));
    assert_eq!(form_value("a=x%2By+z&b=2", "a").as_deref(), Some("x+y z"));
}

#[test]
fn issued_tokens_are_accepted_until_revoked() {
    let entra = EntraTokens::test_app();
    let (token, lifetime) = entra.grant();
    assert_eq!(lifetime, 3599);
    assert!(token.starts_with("eyJ0eXAiOiJKV1Qi") && token.ends_with("fake-entra-signature-0001"));
    assert!(entra.accepts(&token));
    entra.revoke_all();
    assert!(!entra.accepts(&token));
    assert_eq!(entra.issued(), vec![token]);
}
