//! Hooks: operator-configured transforms of a generation before its adapter translates it (docs/architecture.md "A generation, step by step", step 3).
//!
//! Two kinds, both from the configuration file (never from callers):
//! - **declarative hooks** (`[[hooks]]`): for models matching a `provider/model` glob, a system section inserted
//!   first, sampling defaults (`params.default`, fill what is unset) and overrides (`params.set`), and extra provider
//!   headers;
//! - **hook services** (`[[hook_services]]`): a gRPC `llm.gateway.v1.HooksService` any team implements, called with
//!   a timeout and a `fail_open` / `fail_closed` policy.
//!
//! Order, fixed and documented in docs/gateway.md: the system transform, then params, then headers; within each,
//! declarative hooks in config order, then hook services in config order. Each hook sees its predecessors' result.
//! Hooks act on the unified request, so they work the same for every protocol; they run once per model tried (a
//! fallback model gets its own pass with its own matches).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use llm_proto::gateway as pb;
use llm_proto::gateway::hooks_service_client::HooksServiceClient;
use serde::Deserialize;
use tonic::transport::{Channel, Endpoint};

use crate::catalog::ModelInfo;
use crate::headers;
use crate::metrics::Metrics;
use crate::settings::ConfigError;

/// How early a service may answer `DEADLINE_EXCEEDED` / `CANCELLED` for its answer to still count as our timeout
/// (the deadline it received was computed a little after our timer started).
const DEADLINE_SLACK: Duration = Duration::from_millis(20);

/// `[[hooks]]`: a declarative hook, as written.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HookFile {
    /// Name used in logs; defaults to `hooks[<index>]`.
    #[serde(default)]
    pub name: Option<String>,
    /// Model ids (`provider/model`) the hook applies to; `*` matches any run of characters. Default `*`.
    #[serde(rename = "match", default = "match_all")]
    pub pattern: String,
    /// Sampling defaults and overrides.
    #[serde(default)]
    pub params: Option<ParamsFile>,
    /// Headers added to the provider request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A system section inserted before the caller's.
    #[serde(default)]
    pub system_prefix: Option<String>,
}

/// `[hooks.params]`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParamsFile {
    /// Values that replace whatever the caller (or an earlier hook) sent.
    #[serde(default)]
    pub set: SamplingValues,
    /// Values used only where the caller (or an earlier hook) left the parameter unset.
    #[serde(default)]
    pub default: SamplingValues,
}

/// The sampling parameters a declarative hook can touch.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SamplingValues {
    /// 0 to 2.
    pub temperature: Option<f64>,
    /// 0 to 1.
    pub top_p: Option<f64>,
    /// Positive.
    pub top_k: Option<u32>,
    /// Positive.
    pub max_output_tokens: Option<u32>,
}

impl SamplingValues {
    fn is_empty(&self) -> bool {
        *self == SamplingValues::default()
    }
}

/// `[[hook_services]]`: an external `HooksService`, as written.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HookServiceFile {
    /// Unique name, `[A-Za-z0-9_-]`; used in logs, metrics and errors.
    pub name: String,
    /// `http://host:port` of the service (plaintext gRPC, so keep it on a trusted network or a sidecar).
    pub url: String,
    /// Model ids the service applies to, as for declarative hooks. Default `*`.
    #[serde(rename = "match", default = "match_all")]
    pub pattern: String,
    /// Timeout of each call, 1 to 60000 ms. Default 1000.
    #[serde(default = "default_hook_timeout_ms")]
    pub timeout_ms: u64,
    /// What a failed or slow call does to the generation.
    pub policy: HookPolicy,
    /// The RPCs the service implements; only these are called.
    pub transforms: Vec<Transform>,
}

fn match_all() -> String {
    "*".to_string()
}

fn default_hook_timeout_ms() -> u64 {
    1000
}

/// What a hook service failure does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPolicy {
    /// Log, count, and continue as if the hook had changed nothing.
    FailOpen,
    /// Fail the generation before it starts.
    FailClosed,
}

