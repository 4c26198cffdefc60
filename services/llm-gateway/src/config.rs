//! Configuration: a TOML file (optional) plus environment variables, typed and validated at start-up.
//!
//! Every error names the key it is about (`providers.openai.base_url: …`), so a bad deploy fails loudly before it
//! serves anything. Provider keys are held in [`Secret`], whose `Debug` never prints the value.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::adapter::transport::{RetryPolicy, Timeouts};
use crate::catalog::{Catalog, CatalogFile, ModelEntry, ModelInfo};
use crate::hooks::{DeclarativeHook, HookFile, HookService, HookServiceFile};
use crate::protocol::Protocol;
use service_kit::listen;

pub use crate::settings::{ConfigError, Secret};

/// The configuration file, as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerFile,
    #[serde(default)]
    pub timeouts: TimeoutsFile,
    #[serde(default)]
    pub retry: RetryFile,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderFile>,
    /// Catalog entries that extend or override the bundled catalog.
    #[serde(default)]
    pub models: BTreeMap<String, ModelEntry>,
    /// `[aliases]`: public model names for catalog models (docs/gateway.md "Model names").
    #[serde(default)]
    pub aliases: BTreeMap<String, crate::model_names::AliasFile>,
    /// `[[hooks]]`: declarative hooks, applied in this order.
    #[serde(default)]
    pub hooks: Vec<HookFile>,
    /// `[[hook_services]]`: external `HooksService`s, called in this order after the declarative hooks.
    #[serde(default)]
    pub hook_services: Vec<HookServiceFile>,
    /// `[telemetry]`.
    #[serde(default)]
    pub telemetry: TelemetryFile,
    /// `[limits]`.
    #[serde(default)]
    pub limits: crate::limits::LimitsFile,
    /// `[keys.<name>]`: named caller keys of tenants (`crate::keys::file`).
    #[serde(default)]
    pub keys: BTreeMap<String, crate::keys::file::KeyFile>,
    /// `[redis]`: where keys created at run time live; none when absent.
    #[serde(default)]
    pub redis: Option<crate::keys::file::GatewayRedisFile>,
}

