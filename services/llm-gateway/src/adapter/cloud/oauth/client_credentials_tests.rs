use super::*;

#[test]
fn the_grant_body_is_form_encoded_and_debug_hides_the_secret() {
    let c = ClientCredentials {
        token_uri: token_uri(DEFAULT_AUTHORITY, "contoso.onmicrosoft.com"),
        client_id: "6731de76-14a6-49ae-97bc-6eba6914391e".into(),
        client_secret: Secret::new("qWe8Q~a.b_c-d/e+f=g&h i"),
        scope: COGNITIVE_SERVICES_SCOPE.into(),
    };
    assert_eq!(
        c.token_uri,
        "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    );
    assert_eq!(
        c.grant_body(),
        "grant_type=client_credentials&client_id=6731de76-14a6-49ae-97bc-6eba6914391e\
         &client_secret=qWe8Q~a.b_c-d%2Fe%2Bf%3Dg%26h%20i\
         &scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default"
    );
    let shown = format!("{c:?}");
    assert!(shown.contains("6731de76"), "{shown}");
    assert!(!shown.contains("qWe8Q"), "{shown}");
}

#[test]
fn form_encoding_keeps_only_unreserved_characters() {
    assert_eq!(form_encode("aZ09-._~"), "aZ09-._~");
    assert_eq!(form_encode("é"), "%C3%A9");
    assert_eq!(form_encode(""), "");
    assert_eq!(
        token_uri("http://127.0.0.1:9/", "t1"),
        "http://127.0.0.1:9/t1/oauth2/v2.0/token"
    );
}
