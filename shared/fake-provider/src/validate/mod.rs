//! Request validation the way each real provider does it, so end-to-end
//! tests catch a request the gateway would get refused in production.
//!
//! Every rule here is one a provider enforces with a 400 (the messages are
//! the providers' own wording where it is known; docs/providers.md §6
//! lists most of them), plus a few gateway promises marked as such
//! (`stream_options.include_usage`, never an `fc_` item id as a call id).
//! A refused request is answered with the provider's real error body, so
//! the gateway classifies it exactly as it would the real thing
//! (`invalid_request`, not retried), and is kept in
//! [`FakeProvider::rejections`] for the test to print.
//!
//! Two ways to switch it on:
//! - [`FakeProvider::validate_requests`]: every request to this fake is
//!   checked before it takes a scripted reply; a refused request does not
//!   consume one. Call it once per protocol the fake serves (an `openai`
//!   fake can check Chat Completions and Responses, told apart by path).
//! - [`Reply::validate`]: one scripted reply checks the request it answers.

mod anthropic;
pub(crate) mod azure;
pub mod bedrock;
#[cfg(test)]
mod calls_tests;
mod counting;
pub mod embeddings;
mod envelope;
#[cfg(test)]
mod features_tests;
mod gemini;
mod offered;
mod openai;
#[cfg(test)]
mod tests;
mod vertex;
#[cfg(test)]
mod vertex_tests;

use serde_json::{Map, Value, json};

use crate::{FakeProvider, Recorded, Reply, State, lock};

/// The wire protocol (and, for OpenAI-compatible servers, the server) whose
/// rules a request is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// OpenAI Chat Completions as OpenAI serves it.
    OpenaiChat,
    /// Mistral's Chat Completions: OpenAI's rules, 9-character alphanumeric
    /// tool-call ids, and no assistant turn without content or tool calls.
    MistralChat,
    /// DeepSeek V4 in thinking mode: OpenAI's message rules, plus
    /// `reasoning_content` on every assistant turn.
    DeepseekChat,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `streamGenerateContent` (and `generateContent`, answered whole).
    Gemini,
    /// Gemini on Vertex AI: `/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent`
    /// (and `:generateContent`).
    VertexGemini,
    /// Anthropic on Vertex AI: `…/publishers/anthropic/models/{m}:streamRawPredict` (and `:rawPredict`).
    VertexAnthropic,
    /// AWS Bedrock Converse: the SigV4 signature (verified with
    /// [`bedrock::TEST_SECRET_ACCESS_KEY`]) and the body.
    Bedrock,
    /// Chat Completions on Azure OpenAI (`/openai/deployments/{d}/chat/completions`,
    /// `/openai/v1/chat/completions`). Through [`FakeProvider::serve_azure`]
    /// the resource's checks come first; on their own, OpenAI's body rules.
    AzureChat,
    /// Responses on Azure OpenAI (`/openai/responses`, `/openai/v1/responses`).
    AzureResponses,
    /// OpenAI's embeddings, `POST /v1/embeddings`: a bearer key and the body rules ([`embeddings`]).
    OpenaiEmbeddings,
    /// Embeddings on Azure OpenAI (`/openai/v1/embeddings`, `/openai/deployments/{d}/embeddings`).
    AzureEmbeddings,
    /// The Gemini API's `batchEmbedContents`: an API key and the body rules.
    GeminiEmbeddings,
    /// Vertex AI's `…/publishers/google/models/{m}:predict` for a text embedding model.
    VertexEmbeddings,
    /// Bedrock's `InvokeModel` (`/model/{id}/invoke`) of Titan Text Embeddings and Cohere Embed: the SigV4
    /// signature and the model family's body.
    BedrockEmbeddings,
    /// Anthropic's `POST /v1/messages/count_tokens`: the `x-api-key` and `anthropic-version` headers, the count's
    /// fields, then the Messages rules.
    AnthropicCountTokens,
    /// Vertex AI's `…/publishers/anthropic/models/count-tokens:rawPredict`.
    VertexAnthropicCountTokens,
    /// The Gemini API's `countTokens`: an API key, `contents` or a `generateContentRequest`.
    GeminiCountTokens,
    /// Vertex AI's `…/publishers/google/models/{m}:countTokens`.
    VertexGeminiCountTokens,
    /// Bedrock's `CountTokens` (`/model/{id}/count-tokens`): the signature, a foundation model, a Converse input.
    BedrockCountTokens,
}