impl HookPolicy {
    /// The config spelling, also the metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            HookPolicy::FailOpen => "fail_open",
            HookPolicy::FailClosed => "fail_closed",
        }
    }
}

/// One transform of the hooks API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transform {
    /// `TransformSystem`.
    System,
    /// `TransformParams`.
    Params,
    /// `TransformHeaders`.
    Headers,
}

impl Transform {
    /// The config spelling, also the metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Transform::System => "system",
            Transform::Params => "params",
            Transform::Headers => "headers",
        }
    }
}

impl std::fmt::Display for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated declarative hook.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclarativeHook {
    /// Name for logs.
    pub name: String,
    /// Model-id glob.
    pub pattern: String,
    /// Sampling defaults and overrides.
    pub params: ParamsFile,
    /// Lower-case header names and their values.
    pub headers: Vec<(String, String)>,
    /// System section inserted first.
    pub system_prefix: Option<String>,
}

/// A validated hook service.
#[derive(Debug, Clone, PartialEq)]
pub struct HookService {
    /// Unique name.
    pub name: Arc<str>,
    /// `http://host:port`.
    pub url: String,
    /// Model-id glob.
    pub pattern: String,
    /// Per-call timeout.
    pub timeout: Duration,
    /// Failure policy.
    pub policy: HookPolicy,
    /// Implemented transforms.
    pub transforms: Vec<Transform>,
}

/// Validates `[[hooks]]` and `[[hook_services]]`; errors name the key (`hooks[1].headers.authorization`).
pub fn compile(
    hooks: &[HookFile],
    services: &[HookServiceFile],
) -> Result<(Vec<DeclarativeHook>, Vec<HookService>), ConfigError> {
    let err = |key: String, message: &str| ConfigError {
        key,
        message: message.to_string(),
    };
    let mut declarative = Vec::with_capacity(hooks.len());
    for (i, h) in hooks.iter().enumerate() {
        let key = |k: &str| format!("hooks[{i}].{k}");
        check_pattern(&h.pattern).map_err(|m| err(key("match"), &m))?;
        let params = h.params.unwrap_or_default();
        check_values(&params.set).map_err(|(f, m)| err(key(&format!("params.set.{f}")), m))?;
        check_values(&params.default)
            .map_err(|(f, m)| err(key(&format!("params.default.{f}")), m))?;
        let mut headers = Vec::with_capacity(h.headers.len());
        for (name, value) in &h.headers {
            check_header(name, value).map_err(|m| err(key(&format!("headers.{name}")), &m))?;
            headers.push((name.to_ascii_lowercase(), value.clone()));
        }
        if h.system_prefix.as_deref().is_some_and(str::is_empty) {
            return Err(err(key("system_prefix"), "must not be empty"));
        }
        if params.set.is_empty()
            && params.default.is_empty()
            && headers.is_empty()
            && h.system_prefix.is_none()
        {
            return Err(err(
                format!("hooks[{i}]"),
                "does nothing: set params, headers or system_prefix",
            ));
        }
        declarative.push(DeclarativeHook {
            name: h.name.clone().unwrap_or_else(|| format!("hooks[{i}]")),
            pattern: h.pattern.clone(),
            params,
            headers,
            system_prefix: h.system_prefix.clone(),
        });
    }

    let mut compiled = Vec::with_capacity(services.len());
    for (i, s) in services.iter().enumerate() {
        let key = |k: &str| format!("hook_services[{i}].{k}");
        if s.name.is_empty()
            || !s
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(err(key("name"), "required, [A-Za-z0-9_-]"));
        }
        if services[..i].iter().any(|o| o.name == s.name) {
            return Err(err(key("name"), "another hook service has this name"));
        }
        check_hook_url(&s.url).map_err(|m| err(key("url"), &m))?;
        check_pattern(&s.pattern).map_err(|m| err(key("match"), &m))?;
        if !(1..=60_000).contains(&s.timeout_ms) {
            return Err(err(key("timeout_ms"), "must be between 1 and 60000"));
        }
        if s.transforms.is_empty() {
            return Err(err(
                key("transforms"),
                "list at least one of \"system\", \"params\", \"headers\"",
            ));
        }
        for (j, t) in s.transforms.iter().enumerate() {
            if s.transforms[..j].contains(t) {
                return Err(err(format!("{}[{j}]", key("transforms")), "listed twice"));
            }
        }
        compiled.push(HookService {
            name: Arc::from(s.name.as_str()),
            url: s.url.trim_end_matches('/').to_string(),
            pattern: s.pattern.clone(),
            timeout: Duration::from_millis(s.timeout_ms),
            policy: s.policy,
            transforms: s.transforms.clone(),
        });
    }
    Ok((declarative, compiled))
}

