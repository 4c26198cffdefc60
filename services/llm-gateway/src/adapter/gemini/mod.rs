//! Google Gemini adapter (stub: being written).

use super::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target};
use crate::error::ProviderError;
use crate::event::Event;
use llm_proto::gateway as pb;

/// Google Gemini.
pub struct Gemini;

impl Adapter for Gemini {
    fn protocol(&self) -> Protocol {
        Protocol::Gemini
    }
    fn build(&self, _g: &pb::Generation, _t: &Target<'_>) -> Result<HttpRequest, BuildError> {
        Err(BuildError::new(
            "generation.model",
            "the gemini protocol is not implemented yet",
        ))
    }
    fn auth_headers(&self, _key: &str) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    fn decoder(&self, _t: &Target<'_>) -> Box<dyn Decoder> {
        Box::new(Unimplemented)
    }
}

struct Unimplemented;

impl Decoder for Unimplemented {
    fn frame(&mut self, _event: &str, _data: &str, out: &mut Vec<Event>) {
        out.push(Event::Error(ProviderError::malformed("not implemented")));
    }
    fn end(&mut self, out: &mut Vec<Event>) {
        out.push(Event::Error(ProviderError::malformed("not implemented")));
    }
    fn is_done(&self) -> bool {
        true
    }
}
