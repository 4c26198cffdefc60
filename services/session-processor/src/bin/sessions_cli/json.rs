//! `sessions --json`: every command prints JSON Lines instead of text for people, one API message per line in the
//! API's own JSON mapping (proto3 JSON, through the descriptor set): field names as in the `.proto` files
//! (`session_id`), every field present (defaults included, so `jq .cost_nano_usd` always finds one), enums by name
//! (`ROLE_USER`), 64-bit integers as JSON numbers, timestamps in RFC 3339.

use std::io::Write;

use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};

/// Prints API messages as JSON lines on stdout.
pub struct Printer {
    pool: DescriptorPool,
}

impl Printer {
    /// A printer over the API's descriptor set.
    pub fn new() -> Result<Printer, prost_reflect::DescriptorError> {
        Ok(Printer {
            pool: DescriptorPool::decode(llm_proto::FILE_DESCRIPTOR_SET)?,
        })
    }

    /// `message` (of the `llm.sessions.v1` type `name`) as one JSON line.
    pub fn line<M: prost::Message>(
        &self,
        name: &str,
        message: &M,
    ) -> Result<String, Box<dyn std::error::Error>> {
        let full = format!("llm.sessions.v1.{name}");
        let descriptor = self
            .pool
            .get_message_by_name(&full)
            .ok_or_else(|| format!("no message {full} in the descriptor set"))?;
        let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())?;
        let options = SerializeOptions::new()
            .use_proto_field_name(true)
            .skip_default_fields(false)
            .stringify_64_bit_integers(false);
        let mut out = serde_json::Serializer::new(Vec::new());
        dynamic.serialize_with_options(&mut out, &options)?;
        Ok(String::from_utf8(out.into_inner())?)
    }

    /// Prints `message` as one line on stdout.
    pub fn print<M: prost::Message>(
        &self,
        name: &str,
        message: &M,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let line = self.line(name, message)?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")?;
        Ok(())
    }
}
