//! Azure OpenAI for the fakes: a resource (its key, its deployments and the models they run), a Microsoft Entra ID
//! token endpoint that checks an application's client credentials the way Entra does, and
//! [`FakeProvider::serve_azure`], which makes a fake check every request as the resource would: the credential,
//! the route and its `api-version`, the deployment, then OpenAI's body rules for the model the deployment runs
//! ([`crate::validate`]'s Azure module).
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use fake_provider::{AzureResource, EntraTokens, FakeProvider};
//!
//! let entra = EntraTokens::test_app();
//! let login = FakeProvider::start().await?;
//! login.set_fallback(entra.endpoint());
//! let resource = AzureResource::new(fake_provider::azure::TEST_API_KEY, Some(&entra));
//! resource.deploy("prod-4o", "gpt-4o");
//! let azure = FakeProvider::start().await?;
//! azure.serve_azure(&resource);
//! // the gateway's token_uri is format!("{}/{}/oauth2/v2.0/token", login.base_url(), entra.tenant())
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;

use crate::ledger::IssuedTokens;
use crate::{FakeProvider, Recorded, Reply, lock};

/// The test application's directory (tenant) id.
pub const TEST_TENANT_ID: &str = "4d2a7c10-e2e0-4f00-9a3b-0fa4e5c7d1b2";
/// The test application's (client) id.
pub const TEST_CLIENT_ID: &str = "9b1e6f3a-e2e0-4c55-8d7e-51c0a9f2e6d4";
/// The test application's client secret.
pub const TEST_CLIENT_SECRET: &str = "e2E8Q~fakeEntraSecret.0123456789_abcdefAZ";
/// The test resource's key.
pub const TEST_API_KEY: &str = "e2e0azure0openai0key0c0ffee0000000000042";
/// The scope Azure OpenAI tokens are asked for.
pub const COGNITIVE_SERVICES_SCOPE: &str = "https://cognitiveservices.azure.com/.default";
/// The dated `api-version`s the fake resource serves: the GA one and the previews the gateway is documented with.
pub const API_VERSIONS: [&str; 5] = [
    "2024-10-21",
    "2024-12-01-preview",
    "2025-01-01-preview",
    "2025-03-01-preview",
    "2025-04-01-preview",
];

/// How long issued tokens live unless told otherwise (Entra's usual value).
const DEFAULT_LIFETIME_SECS: u64 = 3599;

/// Tokens issued by a fake Entra ID token endpoint to one application, and the check of a bearer token against them.
/// Clones share state.
#[derive(Clone)]
pub struct EntraTokens {
    inner: Arc<EntraInner>,
}

struct EntraInner {
    tenant: String,
    client_id: String,
    client_secret: String,
    ledger: IssuedTokens,
}

impl EntraTokens {
    /// Tokens for the application `client_id` of `tenant`, proving itself with `client_secret`.
    pub fn new(tenant: &str, client_id: &str, client_secret: &str) -> EntraTokens {
        EntraTokens {
            inner: Arc::new(EntraInner {
                tenant: tenant.into(),
                client_id: client_id.into(),
                client_secret: client_secret.into(),
                ledger: IssuedTokens::new(DEFAULT_LIFETIME_SECS),
            }),
        }
    }

    /// Tokens for the test application ([`TEST_TENANT_ID`], [`TEST_CLIENT_ID`], [`TEST_CLIENT_SECRET`]).
    pub fn test_app() -> EntraTokens {
        EntraTokens::new(TEST_TENANT_ID, TEST_CLIENT_ID, TEST_CLIENT_SECRET)
    }

    /// The tenant whose token endpoint this is.
    pub fn tenant(&self) -> &str {
        &self.inner.tenant
    }

    pub(crate) fn refuse(&self, why: &str) {
        self.inner.ledger.refuse(why.into());
    }

    /// The reply of the token endpoint: `POST /{tenant}/oauth2/v2.0/token` with the client-credentials grant,
    /// checked as Entra checks it (tenant, grant type, client id, secret, scope), refused with Entra's `AADSTS`
    /// errors.
    pub fn endpoint(&self) -> Reply {
        let tokens = self.clone();
        Reply::fn_reply(move |req| match tokens.check_grant(req) {
            Ok(()) => tokens.issue(),
            Err((status, error, description)) => {
                tokens.refuse(&description);
                let body = json!({
                    "error": error,
                    "error_description": description,
                    "error_codes": [aadsts_code(&description)],
                    "timestamp": "2026-01-01 00:00:00Z",
                    "trace_id": "00000000-e2e0-0000-0000-000000000000",
                    "correlation_id": "00000000-e2e0-0000-0000-000000000001",
                });
                Reply::json(status, body.to_string())
            }
        })
    }

