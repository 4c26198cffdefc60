//! Google OAuth2 for the Vertex AI fakes: a token endpoint that verifies
//! service-account JWTs the way Google does (RS256 signature against the
//! account's public key, issuer, audience, scope, lifetime), a metadata
//! server, and the bearer check a Vertex fake applies to every request.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use fake_provider::{FakeProvider, GoogleTokens};
//!
//! let tokens = GoogleTokens::test_account();
//! let oauth = FakeProvider::start().await?;
//! oauth.set_fallback(tokens.endpoint());
//! let vertex = FakeProvider::start().await?;
//! vertex.require_google_token(&tokens);
//! // the gateway's token_uri is format!("{}/token", oauth.base_url())
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::ledger::IssuedTokens;
use crate::{FakeProvider, Recorded, Reply, lock};

/// The test service account of `fixtures/vertex/service_account.json`.
pub const TEST_ACCOUNT_EMAIL: &str = "gateway@acme-llm-test.iam.gserviceaccount.com";
/// The scope Vertex AI needs.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The path of the metadata server's token.
pub const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

/// Google's answer to a request without a valid access token.
const UNAUTHENTICATED: &str = r#"{
  "error": {
    "code": 401,
    "message": "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
    "status": "UNAUTHENTICATED"
  }
}"#;

/// Tokens issued by a fake token endpoint or metadata server, and the
/// check of a bearer token against them. Clones share state.
#[derive(Clone)]
pub struct GoogleTokens {
    inner: Arc<Inner>,
}

struct Inner {
    /// PKCS#1 `RSAPublicKey` DER of the service account.
    public_key: Vec<u8>,
    client_email: String,
    ledger: IssuedTokens,
}

/// How long issued tokens live unless [`GoogleTokens::next_lifetime`] says otherwise (Google's own value).
const DEFAULT_LIFETIME_SECS: u64 = 3599;

