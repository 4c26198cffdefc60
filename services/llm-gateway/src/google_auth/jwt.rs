//! The service-account key file and the signed JWT the OAuth2 JWT bearer grant exchanges for an access token
//! (docs/gateway.md "Vertex AI", "Authentication"). Pure: no clock, no I/O; the caller passes the time.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;

/// The OAuth scope Vertex AI accepts.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long a signed assertion is valid: Google accepts at most one hour.
pub const ASSERTION_LIFETIME_SECS: u64 = 3600;

/// A parsed service-account key. `Debug` shows the account, never the key.
pub struct ServiceAccount {
    /// `client_email`: the JWT issuer.
    pub client_email: String,
    /// `private_key_id`: the JWT `kid`, so Google picks the right public key.
    pub private_key_id: String,
    /// `token_uri`: where the JWT is exchanged (the key file's, unless the config overrides it).
    pub token_uri: String,
    key: RsaKeyPair,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

#[derive(serde::Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key_id: Option<String>,
    private_key: Option<String>,
    token_uri: Option<String>,
}

/// Google's token endpoint, for key files that do not name one.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

impl ServiceAccount {
    /// Parses a key file's JSON. Errors name the field and never quote the key.
    pub fn parse(json: &str) -> Result<ServiceAccount, String> {
        let file: KeyFile = serde_json::from_str(json)
            .map_err(|e| format!("not a service-account key file (line {})", e.line()))?;
        if file.kind.as_deref() != Some("service_account") {
            return Err("`type` is not \"service_account\"".into());
        }
        let client_email = file
            .client_email
            .filter(|e| !e.is_empty())
            .ok_or("`client_email` is missing")?;
        let pem = file.private_key.ok_or("`private_key` is missing")?;
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
            .map_err(|_| "`private_key` is not a PEM PKCS#8 key".to_string())?;
        let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|_| "`private_key` is not an RSA key".to_string())?;
        Ok(ServiceAccount {
            client_email,
            private_key_id: file.private_key_id.unwrap_or_default(),
            token_uri: file
                .token_uri
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| DEFAULT_TOKEN_URI.into()),
            key,
        })
    }

    /// The signed JWT for the bearer grant, issued at `now` (Unix seconds) for `audience` (the token URI).
    pub fn assertion(&self, now: u64, audience: &str) -> Result<String, String> {
        let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
        if !self.private_key_id.is_empty() {
            header["kid"] = self.private_key_id.clone().into();
        }
        let claims = serde_json::json!({
            "iss": self.client_email,
            "scope": CLOUD_PLATFORM_SCOPE,
            "aud": audience,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME_SECS,
        });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = sign_rs256(&self.key, input.as_bytes())?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// RSASSA-PKCS1-v1_5 with SHA-256 (deterministic: the same key and message give the same signature).
fn sign_rs256(key: &RsaKeyPair, message: &[u8]) -> Result<Vec<u8>, String> {
    let mut signature = vec![0; key.public_modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        message,
        &mut signature,
    )
    .map_err(|_| "signing the JWT failed".to_string())?;
    Ok(signature)
}

/// The form body of the JWT bearer grant (RFC 7523). The assertion is base64url and dots, so it needs no escaping.
pub fn grant_body(assertion: &str) -> String {
    format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const KEY_FILE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fake-provider/fixtures/vertex/service_account.json"
    ));

    /// `openssl dgst -sha256 -sign` of `eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0ZXN0In0` with the test key, base64url:
    /// an independent implementation's signature for the same key and message.
    const OPENSSL_SIGNATURE: &str = "BgBsP0jCXaRtGiTfvB4sqDddLsQBV4x12MsZK8l0QqVrdL2-0cpR1mKqcliWIUKYm62j04uEvnoFuPYTHYtrfdVsh3nu7qzpAd1gTtDPp3-KaN-MfscVamgHujmLcMPvYxtegMsCv7EobRdPmQsqMOwg07Jf6gG0QkVUF5Y3Sn3Hn11QYmp4qRoRW9wNXxrYYca6N1INGRLdqUE4nBIbSiaL0igeJSY4JlJxFJsCeq2cvU2mByiKzv2J1SKZ3HNUaolnTYjm7Nbdl6v7Al38q1eleeZ4GuDmR7QXTIcY03KXMz-_ZbIjB8cJGs5-o7T6z_9tlLLDTTqSQxrb09xc7g";

    #[test]
    fn signing_matches_openssl_for_the_same_key_and_message() {
        let sa = ServiceAccount::parse(KEY_FILE).unwrap();
        let sig = sign_rs256(&sa.key, b"eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0ZXN0In0").unwrap();
        assert_eq!(URL_SAFE_NO_PAD.encode(sig), OPENSSL_SIGNATURE);
    }

    #[test]
    fn the_assertion_carries_the_claims_google_checks() {
        let sa = ServiceAccount::parse(KEY_FILE).unwrap();
        let jwt = sa
            .assertion(1_700_000_000, "http://127.0.0.1:9/token")
            .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let json = |s: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap()
        };
        assert_eq!(
            json(parts[0]),
            serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "3f9c2a7d61b04e58a1c9d7e2f4b6a8c0d1e3f5a7"})
        );
        assert_eq!(
            json(parts[1]),
            serde_json::json!({
                "iss": "gateway@acme-llm-test.iam.gserviceaccount.com",
                "scope": CLOUD_PLATFORM_SCOPE,
                "aud": "http://127.0.0.1:9/token",
                "iat": 1_700_000_000u64,
                "exp": 1_700_003_600u64,
            })
        );
        assert_eq!(sa.token_uri, "https://oauth2.googleapis.com/token");
        assert!(grant_body(&jwt).ends_with(&jwt));
    }

    #[test]
    fn bad_key_files_name_the_field_and_never_quote_the_key() {
        let cases = [
            ("{", "not a service-account key file"),
            (r#"{"type": "authorized_user"}"#, "`type`"),
            (r#"{"type": "service_account"}"#, "`client_email`"),
            (
                r#"{"type": "service_account", "client_email": "a@b"}"#,
                "`private_key` is missing",
            ),
            (
                r#"{"type": "service_account", "client_email": "a@b", "private_key": "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"}"#,
                "not an RSA key",
            ),
        ];
        for (json, want) in cases {
            let err = ServiceAccount::parse(json).unwrap_err();
            assert!(err.contains(want), "{err} / {want}");
            assert!(!err.contains("c2VjcmV0"), "{err}");
        }
        let sa = ServiceAccount::parse(KEY_FILE).unwrap();
        let shown = format!("{sa:?}");
        assert!(!shown.contains("PRIVATE"), "{shown}");
    }
}
