//! Tenant spend: one counter per tenant, outside every session's slot.

use super::{Store, StoreError, keys};

impl Store {
    /// Adds `nano_usd` to a tenant's spend and returns the new total. Not fenced and not in a session's script:
    /// the counter lives outside every session's slot, and an increment is never stale.
    pub async fn add_tenant_spend(&self, tenant: &str, nano_usd: i64) -> Result<i64, StoreError> {
        self.write(async {
            let total: i64 = redis::cmd("INCRBY")
                .arg(keys::tenant_spend(&self.prefix, tenant))
                .arg(nano_usd)
                .query_async(&mut self.conn.clone())
                .await?;
            Ok(total)
        })
        .await
    }

    /// A tenant's spend in nano-USD (0 before its first charge).
    pub async fn tenant_spend(&self, tenant: &str) -> Result<i64, StoreError> {
        let total: Option<i64> = redis::cmd("GET")
            .arg(keys::tenant_spend(&self.prefix, tenant))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(total.unwrap_or(0))
    }
}
