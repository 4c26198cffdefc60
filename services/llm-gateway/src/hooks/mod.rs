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

mod rules;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use llm_proto::gateway as pb;
use llm_proto::gateway::hooks_service_client::HooksServiceClient;
use tonic::transport::{Channel, Endpoint};

use crate::catalog::ModelInfo;
use crate::metrics::Metrics;

pub use rules::{
    DeclarativeHook, HookFile, HookPolicy, HookService, HookServiceFile, SamplingValues, Transform,
    compile, glob_match,
};
use rules::{check_header, check_values};

/// How early a service may answer `DEADLINE_EXCEEDED` / `CANCELLED` for its answer to still count as our timeout
/// (the deadline it received was computed a little after our timer started).
const DEADLINE_SLACK: Duration = Duration::from_millis(20);

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
        let mut pass = Pass {
            runner: self,
            model,
            metrics,
            failed: vec![false; self.services.len()],
            context: g.context.clone(),
        };
        let mut headers = HookHeaders::new();
        if pass.declarative().next().is_none() && self.services.is_empty() {
            return Ok(headers);
        }
        pass.system(g).await?;
        pass.params(g).await?;
        pass.headers(g, &mut headers).await?;
        Ok(headers)
    }
}

/// One pass of the hooks over one generation.
struct Pass<'a> {
    runner: &'a HookRunner,
    model: &'a ModelInfo,
    metrics: &'a Metrics,
    /// A fail_open service that failed once is skipped for the rest of this pass: it is likely down or slow, and
    /// calling it for the next transform would only add another timeout to the caller's wait.
    failed: Vec<bool>,
    context: Option<pb::RequestContext>,
}

impl Pass<'_> {
    fn declarative(&self) -> impl Iterator<Item = &DeclarativeHook> {
        let id = self.model.id.as_str();
        self.runner
            .declarative
            .iter()
            .filter(move |h| glob_match(&h.pattern, id))
    }

    /// The services, in config order, that implement `t` for this model and have not failed in this pass.
    fn services(&self, t: Transform) -> Vec<usize> {
        let id = self.model.id.as_str();
        (0..self.runner.services.len())
            .filter(|i| {
                let s = &self.runner.services[*i].config;
                !self.failed[*i] && s.transforms.contains(&t) && glob_match(&s.pattern, id)
            })
            .collect()
    }

    fn target(&self) -> pb::HookTarget {
        pb::HookTarget {
            model: self.model.id.clone(),
            provider: self.model.provider.clone(),
            protocol: self.model.protocol.as_str().to_string(),
            context: self.context.clone(),
        }
    }

    /// Records service `i`'s failure: skipped from now on, and an error if it is `fail_closed`.
    fn record_failure(&mut self, i: usize, e: HookError) -> Result<(), HookError> {
        self.failed[i] = true;
        self.runner.services[i].failed(e, self.metrics)
    }

    /// System: prefixes in config order, as one block before the caller's sections; then the services.
    async fn system(&mut self, g: &mut pb::Generation) -> Result<(), HookError> {
        let prefixes: Vec<String> = self
            .declarative()
            .filter_map(|h| h.system_prefix.clone())
            .collect();
        if !prefixes.is_empty() {
            g.system.splice(0..0, prefixes);
        }
        for i in self.services(Transform::System) {
            let request = pb::TransformSystemRequest {
                target: Some(self.target()),
                system: g.system.clone(),
            };
            match self.runner.services[i].transform_system(request).await {
                Ok(system) if system.is_empty() => {}
                Ok(system) => g.system = system,
                Err(e) => self.record_failure(i, e)?,
            }
        }
        Ok(())
    }

    /// Params: each hook fills its defaults, then applies its overrides; then the services.
    async fn params(&mut self, g: &mut pb::Generation) -> Result<(), HookError> {
        for h in self.declarative() {
            if h.params.default.is_empty() && h.params.set.is_empty() {
                continue;
            }
            let s = g.sampling.get_or_insert_with(Default::default);
            fill(s, &h.params.default);
            set(s, &h.params.set);
        }
        for i in self.services(Transform::Params) {
            let request = pb::TransformParamsRequest {
                target: Some(self.target()),
                sampling: g.sampling.clone(),
                provider_options_json: g.provider_options_json.clone(),
            };
            match self.runner.services[i].transform_params(request).await {
                Ok(reply) => {
                    if let Some(s) = reply.sampling {
                        g.sampling = Some(s);
                    }
                    if let Some(o) = reply.provider_options_json {
                        g.provider_options_json = o;
                    }
                }
                Err(e) => self.record_failure(i, e)?,
            }
        }
        Ok(())
    }

    /// Headers: later hooks replace earlier ones of the same name; services see the caller's and the hooks' so far.
    async fn headers(
        &mut self,
        g: &pb::Generation,
        headers: &mut HookHeaders,
    ) -> Result<(), HookError> {
        for h in self.declarative() {
            for (name, value) in &h.headers {
                set_header(headers, name, value);
            }
        }
        for i in self.services(Transform::Headers) {
            let mut current: std::collections::HashMap<String, String> = g
                .extra_headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                .collect();
            current.extend(headers.iter().cloned());
            let request = pb::TransformHeadersRequest {
                target: Some(self.target()),
                headers: current,
            };
            match self.runner.services[i].transform_headers(request).await {
                Ok(added) => {
                    for (name, value) in added {
                        set_header(headers, &name, &value);
                    }
                }
                Err(e) => self.record_failure(i, e)?,
            }
        }
        Ok(())
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
mod tests;