fn check_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("must not be empty (use \"*\" for every model)".into());
    }
    if p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{p}` contains whitespace"));
    }
    Ok(())
}

fn check_values(v: &SamplingValues) -> Result<(), (&'static str, &'static str)> {
    if v.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(("temperature", "must be between 0 and 2"));
    }
    if v.top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(("top_p", "must be between 0 and 1"));
    }
    if v.top_k == Some(0) {
        return Err(("top_k", "must be positive"));
    }
    if v.max_output_tokens == Some(0) {
        return Err(("max_output_tokens", "must be positive"));
    }
    Ok(())
}

/// A header a hook may add: a valid name and value, and not one the gateway owns (auth, host, framing).
fn check_header(name: &str, value: &str) -> Result<(), String> {
    if headers::reserved_header(name) {
        return Err(format!(
            "`{name}` is set by the gateway (authentication, host or framing) and cannot be set by a hook"
        ));
    }
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(format!("`{name}` is not a valid header name"));
    }
    if http::HeaderValue::from_str(value).is_err() {
        // The value is not echoed: hook headers may carry tokens.
        return Err(format!("the value of `{name}` is not a valid header value"));
    }
    Ok(())
}

/// Hook services are plaintext gRPC to an address the operator configured: `http://host[:port]`, nothing else.
fn check_hook_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if parsed.scheme() != "http" {
        return Err(format!(
            "`{url}` must be http:// (hook services are called over plaintext gRPC; run a sidecar for TLS)"
        ));
    }
    if parsed.host_str().is_none() {
        return Err(format!("`{url}` has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not carry credentials".into());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() || parsed.path() != "/" {
        return Err(format!(
            "`{url}` must be scheme, host and port only (no path, query or fragment)"
        ));
    }
    Endpoint::from_shared(url.to_string()).map_err(|e| format!("`{url}`: {e}"))?;
    Ok(())
}

/// `*` matches any run of characters (including `/`); everything else matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was and the text position it currently stands for, to backtrack into.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == b'*')
}

/// Why a hook service call failed. Under `fail_closed` it fails the generation with the status
/// [`crate::status::start_error_status`] gives it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HookError {
    /// No answer within the timeout.
    #[error("hook `{hook}` ({transform} transform) timed out after {}ms", .timeout.as_millis())]
    Timeout {
        /// Hook service name.
        hook: Arc<str>,
        /// The transform called.
        transform: Transform,
        /// The configured timeout.
        timeout: Duration,
    },
    /// The service could not be reached or said it is unavailable.
    #[error("hook `{hook}` ({transform} transform) is unavailable ({code:?})")]
    Unavailable {
        /// Hook service name.
        hook: Arc<str>,
        /// The transform called.
        transform: Transform,
        /// The gRPC code of the failure.
        code: tonic::Code,
    },
    /// The service answered with an error status: it refuses this generation.
    #[error("hook `{hook}` ({transform} transform) refused the generation: {message}")]
    Refused {
        /// Hook service name.
        hook: Arc<str>,
        /// The transform called.
        transform: Transform,
        /// The service's status code.
        code: tonic::Code,
        /// The service's status message, meant for the caller.
        message: String,
    },
    /// The service answered something the gateway cannot use.
    #[error("hook `{hook}` ({transform} transform) answered an invalid response: {message}")]
    InvalidResponse {
        /// Hook service name.
        hook: Arc<str>,
        /// The transform called.
        transform: Transform,
        /// What is wrong with it.
        message: String,
    },
}