/// `[telemetry]`. Exporting itself is configured by the standard `OTEL_*` variables.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFile {
    /// Record prompts and completions on the `chat` spans (`gen_ai.input.messages`, `gen_ai.output.messages`,
    /// `gen_ai.system_instructions`). Off by default: content may be personal data. The environment variable
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true` / `false`) overrides it.
    #[serde(default)]
    pub capture_message_content: bool,
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerFile {
    /// Address to listen on (env `GATEWAY_LISTEN` overrides).
    pub listen: String,
    /// Bearer tokens callers may present (env `GATEWAY_AUTH_TOKENS`, comma-separated, adds to these).
    pub auth_tokens: Vec<String>,
    /// Serve without caller authentication. Off by default; only for local development.
    pub allow_unauthenticated: bool,
    /// How long in-flight streams may run after SIGTERM before the gateway exits.
    pub shutdown_grace_ms: u64,
    /// Largest request message accepted; larger ones get `RESOURCE_EXHAUSTED`.
    pub max_request_bytes: usize,
    /// Concurrent HTTP/2 streams per caller connection.
    pub max_concurrent_streams: u32,
    /// HTTP/2 receive window of one call: how many bytes of a request a caller may send ahead of the gateway's
    /// reading ([`Config::receive_window`]).
    pub stream_window_bytes: u32,
    /// Idle time after which the server pings a connection (HTTP/2 PING).
    pub keepalive_interval_ms: u64,
    /// How long a ping may go unanswered before the server closes the connection.
    pub keepalive_timeout_ms: u64,
    /// Address of the Prometheus `/metrics` listener (env `GATEWAY_METRICS_LISTEN` overrides); off when unset.
    pub metrics_listen: Option<String>,
    /// Address of the HTTP front door (OpenAI- and Anthropic-compatible endpoints; env `GATEWAY_HTTP_LISTEN`
    /// overrides); off when unset.
    pub http_listen: Option<String>,
    /// Generations in flight across all connections; more get `RESOURCE_EXHAUSTED`.
    pub max_inflight_generations: usize,
    /// Serve TLS (mutual TLS with `client_ca_file`); env `GATEWAY_TLS_CERT_FILE`, `GATEWAY_TLS_KEY_FILE` and
    /// `GATEWAY_TLS_CLIENT_CA_FILE` override its keys. Read at start-up (a SIGHUP does not reload it).
    pub tls: Option<service_kit::tls::ServerTlsFiles>,
}

impl Default for ServerFile {
    fn default() -> Self {
        ServerFile {
            listen: "127.0.0.1:50051".into(),
            auth_tokens: Vec::new(),
            allow_unauthenticated: false,
            shutdown_grace_ms: 30_000,
            max_request_bytes: 32 * 1024 * 1024,
            max_concurrent_streams: 10_000,
            stream_window_bytes: service_kit::grpc::ReceiveWindow::DEFAULT.stream_bytes(),
            keepalive_interval_ms: listen::DEFAULT_KEEPALIVE_INTERVAL_MS,
            keepalive_timeout_ms: listen::DEFAULT_KEEPALIVE_TIMEOUT_MS,
            metrics_listen: None,
            http_listen: None,
            max_inflight_generations: 4096,
            tls: None,
        }
    }
}

/// `[timeouts]`, in milliseconds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsFile {
    pub connect_ms: u64,
    pub first_byte_ms: u64,
    pub idle_ms: u64,
    pub total_ms: u64,
}

impl Default for TimeoutsFile {
    fn default() -> Self {
        let t = Timeouts::default();
        TimeoutsFile {
            connect_ms: millis(t.connect),
            first_byte_ms: millis(t.first_byte),
            idle_ms: millis(t.idle),
            total_ms: millis(t.total),
        }
    }
}

/// `[retry]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryFile {
    pub max_attempts: u32,
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
    pub max_retry_after_ms: u64,
}

