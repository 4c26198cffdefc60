//! `Embed` and `CountTokens`: the request checked and handed to [`crate::calls`], the answer mapped to the wire.

use llm_proto::gateway as pb;
use tonic::{Request, Response, Status};

use super::GatewayRpc;
use crate::calls::count::count_tokens;
use crate::calls::embed::{EmbedCall, embed};
use crate::offload::{self, CarriesGeneration, Incoming};

impl CarriesGeneration for pb::CountTokensRequest {
    fn into_generation(self) -> Option<pb::Generation> {
        self.generation
    }
}

impl GatewayRpc {
    /// `Embed`.
    pub(crate) async fn embed_request(
        &self,
        request: Request<pb::EmbedRequest>,
    ) -> Result<Response<pb::EmbedResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let caller = super::caller(&extensions)?;
        let done = embed(
            &self.gateway,
            &caller,
            EmbedCall::from_pb(message),
            &metadata,
        )
        .await
        .map_err(|e| e.status())?;
        let usage = crate::event::Usage {
            input: done.input_tokens,
            ..Default::default()
        };
        Ok(Response::new(pb::EmbedResponse {
            model: done.model,
            provider: done.provider,
            embeddings: done
                .vectors
                .into_iter()
                .map(|values| pb::Embedding { values })
                .collect(),
            usage: Some(crate::convert::usage(&usage)),
            cost: Some(pb::Cost {
                total_nano_usd: done.cost_nano_usd.unwrap_or(0),
                priced: done.cost_nano_usd.is_some(),
            }),
            usage_estimated: done.estimated,
            provider_requests: done.provider_requests,
        }))
    }

    /// `CountTokens`, from a request as the codec hands it over (decoded, or still encoded when large).
    pub(crate) async fn count_tokens_incoming(
        &self,
        request: Request<Incoming<pb::CountTokensRequest>>,
    ) -> Result<Response<pb::CountTokensResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let caller = super::caller(&extensions)?;
        let generation = offload::generation(message, &self.gateway.config().limits).await?;
        let counted = count_tokens(&self.gateway, &caller, generation, &metadata)
            .await
            .map_err(|e| e.status())?;
        Ok(Response::new(counted.to_pb()))
    }
}
