//! Whether the gateway knows a model, asked when a session names its default model.
//!
//! `NOT_FOUND` from the gateway's `GetModel` is the caller's mistake (`INVALID_ARGUMENT` naming the field). When the
//! gateway cannot answer within [`CATALOG_TIMEOUT`] (down, unreachable, or answering anything else), the model is
//! accepted unchecked and a warning logged: a session is only a record, and its first step asks the gateway again,
//! which then fails the step with the gateway's error. Creating sessions does not depend on the gateway being up.

use std::time::Duration;

use llm_proto::gateway as gw;
use tonic::{Code, Status};

use super::status;
use crate::engine::Engine;

/// How long `CreateSession` waits for the gateway's answer about a model.
pub const CATALOG_TIMEOUT: Duration = Duration::from_secs(2);

/// Checks `model` (well-formed, non-empty) against the gateway's catalog; `field` names it in the error.
pub async fn check_model(engine: &Engine, field: &str, model: &str) -> Result<(), Status> {
    let mut gateway = engine.gateway().clone();
    let mut request = tonic::Request::new(gw::GetModelRequest {
        model: model.to_string(),
    });
    request.set_timeout(CATALOG_TIMEOUT);
    let answer = tokio::time::timeout(CATALOG_TIMEOUT, gateway.get_model(request)).await;
    match answer {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(s)) if matches!(s.code(), Code::NotFound | Code::InvalidArgument) => {
            Err(status::invalid(
                field,
                &format!("the gateway does not serve `{model}`: {}", s.message()),
            ))
        }
        Ok(Err(s)) => {
            tracing::warn!(message = "cannot check a model against the gateway's catalog; accepted unchecked", model, code = ?s.code(), error = s.message());
            Ok(())
        }
        Err(_) => {
            tracing::warn!(
                message = "the gateway did not answer about a model in time; accepted unchecked",
                model,
                timeout_ms = CATALOG_TIMEOUT.as_millis() as u64
            );
            Ok(())
        }
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
