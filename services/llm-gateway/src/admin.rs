//! `KeysService` (`keys.proto`): keys created, listed, rotated and revoked at run time by `admin` keys, kept hashed
//! in Redis ([`crate::keys::store`]) and picked up by every replica's copy ([`crate::keys::cache`]).
//!
//! Every change is logged with the acting key and the key changed (tenant and name), never a token. A token leaves
//! the gateway once, in the reply that created it.

use llm_proto::gateway as pb;
use llm_proto::gateway::keys_service_server::KeysService;
use tonic::{Request, Response, Status};

use crate::generate::Gateway;
use crate::keys::store::{KeyStore, Record, Replaced};
use crate::keys::{Caller, Key, Role, Source, digest, file, mint_token, to_hex, valid_name};

/// Attempts of a rotation that races another change of the same key.
const ROTATE_ATTEMPTS: usize = 3;

/// The `KeysService` implementation.
pub struct KeysAdmin {
    pub(crate) gateway: Gateway,
}

#[tonic::async_trait]
impl KeysService for KeysAdmin {
    async fn create_key(
        &self,
        request: Request<pb::CreateKeyRequest>,
    ) -> Result<Response<pb::CreateKeyResponse>, Status> {
        let (caller, store) = self.open(&request)?;
        let req = request.into_inner();
        let tenant = tenant_for(&caller, &req.tenant)?;
        check_name(&req.name)?;
        let role = match pb::KeyRole::try_from(req.role) {
            Ok(pb::KeyRole::Unspecified | pb::KeyRole::Caller) => Role::Caller,
            Ok(pb::KeyRole::Processor) => Role::Processor,
            Ok(pb::KeyRole::Admin) => Role::Admin,
            Err(_) => return Err(invalid("role", "not a KeyRole")),
        };
        if role == Role::Processor && !caller.key.tenant.is_empty() {
            return Err(Status::permission_denied(
                "only an admin of the unnamed tenant may create processor keys (they may act for any tenant)",
            ));
        }
        let models = file::models((!req.models.is_empty()).then_some(req.models.as_slice()))
            .map_err(|m| invalid("models", &m))?;
        if self
            .gateway
            .config()
            .keys
            .find(&tenant, &req.name)
            .is_some()
        {
            return Err(exists(&tenant, &req.name));
        }
        let token = mint_token();
        let record = Record {
            name: req.name,
            tenant,
            role,
            models: models.map(|m| m.into_iter().collect()),
            sha256: to_hex(&digest(&token)),
            created_ms: now_ms(),
            rotated_ms: 0,
        };
        if !store.create(&record).await.map_err(unavailable)? {
            return Err(exists(&record.tenant, &record.name));
        }
        self.changed(&caller, "created", &record.tenant, &record.name);
        Ok(Response::new(pb::CreateKeyResponse {
            key: Some(record_to_pb(&record)),
            token,
        }))
    }

    async fn list_keys(
        &self,
        request: Request<pb::ListKeysRequest>,
    ) -> Result<Response<pb::ListKeysResponse>, Status> {
        let (caller, store) = self.open(&request)?;
        let wanted = request.into_inner().tenant;
        if !wanted.is_empty() && !caller.manages(&wanted) {
            return Err(foreign());
        }
        let shown =
            |tenant: &str| caller.manages(tenant) && (wanted.is_empty() || wanted == tenant);
        let config = self.gateway.config();
        let mut keys: Vec<pb::Key> = config
            .keys
            .keys()
            .filter(|k| shown(&k.tenant))
            .map(|k| key_to_pb(k))
            .collect();
        let records = store.load().await.map_err(unavailable)?;
        keys.extend(
            records
                .iter()
                .filter(|r| shown(&r.tenant))
                .map(record_to_pb),
        );
        keys.sort_by(|a, b| (&a.tenant, &a.name).cmp(&(&b.tenant, &b.name)));
        Ok(Response::new(pb::ListKeysResponse { keys }))
    }

    async fn rotate_key(
        &self,
        request: Request<pb::RotateKeyRequest>,
    ) -> Result<Response<pb::RotateKeyResponse>, Status> {
        let (caller, store) = self.open(&request)?;
        let req = request.into_inner();
        let tenant = tenant_for(&caller, &req.tenant)?;
        self.not_configured(&tenant, &req.name)?;
        for _ in 0..ROTATE_ATTEMPTS {
            let Some((old, record)) = store.get(&tenant, &req.name).await.map_err(unavailable)?
            else {
                return Err(missing(&tenant, &req.name));
            };
            let token = mint_token();
            let rotated = record.rotated(&digest(&token), now_ms());
            if store.replace(&old, &rotated).await.map_err(unavailable)? == Replaced::Done {
                self.changed(&caller, "rotated", &tenant, &req.name);
                return Ok(Response::new(pb::RotateKeyResponse {
                    key: Some(record_to_pb(&rotated)),
                    token,
                }));
            }
        }
        Err(Status::aborted(
            "the key changed while it was being rotated; try again",
        ))
    }