impl Default for RetryFile {
    fn default() -> Self {
        let r = RetryPolicy::default();
        RetryFile {
            max_attempts: r.max_attempts,
            base_delay_ms: millis(r.base_delay),
            max_delay_ms: millis(r.max_delay),
            max_retry_after_ms: millis(r.max_retry_after),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `[providers.<id>]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ProviderFile {
    /// Wire protocol.
    pub protocol: Protocol,
    /// Base URL; for `openai_chat` it includes `/v1`, for `anthropic` it does not (as in the official SDKs).
    pub base_url: Option<String>,
    /// Environment variable that overrides `base_url`.
    pub base_url_env: Option<String>,
    /// Environment variable holding the API key. Unset means no key (local servers).
    pub api_key_env: Option<String>,
    /// Serve `provider/<anything>` even when the model is not in the catalog (vLLM, Ollama, …), with the limits
    /// below and no price.
    #[serde(default)]
    pub allow_unlisted_models: bool,
    /// Context window assumed for unlisted models.
    #[serde(default = "default_unlisted_context")]
    pub unlisted_context_window: u64,
    /// Maximum output assumed for unlisted models.
    #[serde(default = "default_unlisted_output")]
    pub unlisted_max_output_tokens: u64,
    /// Vertex AI (`vertex_gemini`, `vertex_anthropic`): project, location and credentials. `base_url`, when set,
    /// replaces Google's host only.
    #[serde(default)]
    pub google: Option<crate::adapter::cloud::vertex::config::GoogleFile>,
    /// `[providers.<id>.aws]`: region and profile of a `bedrock` provider (docs/gateway.md "AWS Bedrock").
    #[serde(default)]
    pub aws: Option<crate::adapter::cloud::aws::auth::AwsFile>,
    /// `[providers.<id>.azure]`: surface, `api-version`, deployments and Entra ID credentials of an Azure OpenAI
    /// provider (docs/gateway.md "Azure OpenAI").
    #[serde(default)]
    pub azure: Option<crate::adapter::cloud::azure::config::AzureFile>,
}

fn default_unlisted_context() -> u64 {
    32_768
}
fn default_unlisted_output() -> u64 {
    4_096
}

/// A provider ready to serve.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Provider id (the `provider` of `provider/model`).
    pub id: String,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Validated base URL without a trailing `/`.
    pub base_url: String,
    /// API key (may be empty for local servers).
    pub api_key: Secret,
    /// OAuth2 access tokens (Vertex AI; Azure with Entra ID), used instead of `api_key`.
    pub tokens: Option<std::sync::Arc<crate::adapter::cloud::oauth::TokenSource>>,
    /// An Azure OpenAI provider's REST surface and `api-version`.
    pub azure: Option<crate::adapter::cloud::azure::AzureApi>,
    /// See [`ProviderFile::allow_unlisted_models`].
    pub allow_unlisted_models: bool,
    pub unlisted_context_window: u64,
    pub unlisted_max_output_tokens: u64,
    /// The AWS credentials and region that sign a `bedrock` provider's requests.
    pub signer: Option<std::sync::Arc<crate::adapter::cloud::aws::auth::AwsSigner>>,
}

impl Provider {
    /// A catalog entry for an unlisted model of this provider.
    pub fn unlisted_model(&self, id: &str, name: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_string(),
            provider: self.id.clone(),
            name: name.to_string(),
            display_name: name.to_string(),
            protocol: self.protocol,
            context_window: self.unlisted_context_window,
            max_input_tokens: 0,
            max_output_tokens: self.unlisted_max_output_tokens,
            capabilities: crate::catalog::Capabilities::default(),
            pricing: None,
        }
    }
}

/// The validated configuration the gateway runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// The caller keys of the configuration: `[keys.<name>]` and `server.auth_tokens`; reloadable.
    pub keys: std::sync::Arc<crate::keys::KeyTable>,
    /// `[redis]`, read at start-up: run-time keys are off when `None`.
    pub redis: Option<crate::keys::file::RedisSettings>,
    pub allow_unauthenticated: bool,
    pub shutdown_grace: Duration,
    pub max_request_bytes: usize,
    pub max_concurrent_streams: u32,
    /// HTTP/2 receive windows of a call and of a connection (`server.stream_window_bytes`).
    pub receive_window: service_kit::grpc::ReceiveWindow,
    pub keepalive: service_kit::grpc::Keepalive,
    pub timeouts: Timeouts,
    pub retry: RetryPolicy,
    pub providers: BTreeMap<String, Provider>,
    pub catalog: Catalog,
    /// The aliases, and how a requested model name finds its catalog model.
    pub names: crate::model_names::ModelNames,
    /// Where `/metrics` is served; `None` turns the listener off.
    pub metrics_listen: Option<SocketAddr>,
    /// Where the HTTP front door is served; `None` turns it off.
    pub http_listen: Option<SocketAddr>,
    /// Global limit of generations in flight.
    pub max_inflight_generations: usize,
    /// Record message content on spans (`telemetry.capture_message_content`); reloadable.
    pub capture_message_content: bool,
    /// Declarative hooks, in config order.
    pub hooks: Vec<DeclarativeHook>,
    /// Hook services, in config order.
    pub hook_services: Vec<HookService>,
    /// TLS of the listener (checked files); plaintext when `None`.
    pub tls: Option<service_kit::tls::ServerTls>,
    /// `[limits]`: request and provider-stream sizes; reloadable.
    pub limits: crate::limits::Limits,
}

pub use service_kit::env::{Env, ProcessEnv};

/// Built-in providers, enabled by their environment variables when the file does not define them.
const BUILTIN: &[(&str, Protocol, &str, &str, &str)] = &[
    (
        "openai",
        Protocol::OpenaiChat,
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ),
    (
        "anthropic",
        Protocol::Anthropic,
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
    (
        "gemini",
        Protocol::Gemini,
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
    ),
];

/// What would enable a bundled model whose providers are not configured (`None` when `providers` is empty): a
/// built-in provider's key variable first, else each provider's `[providers.<id>]` table.
pub fn enable_hint(providers: &[String]) -> Option<String> {
    let builtin = |id: &str| BUILTIN.iter().find(|b| b.0 == id).map(|b| b.3);
    let mut keys: Vec<String> = providers
        .iter()
        .filter_map(|p| builtin(p))
        .map(|env| format!("set {env} and restart the gateway"))
        .collect();
    if keys.is_empty() {
        keys = providers
            .iter()
            .map(|p| format!("add a `[providers.{p}]` table to the gateway's configuration"))
            .collect();
    }
    (!keys.is_empty()).then(|| keys.join(", or "))
}

impl Config {
    /// Loads `path` (when given) and the environment, and validates everything.
    pub fn load(path: Option<&Path>, env: &dyn Env) -> Result<Config, ConfigError> {
        let file = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    ConfigError::new("config", format!("cannot read {}: {e}", p.display()))
                })?;
                Self::parse(&text)?
            }
            None => FileConfig::default(),
        };
        Self::from_file(file, env)
    }

    /// Parses the TOML text of a configuration file.
    pub fn parse(text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let key = e
                .span()
                .map(|s| format!("config (bytes {}..{})", s.start, s.end))
                .unwrap_or("config".into());
            ConfigError::new(key, e.message().to_string())
        })
    }

    /// Validates a parsed file against the environment.
    pub fn from_file(file: FileConfig, env: &dyn Env) -> Result<Config, ConfigError> {
        let listen =
            listen::required_address(env, "GATEWAY_LISTEN", "server.listen", &file.server.listen)?;
        let tokens = crate::keys::file::auth_tokens(
            &file.server.auth_tokens,
            file.server.allow_unauthenticated || !file.keys.is_empty(),
            env,
        )?;
        let keys = std::sync::Arc::new(crate::keys::file::table(&file.keys, &tokens, env)?);
        let redis = crate::keys::file::redis(file.redis.as_ref(), env)?;
        check_server_limits(&file.server)?;
        let (keepalive, receive_window) = listen::http2(
            file.server.keepalive_interval_ms,
            file.server.keepalive_timeout_ms,
            file.server.stream_window_bytes,
        )?;
        let metrics_listen = listen::address(
            env,
            "GATEWAY_METRICS_LISTEN",
            "server.metrics_listen",
            file.server.metrics_listen.as_deref(),
        )?;
        let http_listen = listen::address(
            env,
            "GATEWAY_HTTP_LISTEN",
            "server.http_listen",
            file.server.http_listen.as_deref(),
        )?;
        let tls = server_tls(&file.server, env)?;
        let timeouts = timeouts(&file.timeouts)?;
        let retry = retry(&file.retry)?;
        let capture_message_content = capture_message_content(&file.telemetry, env)?;
        let providers = providers(&file.providers, env)?;
        let catalog = catalog(file.models, &file.providers, &providers)?;
        let names = crate::model_names::ModelNames::compile(&file.aliases, &catalog, |id| {
            serves(&catalog, &providers, id)
        })?;
        let (hooks, hook_services) = crate::hooks::compile(&file.hooks, &file.hook_services)?;
        let limits = file.limits.validate()?;

        Ok(Config {
            listen,
            keys,
            redis,
            allow_unauthenticated: file.server.allow_unauthenticated,
            shutdown_grace: Duration::from_millis(file.server.shutdown_grace_ms),
            max_request_bytes: file.server.max_request_bytes,
            max_concurrent_streams: file.server.max_concurrent_streams,
            receive_window,
            keepalive,
            timeouts,
            retry,
            providers,
            catalog,
            names,
            metrics_listen,
            http_listen,
            max_inflight_generations: file.server.max_inflight_generations,
            capture_message_content,
            hooks,
            hook_services,
            tls,
            limits,
        })
    }
}

/// The server's size and concurrency limits are in range.
fn check_server_limits(server: &ServerFile) -> Result<(), ConfigError> {
    if server.max_request_bytes < 1024 {
        return Err(ConfigError::new(
            "server.max_request_bytes",
            "must be at least 1024",
        ));
    }
    if server.max_concurrent_streams == 0 {
        return Err(ConfigError::new(
            "server.max_concurrent_streams",
            "must be positive",
        ));
    }
    // The semaphore behind the limit holds at most `usize::MAX >> 3` permits.
    if server.max_inflight_generations == 0 || server.max_inflight_generations > 1_000_000 {
        return Err(ConfigError::new(
            "server.max_inflight_generations",
            "must be between 1 and 1000000",
        ));
    }

    Ok(())
}

/// `[server.tls]` (or the `GATEWAY_TLS_*` variables), files loaded and checked.
fn server_tls(
    server: &ServerFile,
    env: &dyn Env,
) -> Result<Option<service_kit::tls::ServerTls>, ConfigError> {
    service_kit::tls::ServerTlsFiles::with_env(server.tls.clone(), "GATEWAY", |name| env.var(name))
        .and_then(|files| {
            files
                .as_ref()
                .map(service_kit::tls::ServerTls::load)
                .transpose()
        })
        .map_err(|e| ConfigError::new(format!("server.tls.{}", e.key), e.message))
}

/// `[timeouts]`, every one positive.
fn timeouts(t: &TimeoutsFile) -> Result<Timeouts, ConfigError> {
    for (k, v) in [
        ("timeouts.connect_ms", t.connect_ms),
        ("timeouts.first_byte_ms", t.first_byte_ms),
        ("timeouts.idle_ms", t.idle_ms),
        ("timeouts.total_ms", t.total_ms),
    ] {
        if v == 0 {
            return Err(ConfigError::new(k, "must be positive"));
        }
    }
    Ok(Timeouts {
        connect: Duration::from_millis(t.connect_ms),
        first_byte: Duration::from_millis(t.first_byte_ms),
        idle: Duration::from_millis(t.idle_ms),
        total: Duration::from_millis(t.total_ms),
    })
}

/// `[retry]`: 1 to 10 attempts, the base delay not above the maximum.
fn retry(r: &RetryFile) -> Result<RetryPolicy, ConfigError> {
    if r.max_attempts == 0 || r.max_attempts > 10 {
        return Err(ConfigError::new(
            "retry.max_attempts",
            "must be between 1 and 10",
        ));
    }
    if r.base_delay_ms > r.max_delay_ms {
        return Err(ConfigError::new(
            "retry.base_delay_ms",
            "must not exceed retry.max_delay_ms",
        ));
    }
    Ok(RetryPolicy {
        max_attempts: r.max_attempts,
        base_delay: Duration::from_millis(r.base_delay_ms),
        max_delay: Duration::from_millis(r.max_delay_ms),
        max_retry_after: Duration::from_millis(r.max_retry_after_ms),
    })
}

/// Whether spans carry message content: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` over
/// `telemetry.capture_message_content`.
fn capture_message_content(t: &TelemetryFile, env: &dyn Env) -> Result<bool, ConfigError> {
    Ok(
        match env.var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
            None => t.capture_message_content,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => true,
                "false" | "0" | "" => false,
                _ => {
                    return Err(ConfigError::new(
                        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                        "must be true or false",
                    ));
                }
            },
        },
    )
}

/// The configured providers, then the built-in ones whose environment variables are set.
fn providers(
    files: &BTreeMap<String, ProviderFile>,
    env: &dyn Env,
) -> Result<BTreeMap<String, Provider>, ConfigError> {
    let mut providers = BTreeMap::new();
    for (id, p) in files {
        providers.insert(id.clone(), provider_from_file(id, p, env)?);
    }
    for (id, protocol, base_url, key_env, url_env) in BUILTIN {
        if providers.contains_key(*id) {
            continue;
        }
        if env.var(key_env).is_none() && env.var(url_env).is_none() {
            continue;
        }
        let p = ProviderFile {
            protocol: *protocol,
            base_url: Some((*base_url).into()),
            base_url_env: Some((*url_env).into()),
            api_key_env: Some((*key_env).into()),
            allow_unlisted_models: false,
            unlisted_context_window: default_unlisted_context(),
            unlisted_max_output_tokens: default_unlisted_output(),
            google: None,
            aws: None,
            azure: None,
        };
        providers.insert((*id).to_string(), provider_from_file(id, &p, env)?);
    }

    Ok(providers)
}

/// The bundled catalog, the Azure deployments' entries (their models' entries under their names) and the file's
/// `[models]` over them; every fallback names a served model.
fn catalog(
    models: BTreeMap<String, ModelEntry>,
    files: &BTreeMap<String, ProviderFile>,
    providers: &BTreeMap<String, Provider>,
) -> Result<Catalog, ConfigError> {
    let bundled: CatalogFile = toml::from_str(crate::catalog::BUNDLED)
        .map_err(|e| ConfigError::new("catalog (bundled)", e.to_string()))?;
    let overrides = CatalogFile { models };
    let azure = files
        .iter()
        .filter_map(|(id, p)| p.azure.as_ref().map(|a| (id.as_str(), a)));
    let deployments =
        crate::adapter::cloud::azure::config::deployment_models(azure, &[&bundled, &overrides])?;
    let protocols = providers
        .iter()
        .map(|(id, p)| (id.clone(), p.protocol))
        .collect();
    let catalog = Catalog::build(&[&bundled, &deployments, &overrides], &protocols)
        .map_err(|e| ConfigError::new("models", e.to_string()))?;
    catalog
        .check_fallbacks(|id| serves(&catalog, providers, id))
        .map_err(|e| ConfigError::new(format!("models.\"{}\".{}", e.model, e.field), e.message))?;
    Ok(catalog)
}

/// True when `id` is a catalog model, or a model of a provider that serves unlisted ones.
fn serves(catalog: &Catalog, providers: &BTreeMap<String, Provider>, id: &str) -> bool {
    catalog.get(id).is_some()
        || id
            .split_once('/')
            .and_then(|(p, _)| providers.get(p))
            .is_some_and(|p| p.allow_unlisted_models)
}

/// An optional listen address, the error naming `key`.
fn provider_from_file(id: &str, p: &ProviderFile, env: &dyn Env) -> Result<Provider, ConfigError> {
    let key = |k: &str| format!("providers.{id}.{k}");
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ConfigError::new(
            format!("providers.{id}"),
            "provider ids use [A-Za-z0-9_-]",
        ));
    }
    let signer = provider_signer(id, p, env)?;
    let address = address(id, p, signer.as_ref(), env)?;
    let api_key = match &p.api_key_env {
        Some(name) => match env.var(name) {
            Some(v) => Secret::new(v),
            None => {
                return Err(ConfigError::new(
                    key("api_key_env"),
                    format!("environment variable {name} is not set"),
                ));
            }
        },
        None => Secret::default(),
    };
    if p.unlisted_context_window == 0 || p.unlisted_max_output_tokens == 0 {
        return Err(ConfigError::new(
            key("unlisted_context_window"),
            "limits must be positive",
        ));
    }
    Ok(Provider {
        id: id.to_string(),
        protocol: p.protocol,
        base_url: address.base_url,
        api_key,
        tokens: address.tokens,
        azure: address.azure,
        allow_unlisted_models: p.allow_unlisted_models,
        unlisted_context_window: p.unlisted_context_window,
        unlisted_max_output_tokens: p.unlisted_max_output_tokens,
        signer: signer.map(std::sync::Arc::new),
    })
}

