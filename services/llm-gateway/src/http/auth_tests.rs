use super::*;
use crate::config::FileConfig;

const TOKEN: &str = "an-http-caller-token-0001";

fn config() -> Config {
    Config::from_file(FileConfig::default(), &[("GATEWAY_AUTH_TOKENS", TOKEN)]).unwrap()
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
    let c = config();
    assert!(
        check(
            &c,
            &headers(&[("authorization", &format!("Bearer {TOKEN}"))])
        )
        .is_ok()
    );
    assert!(
        check(
            &c,
            &headers(&[("authorization", &format!("bearer  {TOKEN}"))])
        )
        .is_ok()
    );
    assert!(check(&c, &headers(&[("x-api-key", TOKEN)])).is_ok());
}

#[test]
fn a_missing_or_wrong_token_is_refused() {
    let c = config();
    for h in [
        headers(&[]),
        headers(&[("authorization", "Bearer not-the-token-at-all")]),
        headers(&[("x-api-key", "not-the-token-at-all")]),
        headers(&[("authorization", TOKEN)]),
    ] {
        assert_eq!(check(&c, &h).unwrap_err().class, Class::Authentication);
    }
}