impl Protocol {
    /// The protocols a fake checks a request by when it was told none, most specific path first: a request is
    /// checked by the first that serves its path ([`Protocol::for_path`]).
    const BY_PATH: [Protocol; 19] = [
        Protocol::Bedrock,
        Protocol::BedrockEmbeddings,
        Protocol::BedrockCountTokens,
        Protocol::VertexAnthropicCountTokens,
        Protocol::VertexGeminiCountTokens,
        Protocol::VertexEmbeddings,
        Protocol::VertexAnthropic,
        Protocol::VertexGemini,
        Protocol::AzureEmbeddings,
        Protocol::AzureChat,
        Protocol::AzureResponses,
        Protocol::GeminiCountTokens,
        Protocol::GeminiEmbeddings,
        Protocol::Gemini,
        Protocol::AnthropicCountTokens,
        Protocol::Anthropic,
        Protocol::OpenaiEmbeddings,
        Protocol::OpenaiResponses,
        Protocol::OpenaiChat,
    ];

    /// The protocol whose API a request to `path` is for, if any (compatible servers' own rules, Mistral's and
    /// DeepSeek's, only when a test names them).
    pub fn for_path(path: &str) -> Option<Protocol> {
        Self::BY_PATH.into_iter().find(|p| p.serves(path))
    }

    /// Whether a request to `path` is one this protocol serves.
    fn serves(self, path: &str) -> bool {
        let path = path.split('?').next().unwrap_or("");
        match self {
            Protocol::OpenaiChat | Protocol::MistralChat | Protocol::DeepseekChat => {
                path.ends_with("/chat/completions")
            }
            Protocol::OpenaiResponses => path.ends_with("/responses"),
            Protocol::Anthropic => path.ends_with("/v1/messages"),
            Protocol::Gemini => {
                (path.contains(":streamGenerateContent") || path.contains(":generateContent"))
                    && !path.contains("/publishers/")
            }
            Protocol::VertexGemini => {
                vertex::serves(path, "google", "streamGenerateContent")
                    || vertex::serves(path, "google", "generateContent")
            }
            Protocol::VertexAnthropic => {
                vertex::serves(path, "anthropic", "streamRawPredict")
                    || (vertex::serves(path, "anthropic", "rawPredict")
                        && !path.ends_with("/count-tokens:rawPredict"))
            }
            Protocol::Bedrock => {
                path.starts_with("/model/")
                    && (path.ends_with("/converse-stream") || path.ends_with("/converse"))
            }
            Protocol::AzureChat => {
                path.starts_with("/openai/") && path.ends_with("/chat/completions")
            }
            Protocol::AzureResponses => {
                path.starts_with("/openai/") && path.ends_with("/responses")
            }
            Protocol::OpenaiEmbeddings => {
                !path.starts_with("/openai/") && path.ends_with("/embeddings")
            }
            Protocol::AzureEmbeddings => {
                path.starts_with("/openai/") && path.ends_with("/embeddings")
            }
            Protocol::GeminiEmbeddings => {
                path.contains(":batchEmbedContents") && !path.contains("/publishers/")
            }
            Protocol::VertexEmbeddings => vertex::serves(path, "google", "predict"),
            Protocol::BedrockEmbeddings => path.starts_with("/model/") && path.ends_with("/invoke"),
            Protocol::AnthropicCountTokens => path.ends_with("/v1/messages/count_tokens"),
            Protocol::VertexAnthropicCountTokens => {
                vertex::serves(path, "anthropic", "rawPredict")
                    && path.ends_with("/count-tokens:rawPredict")
            }
            Protocol::GeminiCountTokens => {
                path.contains(":countTokens") && !path.contains("/publishers/")
            }
            Protocol::VertexGeminiCountTokens => vertex::serves(path, "google", "countTokens"),
            Protocol::BedrockCountTokens => {
                path.starts_with("/model/") && path.ends_with("/count-tokens")
            }
        }
    }

    /// Whether this is one of Bedrock's operations, answered in Bedrock's error shape.
    fn bedrock(self) -> bool {
        matches!(
            self,
            Protocol::Bedrock | Protocol::BedrockEmbeddings | Protocol::BedrockCountTokens
        )
    }
}

/// A request the provider would refuse.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// The rules it broke.
    pub protocol: Protocol,
    /// HTTP status of the answer.
    pub status: u16,
    /// The provider's error message.
    pub message: String,
    /// OpenAI's `param`, naming the offending field, when there is one.
    pub param: Option<String>,
    /// OpenAI's `code`, when the provider sets one.
    pub code: Option<String>,
}

