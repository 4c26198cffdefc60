//! OAuth2 access tokens for the providers that take them instead of an API key: Google's for Vertex AI
//! (docs/gateway.md "Vertex AI", "Authentication") and Microsoft Entra ID's for Azure OpenAI (docs/gateway.md
//! "Azure OpenAI", "Authentication").
//!
//! Three sources:
//! - a Google service-account key file (the provider's `credentials_file`, else `GOOGLE_APPLICATION_CREDENTIALS`): a
//!   JWT signed RS256 with the account's key ([`jwt`]) is exchanged at the token URI (the JWT bearer grant);
//! - the Google metadata server, when the gateway runs on Google Cloud with an attached service account;
//! - an Entra ID application's client id and secret, exchanged at its tenant's token endpoint (the
//!   client-credentials grant, [`client_credentials`]).
//!
//! [`TokenSource::token`] caches the token and fetches a new one when less than the refresh margin is left, one
//! fetch at a time (callers wait for the fetch in progress instead of starting their own). Tokens, keys, secrets
//! and assertions are held as [`Secret`]s and never enter an error message: a refused grant reports the
//! authority's error code and description only.

pub mod client_credentials;
pub mod jwt;
mod token;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::{ErrorKind, ProviderError};
use crate::settings::Secret;

pub use client_credentials::ClientCredentials;
pub use jwt::ServiceAccount;
pub use token::{TokenResponse, needs_refresh};

/// The default metadata server host, and the environment variable Google's libraries read to override it.
pub const METADATA_HOST: &str = "metadata.google.internal";
pub const METADATA_HOST_ENV: &str = "GCE_METADATA_HOST";
/// The environment variable naming a service-account key file.
pub const CREDENTIALS_ENV: &str = "GOOGLE_APPLICATION_CREDENTIALS";
/// Default refresh margin: a token with less than this left is replaced before use.
pub const DEFAULT_REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Where tokens come from.
#[derive(Debug)]
#[allow(
    clippy::enum_variant_names,
    reason = "`ClientCredentials` is the name of the OAuth2 grant it holds"
)]
pub enum Credentials {
    /// A service-account key, exchanged at `token_uri`.
    ServiceAccount {
        account: Box<ServiceAccount>,
        token_uri: String,
    },
    /// The metadata server at `host` (`host[:port]`, plain HTTP as on GCP).
    MetadataServer { host: String },
    /// An Entra ID application's client credentials.
    ClientCredentials(Box<ClientCredentials>),
}

impl Credentials {
    /// What the tokens are, for error messages: `Google access token` or `Entra ID access token`.
    fn label(&self) -> &'static str {
        match self {
            Credentials::ServiceAccount { .. } | Credentials::MetadataServer { .. } => {
                "Google access token"
            }
            Credentials::ClientCredentials(_) => "Entra ID access token",
        }
    }
}

/// A cached access token.
struct Cached {
    token: Secret,
    expires_at: Instant,
}

/// Access tokens for one provider, cached and refreshed before expiry.
pub struct TokenSource {
    credentials: Credentials,
    client: reqwest::Client,
    refresh_margin: Duration,
    cached: Mutex<Option<Cached>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("credentials", &self.credentials)
            .field("refresh_margin", &self.refresh_margin)
            .finish_non_exhaustive()
    }
}

/// How long a token request may take before it fails as a timeout.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

impl TokenSource {
    /// A token source for `credentials`, replacing tokens with less than `refresh_margin` left.
    pub fn new(credentials: Credentials, refresh_margin: Duration) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("llm-gateway/", env!("CARGO_PKG_VERSION")))
            .timeout(FETCH_TIMEOUT)
            // A redirect could carry the assertion to a host nobody configured.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("building the token client failed: {e}"))?;
        Ok(TokenSource {
            credentials,
            client,
            refresh_margin,
            cached: Mutex::new(None),
        })
    }

    /// A valid access token: the cached one while more than the refresh margin is left, else a fresh one.
    pub async fn token(&self) -> Result<Secret, ProviderError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && !needs_refresh(c.expires_at, Instant::now(), self.refresh_margin)
        {
            return Ok(c.token.clone());
        }
        let asked = Instant::now();
        let fresh = self.fetch().await?;
        let token = Secret::new(fresh.access_token);
        *cached = Some(Cached {
            token: token.clone(),
            // Counted from when the request left, so network time never makes the token look younger.
            expires_at: asked + Duration::from_secs(fresh.expires_in),
        });
        Ok(token)
    }

    /// The long-lived secrets of these credentials (an Entra client secret), which must be scrubbed from anything a
    /// provider or token endpoint echoes back. Tokens are short-lived and scrubbed where they are used.
    pub fn secrets(&self) -> Vec<String> {
        match &self.credentials {
            Credentials::ClientCredentials(c) => vec![c.client_secret.expose().to_string()],
            Credentials::ServiceAccount { .. } | Credentials::MetadataServer { .. } => Vec::new(),
        }
    }

    /// Forgets `refused` if it is the cached token, so the next request fetches a fresh one: the provider answered
    /// 401 to it (revoked, or the server's clock disagrees with ours about its expiry).
    pub async fn invalidate(&self, refused: &Secret) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|c| c.token == *refused) {
            *cached = None;
        }
    }

    async fn fetch(&self) -> Result<TokenResponse, ProviderError> {
        let label = self.credentials.label();
        let (request, source) = match &self.credentials {
            Credentials::ServiceAccount { account, token_uri } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let assertion = account
                    .assertion(now, token_uri)
                    .map_err(|m| ProviderError::new(ErrorKind::Auth, format!("{label}: {m}")))?;
                let request = self
                    .client
                    .post(token_uri)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(jwt::grant_body(&assertion));
                (request, "the token endpoint")
            }
            Credentials::MetadataServer { host } => {
                let url = format!(
                    "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
                );
                let request = self.client.get(url).header("metadata-flavor", "Google");
                (request, "the metadata server")
            }
            Credentials::ClientCredentials(c) => {
                let request = self
                    .client
                    .post(&c.token_uri)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(c.grant_body());
                (request, "the token endpoint")
            }
        };
        let response = request.send().await.map_err(|e| {
            // The error text of a failed send can include the URL, never the body; the URL holds no secret.
            let kind = if e.is_timeout() {
                ErrorKind::Timeout
            } else {
                ErrorKind::Network
            };
            ProviderError::new(kind, format!("{label}: {source} unreachable"))
        })?;
        let status = response.status().as_u16();
        let body = response.text().await.map_err(|_| {
            ProviderError::new(
                ErrorKind::Network,
                format!("{label}: reading the answer of {source} failed"),
            )
        })?;
        token::parse(status, &body, label, source)
    }
}
