//! `GetSpend`: a tenant's spend and budget (the caller's own tenant, or any for an operator).

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use crate::api::{access, status, validate};
use crate::config::Caller;
use crate::engine::Engine;

pub(super) async fn get_spend(
    engine: &Engine,
    request: Request<pb::GetSpendRequest>,
) -> Result<Response<pb::GetSpendResponse>, Status> {
    let caller = access::caller(&request)?;
    let asked = request.into_inner();
    validate::get_spend(&asked)?;
    let name = match (&caller, asked.tenant.is_empty()) {
        (Caller::Operator, true) => {
            return Err(status::invalid("tenant", "required with an operator token"));
        }
        (Caller::Operator, false) => asked.tenant,
        (Caller::Tenant(own), true) if own.is_empty() => {
            return Err(status::invalid(
                "tenant",
                "this token belongs to no tenant, so it has no spend to read",
            ));
        }
        (Caller::Tenant(own), true) => own.clone(),
        (Caller::Tenant(own), false) if *own == asked.tenant => asked.tenant,
        // Another tenant's spend: as if it did not exist.
        (Caller::Tenant(_), false) => return Err(status::tenant_not_found()),
    };
    access::audit(&caller, "GetSpend", "", &name);
    let tenant = engine
        .config()
        .tenants
        .get(&name)
        .ok_or_else(status::tenant_not_found)?;
    let spend = engine
        .store()
        .spend()
        .tenant_spend(&tenant.name)
        .await
        .map_err(status::storage)?;
    Ok(Response::new(pb::GetSpendResponse {
        tenant: tenant.name.clone(),
        spend_nano_usd: spend,
        budget_nano_usd: tenant.budget_nano_usd,
    }))
}
