//! A caller admitted to a call: the call's span and the tenant metric say who it is from, and a key limited to
//! some models reaches only those.
//!
//! A model the key may not use is refused exactly as a model the gateway does not serve (`NOT_FOUND` on gRPC, the
//! vendor's 404 at the HTTP door), and the refusal's suggestions (close names, a sample of served names) are cut to
//! the key's own models, so a limited key cannot learn what else the gateway serves.

use crate::generate::Gateway;
use crate::keys::Caller;
use crate::start_error::StartError;

/// How many of a key's models an unknown-model message names.
const SAMPLE: usize = 8;

/// Admits `caller` to a call of `operation` on `models` (the model, then any fallbacks the request names): records
/// the caller on `span` and, once admitted, in the tenant metric.
pub fn admit<'a>(
    gateway: &Gateway,
    caller: &Caller,
    operation: &'static str,
    models: impl IntoIterator<Item = &'a str>,
    span: &tracing::Span,
) -> Result<(), StartError> {
    caller.record(span);
    for model in models {
        check(gateway, caller, model)?;
    }
    gateway.metrics().tenant_call(&caller.tenant, operation);
    Ok(())
}

/// Whether `caller` may use `requested`; an unserved or forbidden name is the same [`StartError::UnknownModel`].
pub fn check(gateway: &Gateway, caller: &Caller, requested: &str) -> Result<(), StartError> {
    if caller.key.models.is_none() {
        return Ok(());
    }
    match gateway.resolve(requested) {
        Ok(r) if caller.may_use(requested, r.alias_of.as_deref().unwrap_or(&r.model.id)) => Ok(()),
        Ok(_) => Err(hidden(caller, requested)),
        Err(e) => Err(scrub(caller, e)),
    }
}

/// A start error as a limited key may see it: its suggestions cut to the key's models. Unchanged for a key of
/// every model.
pub fn scrub(caller: &Caller, e: StartError) -> StartError {
    if caller.key.models.is_none() {
        return e;
    }
    match e {
        StartError::UnknownModel {
            model,
            unconfigured,
            close,
            ..
        } => StartError::UnknownModel {
            // Why a catalog model is not served is said only of a model the key may use.
            unconfigured: unconfigured.filter(|_| caller.may_use(&model, &model)),
            close: close.into_iter().filter(|c| caller.may_use(c, c)).collect(),
            served: sample(caller),
            model,
        },
        StartError::AmbiguousModel { model, candidates } => {
            let candidates: Vec<String> = candidates
                .into_iter()
                .filter(|c| caller.may_use(c, c))
                .collect();
            if candidates.is_empty() {
                hidden(caller, &model)
            } else {
                StartError::AmbiguousModel { model, candidates }
            }
        }
        other => other,
    }
}

/// The refusal of a model `caller` may not use: the unknown-model error, naming only the key's models.
fn hidden(caller: &Caller, requested: &str) -> StartError {
    StartError::UnknownModel {
        model: requested.to_owned(),
        unconfigured: None,
        close: Vec::new(),
        served: sample(caller),
    }
}

fn sample(caller: &Caller) -> (Vec<String>, usize) {
    let models = caller.key.models.as_ref();
    let names = models.map_or_else(Vec::new, |m| m.iter().take(SAMPLE).cloned().collect());
    (names, models.map_or(0, |m| m.len()))
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