impl HookError {
    /// The hook service's name.
    pub fn hook(&self) -> &str {
        match self {
            HookError::Timeout { hook, .. }
            | HookError::Unavailable { hook, .. }
            | HookError::Refused { hook, .. }
            | HookError::InvalidResponse { hook, .. } => hook,
        }
    }

    /// True when retrying later may succeed (timeouts, unavailable services).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            HookError::Timeout { .. } | HookError::Unavailable { .. }
        )
    }
}

/// Runs the configured hooks; built from the configuration, replaced on reload.
#[derive(Debug, Default)]
pub struct HookRunner {
    declarative: Vec<DeclarativeHook>,
    services: Vec<ServiceClient>,
}

#[derive(Debug)]
struct ServiceClient {
    config: HookService,
    /// Created on first use, inside the runtime (a lazy channel needs one), and shared by every call after.
    channel: OnceLock<Channel>,
}

/// What the hooks produced besides their edits to the request: headers for the provider request.
pub type HookHeaders = Vec<(String, String)>;

impl HookRunner {
    /// A runner for these hooks.
    pub fn new(declarative: &[DeclarativeHook], services: &[HookService]) -> HookRunner {
        HookRunner {
            declarative: declarative.to_vec(),
            services: services
                .iter()
                .map(|s| ServiceClient {
                    config: s.clone(),
                    channel: OnceLock::new(),
                })
                .collect(),
        }
    }

    /// Applies every hook matching `model` to `g` (system sections and sampling, in place) and returns the headers
    /// they add. Errors only for a `fail_closed` hook service that failed.
    pub async fn apply(
        &self,
        model: &ModelInfo,
        g: &mut pb::Generation,
        metrics: &Metrics,
    ) -> Result<HookHeaders, HookError> {
        let id = model.id.as_str();
        let declarative = || {
            self.declarative
                .iter()
                .filter(move |h| glob_match(&h.pattern, id))
        };
        let mut headers = HookHeaders::new();
        if declarative().next().is_none() && self.services.is_empty() {
            return Ok(headers);
        }
        // A fail_open service that failed once is skipped for the rest of this pass: it is likely down or slow, and
        // calling it for the next transform would only add another timeout to the caller's wait.
        let mut failed = vec![false; self.services.len()];
        let services = |t: Transform, failed: &[bool]| -> Vec<usize> {
            (0..self.services.len())
                .filter(|i| {
                    let s = &self.services[*i].config;
                    !failed[*i] && s.transforms.contains(&t) && glob_match(&s.pattern, id)
                })
                .collect()
        };
        let context = g.context.clone();
        let target = || pb::HookTarget {
            model: model.id.clone(),
            provider: model.provider.clone(),
            protocol: model.protocol.as_str().to_string(),
            context: context.clone(),
        };

        // System: prefixes in config order, as one block before the caller's sections.
        let prefixes: Vec<String> = declarative()
            .filter_map(|h| h.system_prefix.clone())
            .collect();
        if !prefixes.is_empty() {
            g.system.splice(0..0, prefixes);
        }
        for i in services(Transform::System, &failed) {
            let svc = &self.services[i];
            let request = pb::TransformSystemRequest {
                target: Some(target()),
                system: g.system.clone(),
            };
            match svc.transform_system(request).await {
                Ok(system) if system.is_empty() => {}
                Ok(system) => g.system = system,
                Err(e) => {
                    failed[i] = true;
                    svc.failed(e, metrics)?;
                }
            }
        }

        // Params: each hook fills its defaults, then applies its overrides.
        for h in declarative() {
            if h.params.default.is_empty() && h.params.set.is_empty() {
                continue;
            }
            let s = g.sampling.get_or_insert_with(Default::default);
            fill(s, &h.params.default);
            set(s, &h.params.set);
        }
        for i in services(Transform::Params, &failed) {
            let svc = &self.services[i];
            let request = pb::TransformParamsRequest {
                target: Some(target()),
                sampling: g.sampling.clone(),
                provider_options_json: g.provider_options_json.clone(),
            };
            match svc.transform_params(request).await {
                Ok(reply) => {
                    if let Some(s) = reply.sampling {
                        g.sampling = Some(s);
                    }
                    if let Some(o) = reply.provider_options_json {
                        g.provider_options_json = o;
                    }
                }
                Err(e) => {
                    failed[i] = true;
                    svc.failed(e, metrics)?;
                }
            }
        }

        // Headers: later hooks replace earlier ones of the same name.
        for h in declarative() {
            for (name, value) in &h.headers {
                set_header(&mut headers, name, value);
            }
        }
        for i in services(Transform::Headers, &failed) {
            let svc = &self.services[i];
            let mut current: std::collections::HashMap<String, String> = g
                .extra_headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                .collect();
            current.extend(headers.iter().cloned());
            let request = pb::TransformHeadersRequest {
                target: Some(target()),
                headers: current,
            };
            match svc.transform_headers(request).await {
                Ok(added) => {
                    for (name, value) in added {
                        set_header(&mut headers, &name, &value);
                    }
                }
                Err(e) => {
                    failed[i] = true;
                    svc.failed(e, metrics)?;
                }
            }
        }
        Ok(headers)
    }
}

