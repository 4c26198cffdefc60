//! Why a generation could not start (before any provider byte): the model is unknown, the request cannot be
//! translated, a `fail_closed` hook failed, or the gateway is at its concurrency limit.

use crate::adapter::BuildError;
use crate::error::ErrorKind;
use crate::hooks::HookError;

/// Why a generation could not start; mapped to a gRPC status by [`crate::status::start_error_status`].
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The model (or a fallback model) is not served.
    #[error("model `{model}` is not in the catalog{}", suggestions(.close))]
    UnknownModel {
        /// The id asked for.
        model: String,
        /// Close matches, for the message.
        close: Vec<String>,
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

fn suggestions(close: &[String]) -> String {
    if close.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}", close.join(", "))
    }
}

/// `ErrorKind` for a start error, for metrics and logs.
pub fn start_error_kind(e: &StartError) -> ErrorKind {
    match e {
        StartError::UnknownModel { .. } | StartError::Invalid(_) | StartError::WrongKind { .. } => {
            ErrorKind::InvalidRequest
        }
        StartError::Hook(_) => ErrorKind::ProviderError,
        StartError::TooManyGenerations { .. } => ErrorKind::Overloaded,
    }
}