impl Rejection {
    /// The error body the provider answers with.
    pub fn body(&self) -> String {
        match self.protocol {
            p if p.bedrock() => json!({"message": self.message}).to_string(),
            Protocol::Anthropic
            | Protocol::VertexAnthropic
            | Protocol::AnthropicCountTokens
            | Protocol::VertexAnthropicCountTokens => json!({
                "type": "error",
                "error": {"type": anthropic_type(self.status), "message": self.message},
                "request_id": "req_fake_provider_validation",
            })
            .to_string(),
            // Google pretty-prints its errors with two spaces.
            Protocol::Gemini
            | Protocol::VertexGemini
            | Protocol::GeminiEmbeddings
            | Protocol::VertexEmbeddings
            | Protocol::GeminiCountTokens
            | Protocol::VertexGeminiCountTokens => serde_json::to_string_pretty(&json!({
                "error": {"code": self.status, "message": self.message, "status": google_status(self.status)}
            }))
            .unwrap_or_default(),
            Protocol::MistralChat => json!({
                "object": "error",
                "message": self.message,
                "type": "invalid_request_message_error",
                "param": self.param,
                "code": self.code,
            })
            .to_string(),
            Protocol::AzureChat | Protocol::AzureResponses | Protocol::AzureEmbeddings
                if azure::is_service_error(self) =>
            {
                json!({"error": {"code": self.code, "message": self.message}}).to_string()
            }
            _ => {
                serde_json::to_string_pretty(&json!({
                    "error": {
                        "message": self.message,
                        "type": "invalid_request_error",
                        "param": self.param,
                        "code": self.code,
                    }
                }))
                .unwrap_or_default()
            }
        }
    }

    /// The reply carrying [`Rejection::body`].
    pub fn reply(&self) -> Reply {
        let reply = Reply::json(self.status, self.body());
        match (self.protocol.bedrock(), &self.code) {
            (true, Some(code)) => reply.header("x-amzn-errortype", code),
            _ => reply,
        }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}: {}", self.protocol, self.status, self.message)?;
        if let Some(param) = &self.param {
            write!(f, " (param {param})")?;
        }
        Ok(())
    }
}

/// What a protocol's rules say about one request: `Ok` or why not.
#[derive(Debug)]
pub(crate) struct Fail {
    message: String,
    param: Option<String>,
    code: Option<&'static str>,
}

impl Fail {
    pub(crate) fn new(message: impl Into<String>) -> Fail {
        Fail {
            message: message.into(),
            param: None,
            code: None,
        }
    }

    pub(crate) fn param(mut self, param: impl Into<String>) -> Fail {
        self.param = Some(param.into());
        self
    }

    pub(crate) fn code(mut self, code: &'static str) -> Fail {
        self.code = Some(code);
        self
    }
}

/// The result of one rule.
pub(crate) type Check = Result<(), Fail>;

/// Checks a request against `protocol`'s rules: the path (a request this
/// protocol does not serve is a 404), the JSON body, then the rules.
pub fn check(protocol: Protocol, req: &Recorded) -> Result<(), Rejection> {
    check_keyed(protocol, req, None)
}

/// [`check`], with the API key the request must carry when `key` is set (any non-empty one otherwise).
pub fn check_keyed(protocol: Protocol, req: &Recorded, key: Option<&str>) -> Result<(), Rejection> {
    if !protocol.serves(&req.path) {
        return Err(Rejection {
            protocol,
            status: 404,
            message: format!("fake-provider: {:?} has no route {}", protocol, req.path),
            param: None,
            code: None,
        });
    }
    let body: Value = serde_json::from_slice(&req.body).map_err(|e| Rejection {
        protocol,
        status: 400,
        message: format!("We could not parse the JSON body of your request: {e}"),
        param: None,
        code: None,
    })?;
    credentials(protocol, req)?;
    envelope::check(protocol, req, key, &body).map_err(|(status, f)| Rejection {
        protocol,
        status,
        message: f.message,
        param: f.param,
        code: f.code.map(String::from),
    })?;
    if protocol.bedrock() {
        return bedrock::check_operation(protocol, req, &body).map_err(|f| {
            // Authentication failures are 403s; the body rules are 400s.
            let status = match f.code {
                Some("ValidationException") | None => 400,
                Some(_) => 403,
            };
            Rejection {
                protocol,
                status,
                message: f.message,
                param: f.param,
                code: f.code.map(String::from),
            }
        });
    }
    check_body(protocol, &req.path, &body)
}

