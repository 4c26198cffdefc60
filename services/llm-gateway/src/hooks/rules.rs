//! The hook tables as written (`[[hooks]]`, `[[hook_services]]`) and their compiled, validated form; the
//! `provider/model` glob both match with.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tonic::transport::Endpoint;

use crate::headers;
use crate::settings::ConfigError;

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
    pub(super) fn is_empty(&self) -> bool {
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
    let declarative = hooks
        .iter()
        .enumerate()
        .map(|(i, h)| compile_hook(i, h))
        .collect::<Result<_, _>>()?;
    let compiled = services
        .iter()
        .enumerate()
        .map(|(i, s)| compile_service(i, s, &services[..i]))
        .collect::<Result<_, _>>()?;
    Ok((declarative, compiled))
}

fn config_error(key: String, message: &str) -> ConfigError {
    ConfigError {
        key,
        message: message.to_string(),
    }
}

/// `hooks[i]`: a pattern, and at least one of params, headers or a system prefix, each valid.
fn compile_hook(i: usize, h: &HookFile) -> Result<DeclarativeHook, ConfigError> {
    let err = config_error;
    let key = |k: &str| format!("hooks[{i}].{k}");
    check_pattern(&h.pattern).map_err(|m| err(key("match"), &m))?;
    let params = h.params.unwrap_or_default();
    check_values(&params.set).map_err(|(f, m)| err(key(&format!("params.set.{f}")), m))?;
    check_values(&params.default).map_err(|(f, m)| err(key(&format!("params.default.{f}")), m))?;
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
    Ok(DeclarativeHook {
        name: h.name.clone().unwrap_or_else(|| format!("hooks[{i}]")),
        pattern: h.pattern.clone(),
        params,
        headers,
        system_prefix: h.system_prefix.clone(),
    })
}

/// `hook_services[i]`: a unique name, a URL the gateway may call, a pattern, a timeout and distinct transforms.
fn compile_service(
    i: usize,
    s: &HookServiceFile,
    earlier: &[HookServiceFile],
) -> Result<HookService, ConfigError> {
    let err = config_error;
    let key = |k: &str| format!("hook_services[{i}].{k}");
    if s.name.is_empty()
        || !s
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(err(key("name"), "required, [A-Za-z0-9_-]"));
    }
    if earlier.iter().any(|o| o.name == s.name) {
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
    Ok(HookService {
        name: Arc::from(s.name.as_str()),
        url: s.url.trim_end_matches('/').to_string(),
        pattern: s.pattern.clone(),
        timeout: Duration::from_millis(s.timeout_ms),
        policy: s.policy,
        transforms: s.transforms.clone(),
    })
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

pub(super) fn check_values(v: &SamplingValues) -> Result<(), (&'static str, &'static str)> {
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
pub(super) fn check_header(name: &str, value: &str) -> Result<(), String> {
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
