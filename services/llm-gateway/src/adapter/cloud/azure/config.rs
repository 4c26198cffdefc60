//! The `azure` table of an Azure OpenAI provider (docs/gateway.md "Azure OpenAI"): the REST surface and its
//! `api-version`, the deployments and the models they run, and Entra ID credentials; the base URL, addressing and
//! token source built from them, and the catalog entries of the deployments.
//!
//! ```toml
//! [providers.azure]
//! protocol = "azure_chat"                       # catalog entries may set protocol = "azure_responses"
//! base_url = "https://acme.openai.azure.com"    # the resource endpoint
//! api_key_env = "AZURE_OPENAI_API_KEY"          # or azure.entra
//! azure = { api = "v1", deployments = { "prod-4o" = "gpt-4o" } }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::adapter::cloud::azure::{AzureApi, Surface, valid_deployment};
use crate::adapter::cloud::oauth::client_credentials::{
    COGNITIVE_SERVICES_SCOPE, ClientCredentials, DEFAULT_AUTHORITY, token_uri,
};
use crate::adapter::cloud::oauth::{Credentials, DEFAULT_REFRESH_MARGIN, TokenSource};
use crate::catalog::{CatalogFile, merged_entry};
use crate::settings::{ConfigError, Secret};
use service_kit::env::Env;

/// The environment variables Azure's identity libraries read for an application's credentials.
pub const TENANT_ENV: &str = "AZURE_TENANT_ID";
pub const CLIENT_ID_ENV: &str = "AZURE_CLIENT_ID";
pub const CLIENT_SECRET_ENV: &str = "AZURE_CLIENT_SECRET";
pub const AUTHORITY_ENV: &str = "AZURE_AUTHORITY_HOST";
/// The catalog's models of Azure OpenAI, which deployments name: `azure/<model>`.
pub const CATALOG_PREFIX: &str = "azure/";

/// `[providers.<id>.azure]`.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct AzureFile {
    /// `v1` (the default) or `deployments`.
    pub api: Option<Surface>,
    /// The `api-version` query: required on the deployments surface (e.g. `2024-10-21`); on v1 only `preview`.
    pub api_version: Option<String>,
    /// Deployment name → the model it runs, a name of the catalog's `azure/…` entries (`gpt-4o`), whose limits,
    /// capabilities and prices the deployment gets.
    #[serde(default)]
    pub deployments: BTreeMap<String, String>,
    /// Authenticate with Entra ID access tokens instead of a key.
    pub entra: Option<EntraFile>,
}

/// `[providers.<id>.azure.entra]`: an application's client credentials.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct EntraFile {
    /// The directory (tenant) id; defaults to `AZURE_TENANT_ID`.
    pub tenant_id: Option<String>,
    /// The application (client) id; defaults to `AZURE_CLIENT_ID`.
    pub client_id: Option<String>,
    /// The variable holding the client secret; defaults to `AZURE_CLIENT_SECRET`.
    pub client_secret_env: Option<String>,
    /// The authority; defaults to `AZURE_AUTHORITY_HOST`, else `https://login.microsoftonline.com`.
    pub authority_host: Option<String>,
    /// The token endpoint; defaults to `{authority_host}/{tenant_id}/oauth2/v2.0/token` (tests point it at a fake).
    pub token_uri: Option<String>,
    /// The scope asked for; defaults to `https://cognitiveservices.azure.com/.default`.
    pub scope: Option<String>,
    /// A token with less than this left is replaced before use (default 300 000 = 5 minutes).
    pub token_refresh_margin_ms: Option<u64>,
}

/// What an Azure provider is built from.
pub struct Azure {
    /// `{endpoint}/openai`.
    pub base_url: String,
    pub api: AzureApi,
    /// Entra ID tokens, when the provider uses them.
    pub tokens: Option<Arc<TokenSource>>,
}