/// Checks a parsed body (the path matters only to Gemini, whose model name
/// is in it).
pub fn check_body(protocol: Protocol, path: &str, body: &Value) -> Result<(), Rejection> {
    let result = match protocol {
        Protocol::Anthropic => anthropic::check(body),
        Protocol::Gemini => gemini::check(model_in_path(path), body),
        Protocol::VertexGemini => vertex::check_gemini(path, model_in_path(path), body),
        Protocol::VertexAnthropic => vertex::check_anthropic(body),
        Protocol::OpenaiChat => openai::check_chat(openai::Server::OpenAi, body),
        Protocol::MistralChat => openai::check_chat(openai::Server::Mistral, body),
        Protocol::DeepseekChat => openai::check_chat(openai::Server::DeepSeek, body),
        Protocol::OpenaiResponses | Protocol::AzureResponses => openai::check_responses(body),
        Protocol::AzureChat => openai::check_chat(openai::Server::OpenAi, body),
        Protocol::Bedrock => bedrock::check_body(body),
        Protocol::OpenaiEmbeddings | Protocol::AzureEmbeddings => embeddings::openai(body),
        Protocol::GeminiEmbeddings => embeddings::gemini(model_in_path(path), body),
        Protocol::VertexEmbeddings => embeddings::vertex(model_in_path(path), body),
        Protocol::BedrockEmbeddings => embeddings::bedrock(&bedrock::path_model(path), body),
        Protocol::AnthropicCountTokens => counting::anthropic(body),
        Protocol::VertexAnthropicCountTokens => counting::vertex_anthropic(body),
        Protocol::GeminiCountTokens => counting::gemini(model_in_path(path), body),
        Protocol::VertexGeminiCountTokens => counting::vertex_gemini(model_in_path(path), body),
        Protocol::BedrockCountTokens => counting::bedrock(&bedrock::path_model(path), body),
    };
    result.map_err(|f| Rejection {
        protocol,
        status: 400,
        message: f.message,
        param: f.param,
        code: f.code.map(String::from),
    })
}

/// Anthropic's error `type` for a status.
fn anthropic_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        _ => "invalid_request_error",
    }
}

/// Google's `status` for an HTTP status.
fn google_status(status: u16) -> &'static str {
    match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        _ => "INVALID_ARGUMENT",
    }
}