    async fn revoke_key(
        &self,
        request: Request<pb::RevokeKeyRequest>,
    ) -> Result<Response<pb::RevokeKeyResponse>, Status> {
        let (caller, store) = self.open(&request)?;
        let req = request.into_inner();
        let tenant = tenant_for(&caller, &req.tenant)?;
        self.not_configured(&tenant, &req.name)?;
        if !store
            .delete(&tenant, &req.name)
            .await
            .map_err(unavailable)?
        {
            return Err(missing(&tenant, &req.name));
        }
        self.changed(&caller, "revoked", &tenant, &req.name);
        Ok(Response::new(pb::RevokeKeyResponse {}))
    }
}

impl KeysAdmin {
    /// The acting admin and the store, or why the call cannot go on.
    fn open<T>(&self, request: &Request<T>) -> Result<(Caller, std::sync::Arc<KeyStore>), Status> {
        let caller = request
            .extensions()
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| Status::unauthenticated(service_kit::auth::MISSING_BEARER))?;
        if caller.key.role != Role::Admin {
            return Err(Status::permission_denied("KeysService needs an admin key"));
        }
        if self.gateway.config().redis.is_none() {
            return Err(Status::failed_precondition(
                "run-time keys need the gateway's [redis] section; this gateway has keys from its configuration only",
            ));
        }
        let store = self
            .gateway
            .keys()
            .store()
            .ok_or_else(|| Status::unavailable("the gateway is not connected to redis yet"))?;
        Ok((caller, store))
    }

    /// Refuses a change of a key the configuration defines.
    fn not_configured(&self, tenant: &str, name: &str) -> Result<(), Status> {
        match self.gateway.config().keys.find(tenant, name) {
            Some(_) => Err(Status::failed_precondition(format!(
                "key {name:?} is defined in the configuration; change it there"
            ))),
            None => Ok(()),
        }
    }

    /// Logs a change and wakes this replica's copy.
    fn changed(&self, caller: &Caller, what: &'static str, tenant: &str, name: &str) {
        tracing::info!(
            message = "key changed",
            change = what,
            tenant = %tenant,
            key = %name,
            by_tenant = %caller.key.tenant,
            by_key = %caller.key.name,
        );
        self.gateway.keys().changed();
    }
}

/// The tenant a request names: an admin of a named tenant naming none means its own.
fn tenant_for(caller: &Caller, requested: &str) -> Result<String, Status> {
    let tenant = if requested.is_empty() {
        caller.key.tenant.clone()
    } else {
        requested.to_owned()
    };
    if !tenant.is_empty() && !valid_name(&tenant) {
        return Err(invalid(
            "tenant",
            "1 to 64 characters of [A-Za-z0-9._-], starting with a letter or digit",
        ));
    }
    if !caller.manages(&tenant) {
        return Err(foreign());
    }
    Ok(tenant)
}

fn check_name(name: &str) -> Result<(), Status> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(invalid(
            "name",
            "1 to 64 characters of [A-Za-z0-9._-], starting with a letter or digit",
        ))
    }
}

fn invalid(field: &str, why: &str) -> Status {
    crate::status::invalid(field, why)
}

fn foreign() -> Status {
    Status::permission_denied("this admin key manages its own tenant's keys only")
}

fn exists(tenant: &str, name: &str) -> Status {
    Status::already_exists(format!(
        "tenant {tenant:?} already has a key named {name:?}"
    ))
}

fn missing(tenant: &str, name: &str) -> Status {
    Status::not_found(format!(
        "tenant {tenant:?} has no run-time key named {name:?}"
    ))
}

fn unavailable(e: redis::RedisError) -> Status {
    tracing::warn!(message = "keys: redis failed an admin call", error = %e);
    Status::unavailable("redis did not answer; try again")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn role_to_pb(role: Role) -> pb::KeyRole {
    match role {
        Role::Caller => pb::KeyRole::Caller,
        Role::Processor => pb::KeyRole::Processor,
        Role::Admin => pb::KeyRole::Admin,
    }
}

fn key_to_pb(k: &Key) -> pb::Key {
    pb::Key {
        name: k.name.clone(),
        tenant: k.tenant.clone(),
        role: role_to_pb(k.role) as i32,
        models: k.models.iter().flatten().cloned().collect(),
        all_models: k.models.is_none(),
        source: match k.source {
            Source::Config => pb::KeySource::Config,
            Source::Api => pb::KeySource::Api,
        } as i32,
        created_unix_ms: k.created_ms,
        rotated_unix_ms: k.rotated_ms,
    }
}

fn record_to_pb(r: &Record) -> pb::Key {
    pb::Key {
        name: r.name.clone(),
        tenant: r.tenant.clone(),
        role: role_to_pb(r.role) as i32,
        models: r.models.clone().unwrap_or_default(),
        all_models: r.models.is_none(),
        source: pb::KeySource::Api as i32,
        created_unix_ms: r.created_ms,
        rotated_unix_ms: r.rotated_ms,
    }
}
