//! Anthropic Messages adapter (stub, being written).
use super::*;
/// Anthropic Messages.
pub struct Anthropic;
impl Adapter for Anthropic {
    fn protocol(&self) -> Protocol {
        Protocol::Anthropic
    }
    fn build(&self, _g: &pb::Generation, _t: &Target<'_>) -> Result<HttpRequest, BuildError> {
        Err(BuildError::new("model", "not yet"))
    }
    fn auth_headers(&self, _k: &str) -> Vec<(&'static str, String)> {
        vec![]
    }
    fn decoder(&self, _t: &Target<'_>) -> Box<dyn Decoder> {
        todo!()
    }
}