    fn issue(&self) -> Reply {
        let (token, lifetime) = self.grant();
        Reply::json(
            200,
            json!({"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime, "access_token": token})
                .to_string(),
        )
    }

    /// Issues the next token: it and its lifetime in seconds.
    pub(crate) fn grant(&self) -> (String, u64) {
        // JWT-shaped like Entra's, never a real one: its claims and signature say it comes from the fake.
        self.inner.ledger.issue(|n| {
            let claims = json!({"aud": "https://cognitiveservices.azure.com", "tid": self.inner.tenant, "n": n});
            format!(
                "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.{}.fake-entra-signature-{n:04}",
                URL_SAFE_NO_PAD.encode(claims.to_string())
            )
        })
    }

    /// The grant, checked in Entra's order; the error is `(status, error, error_description)`.
    fn check_grant(&self, req: &Recorded) -> Result<(), (u16, &'static str, String)> {
        let tenant_path = format!("/{}/oauth2/v2.0/token", self.inner.tenant);
        if req.method != "POST" || req.path != tenant_path {
            return Err((
                400,
                "invalid_request",
                format!(
                    "AADSTS90002: Tenant '{}' not found.",
                    req.path.split('/').nth(1).unwrap_or("")
                ),
            ));
        }
        let body = std::str::from_utf8(&req.body).unwrap_or("");
        let form = |key: &str| form_value(body, key);
        if form("grant_type").as_deref() != Some("client_credentials") {
            return Err((
                400,
                "unsupported_grant_type",
                "AADSTS70003: The app requested an unsupported grant type.".into(),
            ));
        }
        let client = form("client_id").unwrap_or_default();
        if client != self.inner.client_id {
            return Err((
                400,
                "unauthorized_client",
                format!(
                    "AADSTS700016: Application with identifier '{client}' was not found in the directory."
                ),
            ));
        }
        if form("client_secret").as_deref() != Some(self.inner.client_secret.as_str()) {
            return Err((
                401,
                "invalid_client",
                format!(
                    "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '{client}'."
                ),
            ));
        }
        if form("scope").as_deref() != Some(COGNITIVE_SERVICES_SCOPE) {
            return Err((
                400,
                "invalid_scope",
                "AADSTS70011: The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid.".into(),
            ));
        }
        Ok(())
    }
}

/// `7000215` of `AADSTS7000215: …`.
fn aadsts_code(description: &str) -> Option<u64> {
    description
        .strip_prefix("AADSTS")?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

impl std::ops::Deref for EntraTokens {
    type Target = IssuedTokens;

    /// The tokens issued, their lifetimes, the refusals.
    fn deref(&self) -> &IssuedTokens {
        &self.inner.ledger
    }
}

/// The decoded value of `key` in an `application/x-www-form-urlencoded` body.
fn form_value(body: &str, key: &str) -> Option<String> {
    body.split('&').find_map(|kv| {
        let value = kv.strip_prefix(key)?.strip_prefix('=')?;
        Some(crate::percent::percent_decode(&value.replace('+', " ")))
    })
}

/// A fake Azure OpenAI resource: its key, its deployments and the models they run, and the Entra application whose
/// tokens it accepts. Clones share state.
#[derive(Clone)]
pub struct AzureResource {
    inner: Arc<ResourceInner>,
}

struct ResourceInner {
    api_key: String,
    entra: Option<EntraTokens>,
    deployments: Mutex<BTreeMap<String, String>>,
}

impl AzureResource {
    /// A resource with this key, accepting the tokens `entra` issues (if any), and no deployments yet.
    pub fn new(api_key: &str, entra: Option<&EntraTokens>) -> AzureResource {
        AzureResource {
            inner: Arc::new(ResourceInner {
                api_key: api_key.into(),
                entra: entra.cloned(),
                deployments: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// Deploys `model` (an OpenAI model name, e.g. `gpt-4o`) as `deployment`.
    pub fn deploy(&self, deployment: &str, model: &str) {
        lock(&self.inner.deployments).insert(deployment.into(), model.into());
    }

    /// The model `deployment` runs, if it exists.
    pub fn model_of(&self, deployment: &str) -> Option<String> {
        lock(&self.inner.deployments).get(deployment).cloned()
    }

    /// Whether `req` carries this resource's key (`api-key`) or a valid Entra token (`authorization: Bearer`);
    /// else the reason, for the 401 Azure answers.
    pub(crate) fn authenticate(&self, req: &Recorded) -> Result<(), &'static str> {
        if let Some(key) = req.header("api-key") {
            return if key == self.inner.api_key {
                Ok(())
            } else {
                Err(INVALID_KEY)
            };
        }
        let bearer = req
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        match (bearer, &self.inner.entra) {
            (Some(token), Some(entra)) if entra.accepts(token) => Ok(()),
            (Some(_), Some(entra)) => {
                entra.refuse("an unknown, revoked or expired bearer token");
                Err(INVALID_TOKEN)
            }
            (Some(_), None) => Err(INVALID_TOKEN),
            (None, _) => Err(INVALID_KEY),
        }
    }
}

/// Azure's 401 message for a missing or wrong key.
pub(crate) const INVALID_KEY: &str = "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.";
/// Azure's 401 message for a bearer token it does not accept.
pub(crate) const INVALID_TOKEN: &str = "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.";

#[cfg(test)]
#[path = "azure_tests.rs"]
mod tests;

impl FakeProvider {
    /// From now on this fake is the Azure OpenAI resource `resource`: every request is checked as the resource
    /// checks it (credential, route and `api-version`, deployment, OpenAI's body rules for the deployment's model)
    /// before it takes a scripted reply, and a refused one gets Azure's error (consuming no scripted reply; it is
    /// kept in [`rejections`](FakeProvider::rejections)).
    pub fn serve_azure(&self, resource: &AzureResource) {
        *lock(&self.handle.state.azure) = Some(resource.clone());
    }
}