/// Sets `name` (lower-cased) in `headers`, replacing an earlier value.
pub fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    let lower = name.to_ascii_lowercase();
    match headers.iter_mut().find(|(n, _)| *n == lower) {
        Some(slot) => slot.1 = value.to_string(),
        None => headers.push((lower, value.to_string())),
    }
}

fn fill(s: &mut pb::Sampling, v: &SamplingValues) {
    s.temperature = s.temperature.or(v.temperature);
    s.top_p = s.top_p.or(v.top_p);
    s.top_k = s.top_k.or(v.top_k);
    s.max_output_tokens = s.max_output_tokens.or(v.max_output_tokens);
}

fn set(s: &mut pb::Sampling, v: &SamplingValues) {
    s.temperature = v.temperature.or(s.temperature);
    s.top_p = v.top_p.or(s.top_p);
    s.top_k = v.top_k.or(s.top_k);
    s.max_output_tokens = v.max_output_tokens.or(s.max_output_tokens);
}

impl ServiceClient {
    fn client(&self) -> HooksServiceClient<Channel> {
        let channel = self.channel.get_or_init(|| {
            // Validated at config load, so this only fails if the validation and tonic disagree; a channel to
            // nowhere then turns every call into an `Unavailable` failure handled by the policy.
            let endpoint = Endpoint::from_shared(self.config.url.clone())
                .unwrap_or_else(|_| Endpoint::from_static("http://0.0.0.0:1"));
            endpoint
                .connect_timeout(self.config.timeout)
                .tcp_nodelay(true)
                .connect_lazy()
        });
        HooksServiceClient::new(channel.clone())
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        // The deadline travels to the service (grpc-timeout) so it can give up too; ours below is what counts.
        request.set_timeout(self.config.timeout);
        request
    }