/// Where a provider's requests go and the tokens they carry, by protocol family.
struct Address {
    base_url: String,
    tokens: Option<std::sync::Arc<crate::adapter::cloud::oauth::TokenSource>>,
    azure: Option<crate::adapter::cloud::azure::AzureApi>,
}

/// The base URL (Vertex AI: built from `google`; Azure: the endpoint's `/openai`; Bedrock: the region's endpoint by
/// default; the others: as configured), the token source of Vertex and Entra ID providers and Azure's addressing.
/// The `google` and `azure` tables are refused on the other protocols.
fn address(
    id: &str,
    p: &ProviderFile,
    signer: Option<&crate::adapter::cloud::aws::auth::AwsSigner>,
    env: &dyn Env,
) -> Result<Address, ConfigError> {
    let key = |k: &str| format!("providers.{id}.{k}");
    let from_env = p.base_url_env.as_deref().and_then(|name| env.var(name));
    let base_url = from_env.or_else(|| p.base_url.clone());
    let validated =
        |url: String| validate_base_url(&url).map_err(|m| ConfigError::new(key("base_url"), m));
    if p.google.is_some() && !p.protocol.uses_google_tokens() {
        return Err(ConfigError::new(
            key("google"),
            "only for the Vertex AI protocols (vertex_gemini, vertex_anthropic)",
        ));
    }
    if p.azure.is_some() && !p.protocol.is_azure() {
        return Err(ConfigError::new(
            key("azure"),
            "only for the Azure OpenAI protocols (azure_chat, azure_responses)",
        ));
    }
    if p.protocol.uses_google_tokens() {
        if p.api_key_env.is_some() {
            return Err(ConfigError::new(
                key("api_key_env"),
                "Vertex AI authenticates with Google credentials; see providers.<id>.google",
            ));
        }
        let host = base_url.map(validated).transpose()?;
        let v = crate::adapter::cloud::vertex::config::build(
            id,
            p.google.as_ref(),
            host.as_deref(),
            env,
        )?;
        return Ok(Address {
            base_url: v.base_url,
            tokens: Some(v.tokens),
            azure: None,
        });
    }
    let base_url = base_url
        .or_else(|| signer.map(|s| s.default_endpoint()))
        .ok_or_else(|| ConfigError::new(key("base_url"), "required"))?;
    let base_url = validated(base_url)?;
    if p.protocol.is_azure() {
        let has_key = p.api_key_env.is_some();
        let a = crate::adapter::cloud::azure::config::build(
            id,
            p.azure.as_ref(),
            &base_url,
            has_key,
            env,
        )?;
        return Ok(Address {
            base_url: a.base_url,
            tokens: a.tokens,
            azure: Some(a.api),
        });
    }
    Ok(Address {
        base_url,
        tokens: None,
        azure: None,
    })
}

