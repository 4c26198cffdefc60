//! Cost hard-stops (docs/architecture.md "Budgets"): a session's budget and its tenant's budget, checked only at step boundaries,
//! when the previous step's parts, patch and accounting are closed, so a stop never leaves anything half-written.
//!
//! A session's spend is its `cost_nano_usd` (the sum of its assistant messages, settled after every step). A
//! tenant's spend is a Redis counter (`<prefix>tenant:<name>:spend`) every step, summary and title call of its
//! sessions adds to once the call's cost is known. The counter sits outside the session's slot, so it cannot be
//! written in the session's fenced script: it is incremented right after the step is settled, and a replica that
//! dies between the two leaves that one step uncounted (never counted twice).

use std::sync::Arc;

use super::LoopError;
use super::totals::RunCaches;
use crate::config::Config;
use crate::store::{Sessions, Spend};

/// USD with nano precision trimmed for messages: `0.25`, `1.5`, `0.000001`.
pub(super) fn usd(nano: i64) -> String {
    let text = format!("{:.9}", nano as f64 / 1e9);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// Checks the session's and its tenant's budgets at a step boundary.
pub(super) struct Budget {
    /// The tenants' budgets.
    pub(super) config: Arc<Config>,
    pub(super) sessions: Sessions,
    pub(super) spend: Spend,
    /// The session record the loop carries.
    pub(super) caches: Arc<RunCaches>,
}

impl Budget {
    /// Why the next model call must not happen, when the session's or its tenant's budget is spent.
    ///
    /// The session record is the one the loop carries (read when it started, then as written by its last
    /// `settle_session`), so a step boundary costs no read of it; a loop without one reads it.
    pub(super) async fn budget_spent(&self, session_id: &str) -> Result<Option<String>, LoopError> {
        let carried = self.caches.with(session_id, |s| s.session.clone());
        let session = match carried {
            Some(s) => Some(s),
            None => self.sessions.get_session(session_id).await?,
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
            let spend = self.spend.tenant_spend(&t.name).await?;
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
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
