//! The `google` table of a Vertex AI provider (docs/gateway.md "Vertex AI"): project, location, credentials, and
//! the base URL and token source built from them.
//!
//! ```toml
//! [providers.vertex]
//! protocol = "vertex_gemini"          # catalog entries may set protocol = "vertex_anthropic"
//! google = { project = "acme-prod", location = "europe-west4" }
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::adapter::cloud::oauth::{
    CREDENTIALS_ENV, Credentials, DEFAULT_REFRESH_MARGIN, METADATA_HOST, METADATA_HOST_ENV,
    ServiceAccount, TokenSource,
};
use crate::settings::ConfigError;
use service_kit::env::Env;

/// `[providers.<id>.google]`.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct GoogleFile {
    /// The Google Cloud project id.
    pub project: Option<String>,
    /// `global` (the default) or a region such as `us-east5`.
    pub location: Option<String>,
    /// `service_account` (a key file) or `metadata_server`. Unset: a key file when `credentials_file` or
    /// `GOOGLE_APPLICATION_CREDENTIALS` names one, else the metadata server.
    pub credentials: Option<CredentialsKind>,
    /// Path of a service-account key file (overrides `GOOGLE_APPLICATION_CREDENTIALS`).
    pub credentials_file: Option<String>,
    /// Where the JWT is exchanged; defaults to the key file's `token_uri`.
    pub token_uri: Option<String>,
    /// Metadata server `host[:port]`; defaults to `GCE_METADATA_HOST`, else `metadata.google.internal`.
    pub metadata_host: Option<String>,
    /// A token with less than this left is replaced before use (default 300 000 = 5 minutes).
    pub token_refresh_margin_ms: Option<u64>,
}

/// Where a Vertex provider's access tokens come from.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CredentialsKind {
    ServiceAccount,
    MetadataServer,
}

/// What a Vertex provider is built from: its base URL and token source.
pub struct Vertex {
    /// `{host}/v1/projects/{project}/locations/{location}`.
    pub base_url: String,
    pub tokens: Arc<TokenSource>,
}

/// The Vertex host for `location`: the global endpoint, or the region's own.
pub fn default_host(location: &str) -> String {
    if location == "global" {
        "https://aiplatform.googleapis.com".into()
    } else {
        format!("https://{location}-aiplatform.googleapis.com")
    }
}

/// Project ids and locations are lower-case letters, digits and `-`; anything else could walk out of the path.
fn path_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Builds provider `id`'s Vertex settings. `host` is the validated `base_url` when the config gives one (tests,
/// private endpoints), else `None` for Google's endpoint of the location.
pub fn build(
    id: &str,
    file: Option<&GoogleFile>,
    host: Option<&str>,
    env: &dyn Env,
) -> Result<Vertex, ConfigError> {
    let key = |k: &str| format!("providers.{id}.google.{k}");
    let g = file.cloned().unwrap_or_default();
    let project = g
        .project
        .ok_or_else(|| ConfigError::new(key("project"), "required for Vertex AI"))?;
    if !path_word(&project) {
        return Err(ConfigError::new(
            key("project"),
            "project ids use lower-case letters, digits and `-`",
        ));
    }
    let location = g.location.unwrap_or_else(|| "global".into());
    if !path_word(&location) {
        return Err(ConfigError::new(
            key("location"),
            "locations use lower-case letters, digits and `-` (e.g. `global`, `us-east5`)",
        ));
    }
    let host = host.map_or_else(|| default_host(&location), str::to_string);
    let base_url = format!("{host}/v1/projects/{project}/locations/{location}");

    let file_path = g.credentials_file.or_else(|| env.var(CREDENTIALS_ENV));
    let kind = match (g.credentials, &file_path) {
        (Some(kind), _) => kind,
        (None, Some(_)) => CredentialsKind::ServiceAccount,
        (None, None) => CredentialsKind::MetadataServer,
    };
    let credentials = match kind {
        CredentialsKind::ServiceAccount => {
            let path = file_path.ok_or_else(|| {
                ConfigError::new(
                    key("credentials_file"),
                    format!("required for service_account credentials (or set {CREDENTIALS_ENV})"),
                )
            })?;
            let text = std::fs::read_to_string(&path).map_err(|e| {
                ConfigError::new(key("credentials_file"), format!("cannot read {path}: {e}"))
            })?;
            let account = ServiceAccount::parse(&text)
                .map_err(|m| ConfigError::new(key("credentials_file"), format!("{path}: {m}")))?;
            let token_uri = g.token_uri.unwrap_or_else(|| account.token_uri.clone());
            Credentials::ServiceAccount {
                account: Box::new(account),
                token_uri,
            }
        }
        CredentialsKind::MetadataServer => Credentials::MetadataServer {
            host: g
                .metadata_host
                .or_else(|| env.var(METADATA_HOST_ENV))
                .unwrap_or_else(|| METADATA_HOST.into()),
        },
    };
    let margin = g
        .token_refresh_margin_ms
        .map_or(DEFAULT_REFRESH_MARGIN, Duration::from_millis);
    let tokens = TokenSource::new(credentials, margin)
        .map_err(|m| ConfigError::new(format!("providers.{id}.google"), m))?;
    Ok(Vertex {
        base_url,
        tokens: Arc::new(tokens),
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