/// The signer of a `bedrock` provider, from `[providers.<id>.aws]`, the AWS environment and shared files. Other
/// protocols take no `aws` table, and `bedrock` takes no API key.
fn provider_signer(
    id: &str,
    p: &ProviderFile,
    env: &dyn Env,
) -> Result<Option<crate::adapter::cloud::aws::auth::AwsSigner>, ConfigError> {
    let key = |k: &str| format!("providers.{id}.{k}");
    if p.protocol != Protocol::Bedrock {
        if p.aws.is_some() {
            return Err(ConfigError::new(
                key("aws"),
                "only a bedrock provider takes an aws table",
            ));
        }
        return Ok(None);
    }
    if p.api_key_env.is_some() {
        return Err(ConfigError::new(
            key("api_key_env"),
            "bedrock signs requests with AWS credentials; remove api_key_env",
        ));
    }
    let file = p.aws.clone().unwrap_or_default();
    crate::adapter::cloud::aws::auth::load(&file, env)
        .map(Some)
        .map_err(|m| ConfigError::new(key("aws"), m))
}

/// Base URLs are http(s) with a host, no credentials, query or fragment; the trailing `/` is dropped.
fn validate_base_url(url: &str) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`{url}` must be http or https"));
    }
    if parsed.host_str().is_none() {
        return Err(format!("`{url}` has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not carry credentials; use api_key_env".into());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!("`{url}` must not have a query or fragment"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
