//! Tenant spend: one counter per tenant, outside every session's slot.

use std::sync::Arc;

use super::db::Db;
use super::{StoreError, keys};

/// Tenants' spend counters (see the module docs).
#[derive(Clone)]
pub struct Spend {
    pub(super) db: Arc<Db>,
}

impl Spend {
    /// Adds `nano_usd` to a tenant's spend and returns the new total. Not fenced and not in a session's script:
    /// the counter lives outside every session's slot, and an increment is never stale.
    pub async fn add_tenant_spend(&self, tenant: &str, nano_usd: i64) -> Result<i64, StoreError> {
        self.db
            .write(async {
                let total: i64 = redis::cmd("INCRBY")
                    .arg(keys::tenant_spend(&self.db.prefix, tenant))
                    .arg(nano_usd)
                    .query_async(&mut self.db.conn.clone())
                    .await?;
                Ok(total)
            })
            .await
    }

    /// A tenant's spend in nano-USD (0 before its first charge).
    pub async fn tenant_spend(&self, tenant: &str) -> Result<i64, StoreError> {
        let total: Option<i64> = redis::cmd("GET")
            .arg(keys::tenant_spend(&self.db.prefix, tenant))
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(total.unwrap_or(0))
    }
}

#[cfg(test)]
#[path = "spend_tests.rs"]
mod tests;