/// Builds provider `id`'s Azure settings. `endpoint` is its validated base URL (the resource endpoint; a trailing
/// `/openai` or `/openai/v1`, as copied from Azure's samples, is dropped); `has_key` says `api_key_env` is set.
pub fn build(
    id: &str,
    file: Option<&AzureFile>,
    endpoint: &str,
    has_key: bool,
    env: &dyn Env,
) -> Result<Azure, ConfigError> {
    let key = |k: &str| format!("providers.{id}.azure.{k}");
    let a = file.cloned().unwrap_or_default();
    let api = AzureApi {
        surface: a.api.unwrap_or_default(),
        api_version: a.api_version,
    };
    if let Some(v) = &api.api_version
        && (v.is_empty()
            || !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'))
    {
        return Err(ConfigError::new(
            key("api_version"),
            "an api-version is letters, digits, `-` and `.` (e.g. `2024-10-21`, `preview`)",
        ));
    }
    if api.surface == Surface::Deployments && api.api_version.is_none() {
        return Err(ConfigError::new(
            key("api_version"),
            "required with api = \"deployments\" (e.g. \"2024-10-21\", or a preview version for newer models)",
        ));
    }
    for (deployment, model) in &a.deployments {
        if !valid_deployment(deployment) {
            return Err(ConfigError::new(
                key(&format!("deployments.{deployment}")),
                "deployment names are letters, digits, `-`, `_` and `.`",
            ));
        }
        if model.trim().is_empty() {
            return Err(ConfigError::new(
                key(&format!("deployments.{deployment}")),
                "name the model the deployment runs (e.g. \"gpt-4o\")",
            ));
        }
    }
    let tokens = match &a.entra {
        None => None,
        Some(_) if has_key => {
            return Err(ConfigError::new(
                format!("providers.{id}.api_key_env"),
                "an Azure provider authenticates with api_key_env or azure.entra, not both",
            ));
        }
        Some(entra) => Some(Arc::new(entra_tokens(id, entra, env)?)),
    };
    let endpoint = endpoint
        .strip_suffix("/openai/v1")
        .or_else(|| endpoint.strip_suffix("/openai"))
        .unwrap_or(endpoint);
    Ok(Azure {
        base_url: format!("{endpoint}/openai"),
        api,
        tokens,
    })
}

/// The token source of `[providers.<id>.azure.entra]`, its values defaulted from Azure's environment variables.
fn entra_tokens(id: &str, e: &EntraFile, env: &dyn Env) -> Result<TokenSource, ConfigError> {
    let key = |k: &str| format!("providers.{id}.azure.entra.{k}");
    let client_id = e
        .client_id
        .clone()
        .or_else(|| env.var(CLIENT_ID_ENV))
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| {
            ConfigError::new(
                key("client_id"),
                format!("required (or set {CLIENT_ID_ENV})"),
            )
        })?;
    let secret_env = e.client_secret_env.as_deref().unwrap_or(CLIENT_SECRET_ENV);
    let client_secret = env
        .var(secret_env)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ConfigError::new(
                key("client_secret_env"),
                format!("environment variable {secret_env} is not set"),
            )
        })?;
    let token_uri = match &e.token_uri {
        Some(uri) => uri.clone(),
        None => {
            let tenant = e
                .tenant_id
                .clone()
                .or_else(|| env.var(TENANT_ENV))
                .ok_or_else(|| {
                    ConfigError::new(key("tenant_id"), format!("required (or set {TENANT_ENV})"))
                })?;
            if tenant.is_empty()
                || !tenant
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            {
                return Err(ConfigError::new(
                    key("tenant_id"),
                    "a tenant id is a GUID or a domain name",
                ));
            }
            let authority = e
                .authority_host
                .clone()
                .or_else(|| env.var(AUTHORITY_ENV))
                .unwrap_or_else(|| DEFAULT_AUTHORITY.into());
            token_uri(&authority, &tenant)
        }
    };
    if !(token_uri.starts_with("https://") || token_uri.starts_with("http://")) {
        return Err(ConfigError::new(
            key("token_uri"),
            format!("`{token_uri}` must be an http(s) URL"),
        ));
    }
    let credentials = ClientCredentials {
        token_uri,
        client_id,
        client_secret: Secret::new(client_secret),
        scope: e
            .scope
            .clone()
            .unwrap_or_else(|| COGNITIVE_SERVICES_SCOPE.into()),
    };
    let margin = e
        .token_refresh_margin_ms
        .map_or(DEFAULT_REFRESH_MARGIN, Duration::from_millis);
    TokenSource::new(
        Credentials::ClientCredentials(Box::new(credentials)),
        margin,
    )
    .map_err(|m| ConfigError::new(format!("providers.{id}.azure.entra"), m))
}

/// The catalog entries of the providers' deployments: `<provider>/<deployment>` gets the entry of the model the
/// deployment runs (`azure/<model>`, merged over `layers`), named after the deployment. Config entries for the
/// deployment itself go on top of these, field by field, like any override.
pub fn deployment_models<'a>(
    providers: impl IntoIterator<Item = (&'a str, &'a AzureFile)>,
    layers: &[&CatalogFile],
) -> Result<CatalogFile, ConfigError> {
    let mut out = CatalogFile::default();
    for (id, azure) in providers {
        for (deployment, model) in &azure.deployments {
            let template = format!("{CATALOG_PREFIX}{model}");
            let Some(mut entry) = merged_entry(layers, &template) else {
                return Err(ConfigError::new(
                    format!("providers.{id}.azure.deployments.{deployment}"),
                    format!(
                        "no catalog entry `{template}`: name a model of the bundled Azure catalog or add [models.\"{template}\"]"
                    ),
                ));
            };
            let id_here = format!("{id}/{deployment}");
            if id_here != template {
                let shown = entry.display_name.take().unwrap_or_else(|| model.clone());
                entry.display_name = Some(format!("{shown}: {deployment}"));
            }
            // The template's fallbacks are another model's business.
            entry.fallbacks = None;
            // Token counts need the model's tokenizer, which its name says and the deployment's does not.
            entry.tokenizer = entry
                .tokenizer
                .or_else(|| crate::catalog::TokenizerName::of_model(model));
            out.models.insert(id_here, entry);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