    /// Awaits one call within the timeout and classifies its failure.
    async fn exchange<T>(
        &self,
        transform: Transform,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, HookError> {
        let hook = Arc::clone(&self.config.name);
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(self.config.timeout, call).await {
            Err(_) => Err(HookError::Timeout {
                hook,
                transform,
                timeout: self.config.timeout,
            }),
            Ok(Ok(reply)) => Ok(reply.into_inner()),
            // The service saw the deadline we sent (grpc-timeout) and gave up a moment before our own timer fired:
            // still our timeout, and reported as one.
            Ok(Err(status))
                if matches!(
                    status.code(),
                    tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
                ) && started.elapsed() + DEADLINE_SLACK >= self.config.timeout =>
            {
                Err(HookError::Timeout {
                    hook,
                    transform,
                    timeout: self.config.timeout,
                })
            }
            Ok(Err(status)) => {
                use tonic::Code;
                let transient = matches!(
                    status.code(),
                    Code::Unavailable
                        | Code::DeadlineExceeded
                        | Code::ResourceExhausted
                        | Code::Aborted
                        | Code::Cancelled
                        | Code::Unknown
                );
                if transient {
                    // Transport failures carry connection details meant for operators, not callers: log them.
                    tracing::debug!(
                        message = "hook service call failed",
                        hook = %hook,
                        transform = transform.as_str(),
                        code = ?status.code(),
                        detail = %status.message(),
                    );
                    Err(HookError::Unavailable {
                        hook,
                        transform,
                        code: status.code(),
                    })
                } else {
                    Err(HookError::Refused {
                        hook,
                        transform,
                        code: status.code(),
                        message: status.message().to_string(),
                    })
                }
            }
        }
    }

    fn invalid(&self, transform: Transform, message: String) -> HookError {
        HookError::InvalidResponse {
            hook: Arc::clone(&self.config.name),
            transform,
            message,
        }
    }

    async fn transform_system(
        &self,
        request: pb::TransformSystemRequest,
    ) -> Result<Vec<String>, HookError> {
        let mut client = self.client();
        let reply = self
            .exchange(
                Transform::System,
                client.transform_system(self.request(request)),
            )
            .await?;
        Ok(reply.system)
    }

    async fn transform_params(
        &self,
        request: pb::TransformParamsRequest,
    ) -> Result<pb::TransformParamsResponse, HookError> {
        let mut client = self.client();
        let reply = self
            .exchange(
                Transform::Params,
                client.transform_params(self.request(request)),
            )
            .await?;
        if let Some(s) = &reply.sampling {
            let values = SamplingValues {
                temperature: s.temperature,
                top_p: s.top_p,
                top_k: s.top_k,
                max_output_tokens: s.max_output_tokens,
            };
            check_values(&values)
                .map_err(|(f, m)| self.invalid(Transform::Params, format!("sampling.{f} {m}")))?;
        }
        if let Some(o) = &reply.provider_options_json
            && !o.is_empty()
            && !matches!(
                serde_json::from_str::<serde_json::Value>(o),
                Ok(serde_json::Value::Object(_))
            )
        {
            return Err(self.invalid(
                Transform::Params,
                "provider_options_json must be a JSON object keyed by protocol".into(),
            ));
        }
        Ok(reply)
    }

    async fn transform_headers(
        &self,
        request: pb::TransformHeadersRequest,
    ) -> Result<Vec<(String, String)>, HookError> {
        let mut client = self.client();
        let reply = self
            .exchange(
                Transform::Headers,
                client.transform_headers(self.request(request)),
            )
            .await?;
        let mut out: Vec<(String, String)> = reply.headers.into_iter().collect();
        // A map's order is arbitrary; sorting keeps the provider request deterministic.
        out.sort();
        for (name, value) in &out {
            check_header(name, value).map_err(|m| self.invalid(Transform::Headers, m))?;
        }
        Ok(out)
    }

    /// Applies the policy to a failed call: `Ok` to carry on unchanged, `Err` to fail the generation.
    fn failed(&self, e: HookError, metrics: &Metrics) -> Result<(), HookError> {
        let transform = match &e {
            HookError::Timeout { transform, .. }
            | HookError::Unavailable { transform, .. }
            | HookError::Refused { transform, .. }
            | HookError::InvalidResponse { transform, .. } => *transform,
        };
        metrics.hook_failure(
            &self.config.name,
            transform.as_str(),
            self.config.policy.as_str(),
        );
        match self.config.policy {
            HookPolicy::FailOpen => {
                tracing::warn!(message = "hook failed; continuing without it (fail_open)", error = %e);
                Ok(())
            }
            HookPolicy::FailClosed => {
                tracing::warn!(message = "hook failed; refusing the generation (fail_closed)", error = %e);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