impl GoogleTokens {
    /// Tokens for the account whose public key is `public_key_pem` (`-----BEGIN RSA PUBLIC KEY-----`).
    pub fn new(public_key_pem: &str, client_email: &str) -> Result<GoogleTokens, String> {
        let b64: String = public_key_pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let public_key = STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("public key is not PEM: {e}"))?;
        Ok(GoogleTokens {
            inner: Arc::new(Inner {
                public_key,
                client_email: client_email.to_string(),
                ledger: IssuedTokens::new(DEFAULT_LIFETIME_SECS),
            }),
        })
    }

    /// Tokens for the test account of `fixtures/vertex/`.
    ///
    /// # Panics
    ///
    /// If the fixture is unreadable (a broken checkout).
    pub fn test_account() -> GoogleTokens {
        let pem = include_str!("../fixtures/vertex/service_account.pub.pem");
        match GoogleTokens::new(pem, TEST_ACCOUNT_EMAIL) {
            Ok(t) => t,
            Err(e) => panic!("fixtures/vertex/service_account.pub.pem: {e}"),
        }
    }

    /// The reply of a server that is both a token endpoint (`POST` with a
    /// JWT bearer grant, any path) and a metadata server (`GET`
    /// [`METADATA_TOKEN_PATH`] with `Metadata-Flavor: Google`).
    pub fn endpoint(&self) -> Reply {
        let tokens = self.clone();
        Reply::fn_reply(move |req| {
            let verdict = if req.method == "GET" {
                tokens.check_metadata(req)
            } else {
                tokens.check_grant(req)
            };
            match verdict {
                Ok(()) => tokens.issue(),
                Err((status, body, why)) => {
                    tokens.inner.ledger.refuse(why);
                    Reply::json(status, body)
                }
            }
        })
    }

    fn issue(&self) -> Reply {
        // Shaped like Google's, never a real one: `ya29.` then a marker of the fake.
        let (token, lifetime) = self
            .inner
            .ledger
            .issue(|n| format!("ya29.fake-provider-token-{n:04}-c0ffee"));
        Reply::json(
            200,
            json!({"access_token": token, "expires_in": lifetime, "token_type": "Bearer"})
                .to_string(),
        )
    }

    fn check_metadata(&self, req: &Recorded) -> Result<(), (u16, String, String)> {
        if req.path != METADATA_TOKEN_PATH {
            return Err((
                404,
                "Not Found".into(),
                format!("metadata: no route {}", req.path),
            ));
        }
        if req.header("metadata-flavor") != Some("Google") {
            return Err((
                403,
                "Missing required header: Metadata-Flavor".into(),
                "metadata: no Metadata-Flavor: Google".into(),
            ));
        }
        Ok(())
    }

    /// The JWT bearer grant, checked as Google checks it.
    fn check_grant(&self, req: &Recorded) -> Result<(), (u16, String, String)> {
        let refuse = |description: &str| {
            let body = json!({"error": "invalid_grant", "error_description": description});
            (400, body.to_string(), description.to_string())
        };
        let body = std::str::from_utf8(&req.body).map_err(|_| refuse("Bad Request"))?;
        let form = |key: &str| {
            body.split('&')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        };
        if form("grant_type") != Some("urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") {
            return Err((
                400,
                json!({"error": "unsupported_grant_type", "error_description": "Invalid grant_type: "})
                    .to_string(),
                "grant_type is not the JWT bearer grant".into(),
            ));
        }
        let jwt = form("assertion").ok_or_else(|| refuse("Invalid JWT: no assertion"))?;
        let audience = format!(
            "http://{}{}",
            req.header("host").unwrap_or_default(),
            req.path
        );
        self.verify(jwt, &audience).map_err(|e| refuse(&e))
    }

    fn verify(&self, jwt: &str, audience: &str) -> Result<(), String> {
        let mut parts = jwt.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("Invalid JWT: not three segments".into());
        };
        let decode = |seg: &str| -> Result<Value, String> {
            let bytes = URL_SAFE_NO_PAD
                .decode(seg)
                .map_err(|_| "Invalid JWT: a segment is not base64url".to_string())?;
            serde_json::from_slice(&bytes).map_err(|_| "Invalid JWT: a segment is not JSON".into())
        };
        let header = decode(h)?;
        if header["alg"] != "RS256" {
            return Err("Invalid JWT: alg must be RS256".into());
        }
        let signature = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| "Invalid JWT Signature.".to_string())?;
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &self.inner.public_key)
            .verify(format!("{h}.{c}").as_bytes(), &signature)
            .map_err(|_| "Invalid JWT Signature.".to_string())?;
        let claims = decode(c)?;
        if claims["iss"] != self.inner.client_email.as_str() {
            return Err("Invalid JWT: iss is not the service account".into());
        }
        if claims["aud"] != audience {
            return Err(format!("Invalid JWT: aud must be {audience}"));
        }
        let scopes = claims["scope"].as_str().unwrap_or_default();
        if !scopes.split(' ').any(|s| s == CLOUD_PLATFORM_SCOPE) {
            return Err("Invalid JWT: no cloud-platform scope".into());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
        let (Some(iat), Some(exp)) = (iat, exp) else {
            return Err("Invalid JWT: iat and exp are required".into());
        };
        if exp <= iat || exp - iat > 3600 || iat > now + 300 || exp + 300 < now {
            return Err("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.".into());
        }
        Ok(())
    }

    /// Whether `req` carries a bearer token this fake issued and has not
    /// expired; else Google's 401, the reason kept in [`refusals`](Self::refusals).
    pub(crate) fn authenticate(&self, req: &Recorded) -> Result<(), Box<Reply>> {
        let bearer = req
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        match bearer {
            Some(token) if self.accepts(token) => Ok(()),
            Some(_) => {
                self.inner
                    .ledger
                    .refuse("an unknown or expired bearer token".into());
                Err(Box::new(Reply::json(401, UNAUTHENTICATED)))
            }
            None => {
                self.inner.ledger.refuse("no bearer token".into());
                Err(Box::new(Reply::json(401, UNAUTHENTICATED)))
            }
        }
    }
}

impl std::ops::Deref for GoogleTokens {
    type Target = IssuedTokens;

    /// The tokens issued, their lifetimes, the refusals.
    fn deref(&self) -> &IssuedTokens {
        &self.inner.ledger
    }
}

impl FakeProvider {
    /// From now on every request must carry `Authorization: Bearer` with a
    /// token `tokens` issued and that has not expired; any other gets
    /// Google's 401 `UNAUTHENTICATED` (consuming no scripted reply).
    pub fn require_google_token(&self, tokens: &GoogleTokens) {
        *lock(&self.handle.state.google) = Some(tokens.clone());
    }
}