/// The credential the embeddings and count APIs of OpenAI, Anthropic and the Gemini API require, checked before
/// the body as those APIs do (Vertex AI's tokens, Azure's keys and Bedrock's signatures have their own checks).
fn credentials(protocol: Protocol, req: &Recorded) -> Result<(), Rejection> {
    let present = |name: &str| req.header(name).is_some_and(|v| !v.trim().is_empty());
    let (status, message) = match protocol {
        Protocol::OpenaiEmbeddings
            if !req
                .header("authorization")
                .is_some_and(|v| v.starts_with("Bearer ") && v.len() > 7) =>
        {
            (
                401,
                "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            )
        }
        Protocol::AnthropicCountTokens if !present("x-api-key") => {
            (401, "x-api-key header is required")
        }
        Protocol::AnthropicCountTokens if !present("anthropic-version") => {
            (400, "anthropic-version: header is required")
        }
        Protocol::GeminiEmbeddings | Protocol::GeminiCountTokens
            if !present("x-goog-api-key") && !req.path.contains("key=") =>
        {
            (
                403,
                "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
            )
        }
        _ => return Ok(()),
    };
    Err(Rejection {
        protocol,
        status,
        message: message.into(),
        param: None,
        code: None,
    })
}

/// `gemini-2.5-flash` from `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`.
fn model_in_path(path: &str) -> &str {
    path.split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("")
}

impl Reply {
    /// This reply, answered only when the request passes `protocol`'s
    /// validation; otherwise the provider's 400 for it.
    pub fn validate(self, protocol: Protocol) -> Reply {
        Reply::fn_reply(move |req| match check(protocol, req) {
            Ok(()) => self.clone(),
            Err(rejection) => rejection.reply(),
        })
    }
}

impl FakeProvider {
    /// From now on every request is checked against `protocol`'s rules
    /// before it takes a scripted reply, and a refused one is answered with
    /// the provider's 400 (consuming no scripted reply). Call it again to
    /// add another protocol the same fake serves; each request is checked
    /// by the protocol whose path it uses, and a path none of them serves
    /// gets a 404.
    pub fn validate_requests(&self, protocol: Protocol) {
        let mut protocols = lock(&self.handle.state.validators);
        if !protocols.contains(&protocol) {
            protocols.push(protocol);
        }
    }

    /// Every request refused by validation so far, in arrival order.
    pub fn rejections(&self) -> Vec<Rejection> {
        lock(&self.handle.state.rejections).clone()
    }

    /// Turns off the checking every fake does by default (each request by the rules of the API its path is for),
    /// for a test that must send what a provider would refuse; `reason` says why, for whoever reads the test.
    pub fn skip_validation(&self, reason: &str) {
        *lock(&self.handle.state.unvalidated) = Some(reason.to_string());
    }

    /// The API key every request must carry (by default any non-empty one): a wrong one is answered with the
    /// provider's authentication error.
    pub fn require_api_key(&self, key: &str) {
        *lock(&self.handle.state.api_key) = Some(key.to_string());
    }
}

impl State {
    /// The reply for `req`: a rejection when validation is on and refuses
    /// it, else the next scripted reply.
    pub(crate) fn reply_for(&self, req: &Recorded) -> Reply {
        let google = lock(&self.google).clone();
        if let Some(tokens) = google
            && let Err(refused) = tokens.authenticate(req)
        {
            return *refused;
        }
        let resource = lock(&self.azure).clone();
        if let Some(resource) = resource
            && let Err(rejection) = azure::check(&resource, req)
        {
            let reply = rejection.reply();
            lock(&self.rejections).push(rejection);
            return reply;
        }
        let protocols = lock(&self.validators).clone();
        let key = lock(&self.api_key).clone();
        let unvalidated = lock(&self.unvalidated).is_some();
        let protocol = match protocols.iter().find(|p| p.serves(&req.path)) {
            Some(p) => Some(*p),
            // Told protocols, none of which serves the path: the first one's 404 says so.
            None if !protocols.is_empty() => Some(protocols[0]),
            None => Protocol::for_path(&req.path),
        };
        if let Some(protocol) = protocol.filter(|_| !unvalidated)
            && let Err(rejection) = check_keyed(protocol, req, key.as_deref())
        {
            let reply = rejection.reply();
            lock(&self.rejections).push(rejection);
            return reply;
        }
        let reply = self.next_reply().resolve(req);
        let Some(protocol) = protocol else {
            return reply;
        };
        if let Some(rejection) = calls_unoffered(protocol, req, &reply) {
            let answer = rejection.reply();
            lock(&self.rejections).push(rejection);
            return answer;
        }
        // A fake that checks requests answers as its provider does: whole when no stream was asked for.
        let reply = if unvalidated {
            reply
        } else {
            match crate::whole::as_asked(protocol, req, reply) {
                Ok(reply) => reply,
                Err(rejection) => {
                    let answer = rejection.reply();
                    lock(&self.rejections).push(rejection);
                    return answer;
                }
            }
        };
        reply.with_api_headers(protocol, self.next_request_id())
    }
}

/// A scripted `reply` that calls a tool the request did not offer: a broken script no model could produce, refused
/// as the fake's own 500 (and counted among the rejections, so the test fails).
fn calls_unoffered(protocol: Protocol, req: &Recorded, reply: &Reply) -> Option<Rejection> {
    let sse = reply.sse_body()?;
    let body: Value = serde_json::from_slice(&req.body).ok()?;
    let tool = offered::unoffered_call(protocol, &body, sse)?;
    Some(Rejection {
        protocol,
        status: 500,
        message: format!(
            "fake-provider: the scripted reply calls the tool `{tool}`, which the request did not offer"
        ),
        param: None,
        code: None,
    })
}

// --- Shared helpers for the rule modules ----------------------------------

/// `v[key]` as an object.
pub(crate) fn object<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

/// `v[key]` as a string.
pub(crate) fn string<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Whether `v[key]` is a non-empty string.
pub(crate) fn filled(v: &Value, key: &str) -> bool {
    string(v, key).is_some_and(|s| !s.is_empty())
}

/// `v[key]` as an array, empty when absent or not an array.
pub(crate) fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `^[a-zA-Z0-9_-]{1,max}$`, the tool-name and Anthropic id rule.
pub(crate) fn word_chars(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
