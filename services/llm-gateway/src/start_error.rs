//! Why a generation could not start (before any provider byte): the model is unknown, the request cannot be
//! translated, a `fail_closed` hook failed, or the gateway is at its concurrency limit.

use crate::adapter::BuildError;
use crate::error::ErrorKind;
use crate::hooks::HookError;

/// Why a generation could not start; mapped to a gRPC status by [`crate::status::start_error_status`].
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The model (or a fallback model) is not served.
    #[error("model `{model}` is not served{}", why_not(.unconfigured.as_deref(), .close, .served))]
    UnknownModel {
        /// The id asked for.
        model: String,
        /// For a catalog model whose provider is not configured: what enables it (`set OPENAI_API_KEY`).
        unconfigured: Option<String>,
        /// Close matches, for the message.
        close: Vec<String>,
        /// Some served model names, and how many there are, for the message when nothing is close.
        served: (Vec<String>, usize),
    },
    /// A bare model name several catalog models have.
    #[error("model `{model}` is served by several providers ({}); name one of them", .candidates.join(", "))]
    AmbiguousModel {
        /// The name asked for.
        model: String,
        /// The catalog ids that have it.
        candidates: Vec<String>,
    },
    /// The request cannot be translated.
    #[error(transparent)]
    Invalid(#[from] BuildError),
    /// A `fail_closed` hook service failed.
    #[error(transparent)]
    Hook(#[from] HookError),
    /// The model is of another kind than the call needs: an embedding model asked to chat, or a chat model to
    /// embed.
    #[error("{}", wrong_kind(.model, *.kind))]
    WrongKind {
        /// The request field naming the model (`generation.model`, `model`).
        field: String,
        /// The id asked for.
        model: String,
        /// What the model is.
        kind: crate::catalog::ModelKind,
    },
    /// `server.max_inflight_generations` generations are already running.
    #[error("too many concurrent generations (limit {limit})")]
    TooManyGenerations {
        /// The configured limit.
        limit: usize,
    },
}

fn wrong_kind(model: &str, kind: crate::catalog::ModelKind) -> String {
    match kind {
        crate::catalog::ModelKind::Embedding => format!(
            "`{model}` is an embedding model: it serves embeddings (`Embed`, `POST /v1/embeddings`), not chat"
        ),
        crate::catalog::ModelKind::Chat => {
            format!("`{model}` is a chat model, not an embedding model")
        }
    }
}

fn why_not(
    unconfigured: Option<&str>,
    close: &[String],
    (served, total): &(Vec<String>, usize),
) -> String {
    if let Some(fix) = unconfigured {
        return format!(": its provider is not configured on this gateway ({fix})");
    }
    if !close.is_empty() {
        return format!("; did you mean {}", close.join(", "));
    }
    if served.is_empty() {
        return "; this gateway serves no models (no provider is configured)".to_string();
    }
    let more = match total - served.len() {
        0 => String::new(),
        n => format!(" and {n} more (GET /v1/models or ListModels lists them)"),
    };
    format!("; served: {}{more}", served.join(", "))
}

/// `ErrorKind` for a start error, for metrics and logs.
pub fn start_error_kind(e: &StartError) -> ErrorKind {
    match e {
        StartError::UnknownModel { .. }
        | StartError::AmbiguousModel { .. }
        | StartError::WrongKind { .. }
        | StartError::Invalid(_) => ErrorKind::InvalidRequest,
        StartError::Hook(_) => ErrorKind::ProviderError,
        StartError::TooManyGenerations { .. } => ErrorKind::Overloaded,
    }
}
