//! Azure OpenAI request rules (docs/providers.md §2b): what a resource checks before OpenAI's body rules, in its
//! order, each refusal with Azure's own status and body.
//!
//! 1. The credential: the resource's `api-key`, or an Entra ID bearer token its application was issued (401).
//! 2. The route: `/openai/deployments/{d}/chat/completions`, `/openai/deployments/{d}/embeddings` and
//!    `/openai/responses` on the dated surface, `/openai/v1/chat/completions`, `/openai/v1/embeddings` and
//!    `/openai/v1/responses` on v1 (404 `Resource not found`).
//! 3. The `api-version`: required on the dated surface and one the resource serves (Responses from
//!    `2025-03-01-preview`); on v1 absent, `preview` or `latest` (404 when missing, 400 when unsupported).
//! 4. The deployment, from the path or the body's `model` (404 `DeploymentNotFound`).
//! 5. OpenAI's body rules ([`super::openai`], [`super::embeddings`]) with `model` replaced by the model the deployment runs, so a
//!    reasoning deployment is held to the reasoning models' rules whatever it is called.

use serde_json::Value;

use super::{Protocol, Rejection, openai, string};
use crate::Recorded;
use crate::azure::{API_VERSIONS, AzureResource};

/// The operation a request path names.
struct Route<'a> {
    protocol: Protocol,
    /// `true` on the dated surface.
    dated: bool,
    /// The deployment in the path (dated Chat Completions only).
    deployment: Option<&'a str>,
}

fn route(path: &str) -> Option<Route<'_>> {
    let path = path.split('?').next().unwrap_or("");
    let rest = path.strip_prefix("/openai/")?;
    let (protocol, dated, deployment) = match rest {
        "v1/chat/completions" => (Protocol::AzureChat, false, None),
        "v1/responses" => (Protocol::AzureResponses, false, None),
        "v1/embeddings" => (Protocol::AzureEmbeddings, false, None),
        "responses" => (Protocol::AzureResponses, true, None),
        _ => {
            let d = rest.strip_prefix("deployments/")?;
            let (d, protocol) = match d.strip_suffix("/chat/completions") {
                Some(d) => (d, Protocol::AzureChat),
                None => (d.strip_suffix("/embeddings")?, Protocol::AzureEmbeddings),
            };
            if d.is_empty() || d.contains('/') {
                return None;
            }
            (protocol, true, Some(d))
        }
    };
    Some(Route {
        protocol,
        dated,
        deployment,
    })
}

/// The `api-version` query parameter of `path`.
fn api_version(path: &str) -> Option<&str> {
    path.split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix("api-version="))
}

/// An Azure service error: `{"error": {"code", "message"}}`.
fn service(protocol: Protocol, status: u16, code: &str, message: &str) -> Rejection {
    Rejection {
        protocol,
        status,
        message: message.into(),
        param: None,
        code: Some(code.into()),
    }
}

/// Checks `req` against `resource` (module docs); `Ok` when the resource would serve it.
pub(crate) fn check(resource: &AzureResource, req: &Recorded) -> Result<(), Rejection> {
    let route = route(&req.path);
    let p = route.as_ref().map_or(Protocol::AzureChat, |r| r.protocol);
    if let Err(message) = resource.authenticate(req) {
        return Err(service(p, 401, "401", message));
    }
    let Some(route) = route else {
        return Err(service(p, 404, "404", "Resource not found"));
    };
    match (route.dated, api_version(&req.path)) {
        (true, None) => return Err(service(p, 404, "404", "Resource not found")),
        (true, Some(v)) => {
            let responses_too_old = p == Protocol::AzureResponses && v < "2025-03-01-preview";
            if !API_VERSIONS.contains(&v) || responses_too_old {
                return Err(service(p, 400, "BadRequest", "API version not supported"));
            }
        }
        (false, Some(v)) if v != "preview" && v != "latest" => {
            return Err(service(p, 400, "BadRequest", "API version not supported"));
        }
        (false, _) => {}
    }
    let mut body: Value = serde_json::from_slice(&req.body).map_err(|e| Rejection {
        protocol: p,
        status: 400,
        message: format!("We could not parse the JSON body of your request: {e}"),
        param: None,
        code: None,
    })?;
    let deployment = route
        .deployment
        .map(String::from)
        .or_else(|| string(&body, "model").map(String::from))
        .unwrap_or_default();
    let Some(model) = resource.model_of(&deployment) else {
        return Err(service(
            p,
            404,
            "DeploymentNotFound",
            "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.",
        ));
    };
    if let Some(fields) = body.as_object_mut() {
        fields.insert("model".into(), Value::String(model));
    }
    let rules = match p {
        Protocol::AzureResponses => openai::check_responses(&body),
        Protocol::AzureEmbeddings => super::embeddings::openai(&body),
        _ => openai::check_chat(openai::Server::OpenAi, &body),
    };
    rules.map_err(|f| Rejection {
        protocol: p,
        status: 400,
        message: f.message,
        param: f.param,
        code: f.code.map(String::from),
    })
}

/// Whether a rejection of an Azure protocol is one of Azure's own service errors (`{"error": {"code",
/// "message"}}`) rather than a body rule answered in OpenAI's shape.
pub(super) fn is_service_error(r: &Rejection) -> bool {
    r.status != 400 || r.code.as_deref() == Some("BadRequest")
}

#[cfg(test)]
#[path = "azure_tests.rs"]
mod tests;
