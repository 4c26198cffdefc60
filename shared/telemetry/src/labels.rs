//! The label set of a metric family whose label names are fixed and whose values come from closed sets (a reason,
//! a result, an operation): both services' families that need no label type of their own.

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};

/// Label names with their values, encoded in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FixedLabels(pub Vec<(&'static str, Arc<str>)>);

impl EncodeLabelSet for FixedLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        for (name, value) in &self.0 {
            (*name, &**value).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}
