//! What the embeddings and token-count endpoints share: a call's failure in the door's error shape.

use crate::calls::{CallError, no_counting_message};
use crate::http::errors::{ApiError, Class};

/// `e` as an error response: a start error or a validation status as a generation's, a size as 413, a model that
/// cannot be counted as a 400 naming `model` (the caller's choice of model is what cannot be served), a provider's
/// failure with what the provider said.
pub fn api_error(e: &CallError) -> ApiError {
    match e {
        CallError::Start(s) => ApiError::from_start(s),
        CallError::Status(s) => ApiError::from_status(s),
        CallError::TooLarge { field, message } => ApiError {
            param: Some(field.clone()),
            ..ApiError::new(Class::TooLarge, format!("{field}: {message}"))
        },
        CallError::NoCounting { model } => ApiError::invalid("model", no_counting_message(model)),
        CallError::Provider { error, protocol } => ApiError::from_provider(error, Some(*protocol)),
    }
}
