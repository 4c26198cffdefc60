//! The title task: one `Generate` call after a session's first prompt, spawned so it never delays the loop.
//!
//! The title is written with [`crate::store::Sessions::update_session`], a compare-and-set on the session record, and
//! so are the loop's totals: neither writer can overwrite the other's field, whichever lands first. The write is not
//! fenced: it touches only the title, and it may well finish after the loop released its lease (a one-step answer
//! with a slow title model).

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use tracing::Instrument;

use std::sync::Arc;

use super::gateway::{GatewayClient, with_session};
use crate::config::{Agent, Config};
use crate::store::{Sessions, Spend};
use crate::title;

/// Starts the title task of a session's first loop.
pub(super) struct Titles {
    /// Whether titles are on, and the call's deadline.
    pub(super) config: Arc<Config>,
    pub(super) gateway: GatewayClient,
    /// Where the title is written.
    pub(super) sessions: Sessions,
    /// The title call's cost goes to the session's tenant.
    pub(super) spend: Spend,
}

impl Titles {
    /// Starts the title call when one is due (titles enabled, none yet, the session's first loop).
    pub(super) fn spawn_title(
        &self,
        session: &pb::Session,
        agent: &Agent,
        history: &[pb::Message],
        model: &str,
        trace: &[(String, String)],
    ) {
        if !self.config.titles || !session.title.is_empty() || !title::is_due(history) {
            return;
        }
        let model = if agent.small_model.is_empty() {
            model
        } else {
            &agent.small_model
        };
        let Some(generation) = title::request(history, model, &session.id, &agent.name) else {
            return;
        };
        let mut request = tonic::Request::new(gw::GenerateRequest {
            generation: Some(generation),
        });
        request.set_timeout(self.config.step_timeout);
        with_session(&mut request, trace, &session.tenant);
        let (sessions, spend) = (self.sessions.clone(), self.spend.clone());
        let mut gateway = self.gateway.clone();
        let session = session.clone();
        let tenants = self.config.tenants.contains_key(&session.tenant);
        // The call in the loop's span, like the loop's other gateway calls: its client span is a child of it.
        let span = tracing::Span::current();
        tokio::spawn(async move {
            let reply = match gateway.generate(request).instrument(span).await {
                Ok(r) => r.into_inner(),
                Err(status) => {
                    tracing::warn!(message = "title generation failed", session_id = %session.id, error = %status.message());
                    return;
                }
            };
            let cost = reply
                .finish
                .as_ref()
                .and_then(|f| f.cost)
                .map_or(0, |c| c.total_nano_usd);
            if tenants
                && cost > 0
                && let Err(e) = spend.add_tenant_spend(&session.tenant, cost).await
            {
                tracing::warn!(message = "cannot add to the tenant's spend", session_id = %session.id, tenant = %session.tenant, error = %e);
            }
            let Some(title) = title::from_reply(&reply) else {
                tracing::warn!(message = "the title model returned no usable title", session_id = %session.id);
                return;
            };
            let written = sessions
                .update_session(&session.id, None, |s| {
                    // A title set meanwhile (by another replica's task) stays.
                    if s.title.is_empty() {
                        s.title.clone_from(&title);
                    }
                })
                .await;
            if let Err(e) = written {
                tracing::warn!(message = "cannot store the title", session_id = %session.id, error = %e);
            }
        });
    }
}
