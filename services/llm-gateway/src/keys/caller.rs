//! Who a call is from: the key its token names and the tenant the call is attributed to, decided once per call by
//! [`identify`] (pure: the tables in, a [`Caller`] or a [`Refusal`] out), for both doors.
//!
//! The tenant is the key's own, unless the key is a `processor` key and the call names another in `x-tenant` (the
//! session-processor naming its session's tenant). Any other key naming a tenant not its own is refused
//! (`PERMISSION_DENIED`), never silently re-attributed.

use std::sync::Arc;

use super::{Key, KeyTable, Role, Source, digest};

/// The metadata entry (gRPC) or header (HTTP) that names the tenant a call belongs to.
pub const TENANT_HEADER: &str = "x-tenant";

/// The key of calls without a token when the gateway runs unauthenticated (`server.allow_unauthenticated` and no
/// keys configured): the unnamed tenant, every model, and free to name a tenant as the processor does.
const ANONYMOUS: &str = "anonymous";

/// An identified caller.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key its token names.
    pub key: Arc<Key>,
    /// The tenant the call is attributed to: the key's, or the one a processor key named.
    pub tenant: Arc<str>,
}

/// Why a call was refused before anything else ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No token presented.
    Missing,
    /// A token no key has.
    Unknown,
    /// `x-tenant` names a tenant the key does not belong to, and the key may not name one.
    ForeignTenant,
    /// `x-tenant` is not a tenant name.
    BadTenant,
}

impl Refusal {
    /// The caller-facing message: never the token, nor which tenants exist.
    pub fn message(&self) -> &'static str {
        match self {
            Refusal::Missing => service_kit::auth::MISSING_BEARER,
            Refusal::Unknown => "invalid bearer token",
            Refusal::ForeignTenant => "this key may not act for another tenant (x-tenant)",
            Refusal::BadTenant => {
                "x-tenant must be 1 to 64 characters of [A-Za-z0-9._-], starting with a letter or digit"
            }
        }
    }

    /// The gRPC status.
    pub fn status(&self) -> tonic::Status {
        match self {
            Refusal::Missing | Refusal::Unknown => tonic::Status::unauthenticated(self.message()),
            Refusal::ForeignTenant => tonic::Status::permission_denied(self.message()),
            Refusal::BadTenant => tonic::Status::invalid_argument(self.message()),
        }
    }
}

/// The caller of a call presenting `token` and naming `tenant`, looked up in `tables` in order. `open`: the
/// gateway runs unauthenticated, so a call without a known token is the anonymous caller.
pub fn identify(
    token: Option<&str>,
    tenant: Option<&str>,
    tables: &[&KeyTable],
    open: bool,
) -> Result<Caller, Refusal> {
    let found = token.and_then(|t| {
        let d = digest(t);
        tables.iter().find_map(|table| table.lookup(&d).cloned())
    });
    let key = match (found, token) {
        (Some(key), _) => key,
        (None, _) if open => anonymous(),
        (None, None) => return Err(Refusal::Missing),
        (None, Some(_)) => return Err(Refusal::Unknown),
    };
    let tenant = match tenant {
        None => Arc::from(key.tenant.as_str()),
        Some(t) if t == key.tenant => Arc::from(t),
        Some(_) if key.role != Role::Processor => return Err(Refusal::ForeignTenant),
        Some("") => Arc::from(""),
        Some(t) if super::valid_name(t) => Arc::from(t),
        Some(_) => return Err(Refusal::BadTenant),
    };
    Ok(Caller { key, tenant })
}

fn anonymous() -> Arc<Key> {
    Arc::new(Key {
        name: ANONYMOUS.into(),
        tenant: String::new(),
        role: Role::Processor,
        models: None,
        source: Source::Config,
        created_ms: 0,
        rotated_ms: 0,
    })
}

impl Caller {
    /// May this caller use the model it asked for as `requested`, which resolves to catalog model `resolved` (an
    /// alias's target; the same id otherwise)? A key's list allows a name it lists, and every alias of a model id
    /// it lists.
    pub fn may_use(&self, requested: &str, resolved: &str) -> bool {
        self.key
            .models
            .as_ref()
            .is_none_or(|m| m.contains(requested) || m.contains(resolved))
    }

    /// May this caller manage keys of `tenant`? An admin of the unnamed tenant manages every tenant's; an admin of
    /// a named tenant, its own.
    pub fn manages(&self, tenant: &str) -> bool {
        self.key.role == Role::Admin && (self.key.tenant.is_empty() || self.key.tenant == tenant)
    }

    /// The key's name as spans show it (`llm.key`).
    pub fn key_name(&self) -> &str {
        &self.key.name
    }

    /// Records the caller on a call's span (`llm.tenant`, `llm.key`; the span declares both). The unnamed tenant
    /// is left out rather than recorded as an empty string, as the spans do with everything absent.
    pub fn record(&self, span: &tracing::Span) {
        llm_telemetry::record_present(span, "llm.tenant", &self.tenant);
        span.record("llm.key", self.key.name.as_str());
    }
}

/// The tenant a call names in its metadata, when it names one (a value that is not text names none validly and is
/// refused as [`Refusal::BadTenant`] by the caller of this).
pub fn named_tenant(metadata: &tonic::metadata::MetadataMap) -> Result<Option<&str>, Refusal> {
    metadata
        .get(TENANT_HEADER)
        .map(|v| v.to_str().map_err(|_| Refusal::BadTenant))
        .transpose()
}
