//! Cost hard-stops (docs/architecture.md "Budgets"): a session's budget and its tenant's budget, checked only at step boundaries,
//! when the previous step's parts, patch and accounting are closed, so a stop never leaves anything half-written.
//!
//! A session's spend is its `cost_nano_usd` (the sum of its assistant messages, settled after every step). A
//! tenant's spend is a Redis counter (`<prefix>tenant:<name>:spend`) every step, summary and title call of its
//! sessions adds to once the call's cost is known. The counter sits outside the session's slot, so it cannot be
//! written in the session's fenced script: it is incremented right after the step is settled, and a replica that
//! dies between the two leaves that one step uncounted (never counted twice).

use llm_proto::sessions as pb;

use super::{Engine, LoopError};

/// USD with nano precision trimmed for messages: `0.25`, `1.5`, `0.000001`.
pub(super) fn usd(nano: i64) -> String {
    let text = format!("{:.9}", nano as f64 / 1e9);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

impl Engine {
    /// Why the next model call must not happen, when the session's or its tenant's budget is spent.
    ///
    /// The session record is the one the loop carries (read when it started, then as written by its last
    /// `settle_session`), so a step boundary costs no read of it; a loop without one reads it.
    pub(super) async fn budget_spent(&self, session_id: &str) -> Result<Option<String>, LoopError> {
        let carried = self.with_cache(session_id, |s| s.session.clone());
        let session = match carried {
            Some(s) => Some(s),
            None => self.store.sessions().get_session(session_id).await?,
        };
        let Some(s) = session else {
            return Ok(None);
        };
        if s.budget_nano_usd > 0 && s.cost_nano_usd >= s.budget_nano_usd {
            return Ok(Some(format!(
                "the session's budget of {} USD is spent ({} USD)",
                usd(s.budget_nano_usd),
                usd(s.cost_nano_usd)
            )));
        }
        if let Some(t) = self.config.tenants.get(&s.tenant)
            && t.budget_nano_usd > 0
        {
            let spend = self.store.spend().tenant_spend(&t.name).await?;
            if spend >= t.budget_nano_usd {
                return Ok(Some(format!(
                    "tenant `{}`'s budget of {} USD is spent ({} USD)",
                    t.name,
                    usd(t.budget_nano_usd),
                    usd(spend)
                )));
            }
        }
        Ok(None)
    }

    /// Adds a call's cost to the session's tenant. A failure is logged, not fatal: the step already happened and
    /// its cost is stored on the session either way.
    pub(super) async fn charge_tenant(&self, session: &pb::Session, nano_usd: i64) {
        if session.tenant.is_empty() || nano_usd <= 0 {
            return;
        }
        if let Err(e) = self
            .store
            .spend()
            .add_tenant_spend(&session.tenant, nano_usd)
            .await
        {
            tracing::warn!(message = "cannot add to the tenant's spend", session_id = %session.id, tenant = %session.tenant, error = %e);
        }
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
