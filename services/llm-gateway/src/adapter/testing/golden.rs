//! Golden request bodies: every request the adapter tests build, recorded once with its input and its exact bytes
//! (or the error it was refused with), and replayed by [`tests`] through today's builders, which must give the same
//! bytes. It is what keeps a rewrite of a builder (the typed wire structs) byte for byte faithful: field order,
//! number formatting, what is left out.
//!
//! Each builder calls [`record`] with what it built. It does nothing unless `GOLDEN_RECORD` names a directory; then
//! it appends one JSON line per build to `<dir>/<protocol>.jsonl`. Record with
//! `GOLDEN_RECORD=$PWD/services/llm-gateway/src/adapter/testing/testdata/golden cargo nextest run -p llm-gateway adapter::`,
//! then keep each file's lines sorted and unique (`sort -u -o f f`): the replay reads them in any order.

use std::io::Write;
use std::sync::Mutex;

use base64::Engine;
use prost::Message;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::adapter::{BuildError, Protocol, pb};
use crate::catalog::{Capabilities, ModelInfo};

/// One recorded build.
#[derive(Serialize, Deserialize)]
pub(super) struct Case {
    /// The test that built it (where to look when it no longer matches).
    pub(super) test: String,
    /// The builder's protocol.
    pub(super) protocol: Protocol,
    /// The catalog entry it built for (what the builders read of it).
    pub(super) model: Model,
    /// The generation, protobuf-encoded, in standard base64.
    pub(super) generation: String,
    /// The body's exact bytes as the transport sends them (`HttpRequest::encode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) body: Option<String>,
    /// The refusal, for a request the builder refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<(String, String)>,
}

/// What a builder reads of a [`ModelInfo`].
#[derive(Serialize, Deserialize)]
pub(super) struct Model {
    id: String,
    provider: String,
    name: String,
    protocol: Protocol,
    context_window: u64,
    max_input_tokens: u64,
    max_output_tokens: u64,
    capabilities: Capabilities,
}

impl Model {
    fn of(m: &ModelInfo) -> Model {
        Model {
            id: m.id.clone(),
            provider: m.provider.clone(),
            name: m.name.clone(),
            protocol: m.protocol,
            context_window: m.context_window,
            max_input_tokens: m.max_input_tokens,
            max_output_tokens: m.max_output_tokens,
            capabilities: m.capabilities,
        }
    }

    pub(super) fn info(&self) -> ModelInfo {
        ModelInfo {
            id: self.id.clone(),
            provider: self.provider.clone(),
            name: self.name.clone(),
            display_name: self.name.clone(),
            protocol: self.protocol,
            context_window: self.context_window,
            max_input_tokens: self.max_input_tokens,
            max_output_tokens: self.max_output_tokens,
            capabilities: self.capabilities,
            pricing: None,
        }
    }
}

/// Tests whose builds are not recorded: the replay itself, and the addressing tests, which send one request under
/// hundreds of (partly random) model names to check the path, not the body.
const UNRECORDED: [&str; 2] = ["adapter::testing::golden::", "adapter::addressing_tests::"];

/// Serialises the appends of the tests that run in one process.
static FILES: Mutex<()> = Mutex::new(());

/// [`record`] for a builder that makes the whole request.
pub(crate) fn record_request(
    protocol: Protocol,
    g: &pb::Generation,
    t: &crate::adapter::Target<'_>,
    built: &Result<crate::adapter::HttpRequest, BuildError>,
) {
    record(protocol, g, t.model, built.as_ref().map(|r| &r.body));
}

/// Records one build of `protocol`'s builder when `GOLDEN_RECORD` is set; otherwise does nothing.
pub(crate) fn record(
    protocol: Protocol,
    g: &pb::Generation,
    model: &ModelInfo,
    built: Result<&Value, &BuildError>,
) {
    let Some(dir) = std::env::var_os("GOLDEN_RECORD") else {
        return;
    };
    let test = std::thread::current().name().unwrap_or("").to_string();
    if UNRECORDED.iter().any(|t| test.starts_with(t)) {
        return;
    }
    let case = Case {
        test,
        protocol,
        model: Model::of(model),
        generation: base64::engine::general_purpose::STANDARD.encode(g.encode_to_vec()),
        body: built.ok().map(Value::to_string),
        error: built.err().map(|e| (e.field.clone(), e.message.clone())),
    };
    let path = std::path::Path::new(&dir).join(format!("{}.jsonl", protocol.as_str()));
    let line = format!(
        "{}\n",
        serde_json::to_string(&case).expect("a case serialises")
    );
    let _one_at_a_time = FILES.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.write_all(line.as_bytes())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[cfg(test)]
#[path = "golden_tests.rs"]
mod tests;
