use super::*;
use crate::config::{Config, FileConfig};

const TOKEN: &str = "an-http-caller-token-0001";

fn gateway() -> Gateway {
    let config =
        Config::from_file(FileConfig::default(), &[("GATEWAY_AUTH_TOKENS", TOKEN)]).unwrap();
    Gateway::new(config).unwrap()
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.parse().unwrap());
    }
    h
}

#[test]
fn either_sdk_header_carries_the_token() {
    let g = gateway();
    for h in [
        headers(&[("authorization", &format!("Bearer {TOKEN}"))]),
        headers(&[("authorization", &format!("bearer  {TOKEN}"))]),
        headers(&[("x-api-key", TOKEN)]),
    ] {
        let caller = check(&g, &h).unwrap();
        assert_eq!(
            &*caller.tenant, "",
            "server.auth_tokens are the unnamed tenant's"
        );
        assert!(caller.key.name.starts_with("token-"));
    }
}

#[test]
fn a_missing_or_wrong_token_is_refused() {
    let g = gateway();
    for h in [
        headers(&[]),
        headers(&[("authorization", "Bearer not-the-token-at-all")]),
        headers(&[("x-api-key", "not-the-token-at-all")]),
        headers(&[("authorization", TOKEN)]),
    ] {
        assert_eq!(check(&g, &h).unwrap_err().class, Class::Authentication);
    }
}

#[test]
fn a_tenant_header_is_read_and_checked() {
    let g = gateway();
    let auth = format!("Bearer {TOKEN}");
    // server.auth_tokens are trusted like the processor's key: they may name a tenant.
    let caller = check(
        &g,
        &headers(&[("authorization", &auth), ("x-tenant", "acme")]),
    )
    .unwrap();
    assert_eq!(&*caller.tenant, "acme");
    let bad = check(
        &g,
        &headers(&[("authorization", &auth), ("x-tenant", "no spaces")]),
    );
    assert_eq!(bad.unwrap_err().class, Class::InvalidRequest);
}
