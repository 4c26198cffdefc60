//! The OAuth2 client-credentials grant (RFC 6749 §4.4) as Microsoft Entra ID takes it, for Azure OpenAI
//! (docs/gateway.md "Azure OpenAI", "Authentication"): an application (its client id) proves itself with its
//! client secret at its tenant's token endpoint and gets an access token for one scope. Pure: the request body
//! only; [`super::TokenSource`] sends it and caches the answer.

use crate::settings::Secret;

/// The scope of Azure OpenAI (Cognitive Services) data-plane tokens.
pub const COGNITIVE_SERVICES_SCOPE: &str = "https://cognitiveservices.azure.com/.default";
/// Entra ID's public-cloud authority; sovereign clouds have their own (`AZURE_AUTHORITY_HOST`).
pub const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com";

/// An application's credentials at one token endpoint. `Debug` shows the client id, never the secret.
pub struct ClientCredentials {
    /// Where the grant goes: `{authority}/{tenant}/oauth2/v2.0/token` unless configured.
    pub token_uri: String,
    /// The application (client) id.
    pub client_id: String,
    /// The client secret.
    pub client_secret: Secret,
    /// The scope asked for, e.g. [`COGNITIVE_SERVICES_SCOPE`].
    pub scope: String,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("token_uri", &self.token_uri)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The v2.0 token endpoint of `tenant` at `authority`.
pub fn token_uri(authority: &str, tenant: &str) -> String {
    format!(
        "{}/{tenant}/oauth2/v2.0/token",
        authority.trim_end_matches('/')
    )
}

impl ClientCredentials {
    /// The `application/x-www-form-urlencoded` body of the grant.
    pub fn grant_body(&self) -> String {
        format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope={}",
            form_encode(&self.client_id),
            form_encode(self.client_secret.expose()),
            form_encode(&self.scope),
        )
    }
}

/// Percent-encodes everything but the unreserved characters (RFC 3986), which every form decoder reads back
/// exactly. Client secrets hold `~`, `.`, `_` and `-`, and may hold anything else.
pub fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[path = "client_credentials_tests.rs"]
mod tests;
