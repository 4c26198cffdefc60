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
#[path = "jwt_tests.rs"]
mod tests;
