//! What a catalog model is for (chat or embeddings), and the catalog facts only the calls other than generations
//! read: the tokenizer the gateway counts a model's tokens with, and how many inputs an embedding model's provider
//! takes per request (docs/gateway.md "Embeddings and token counting").
//!
//! Kept beside [`ModelInfo`](super::ModelInfo) rather than in it, like fallbacks and defaults: adapters build
//! `ModelInfo` literals in their tests, and none of this is theirs.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Catalog, CatalogError, ModelEntry};

/// What a model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// Generations: `Stream`, `Generate`, the chat endpoints, token counts.
    #[default]
    Chat,
    /// Embeddings only: `Embed` and `POST /v1/embeddings`.
    Embedding,
}

impl ModelKind {
    /// The name used in the catalog and in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Chat => "chat",
            ModelKind::Embedding => "embedding",
        }
    }
}

/// Model-name prefixes of the `o200k_base` models, checked before `cl100k_base`'s (`gpt-4o` before `gpt-4`), as
/// OpenAI's `tiktoken` maps them.
const O200K: [&str; 9] = [
    "gpt-5",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-4o",
    "chatgpt-4o",
    "o1",
    "o3",
    "o4",
    "codex-",
];
/// Model-name prefixes of the `cl100k_base` models.
const CL100K: [&str; 5] = [
    "gpt-4",
    "gpt-3.5",
    "gpt-35",
    "text-embedding-3",
    "text-embedding-ada-002",
];

/// A tokenizer the gateway carries (OpenAI's BPE encodings), named as OpenAI names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TokenizerName {
    /// GPT-4o, GPT-4.1, GPT-5 and the o-series.
    #[serde(rename = "o200k_base")]
    O200kBase,
    /// GPT-4, GPT-3.5 and the text-embedding models.
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
}

impl TokenizerName {
    /// The encoding's name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenizerName::O200kBase => "o200k_base",
            TokenizerName::Cl100kBase => "cl100k_base",
        }
    }

    /// The tokenizer OpenAI uses for a model named `name`, among those the gateway carries.
    pub fn of_model(name: &str) -> Option<TokenizerName> {
        // Fine-tuned models (`ft:gpt-4o-mini:org::id`) use their base model's tokenizer.
        let base = name
            .strip_prefix("ft:")
            .and_then(|rest| rest.split(':').next())
            .unwrap_or(name);
        if O200K.iter().any(|p| base.starts_with(p)) {
            Some(TokenizerName::O200kBase)
        } else if CL100K.iter().any(|p| base.starts_with(p)) {
            Some(TokenizerName::Cl100kBase)
        } else {
            None
        }
    }
}

/// `embedding = { … }` on an embedding model's entry.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingEntry {
    /// Inputs per provider request, when the model takes fewer than its protocol's maximum (Vertex AI's
    /// `gemini-embedding-001` takes one).
    pub max_inputs: Option<u32>,
}

/// The resolved facts of one model, for the models that have any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Uses {
    /// What the model is for.
    pub kind: ModelKind,
    /// The configured tokenizer, if any.
    pub tokenizer: Option<TokenizerName>,
    /// Inputs per provider request (embedding models), if configured.
    pub max_inputs: Option<u32>,
}

/// Checks `entry`'s facts and keeps them in `uses` when it has any; returns its output limit, which a chat model
/// must state and an embedding model (which outputs vectors, not tokens) has none of.
pub(super) fn register(
    id: &str,
    entry: &ModelEntry,
    uses: &mut BTreeMap<String, Uses>,
) -> Result<u64, CatalogError> {
    let used = uses_of(id, entry)?;
    let max_output_tokens = match entry.max_output_tokens {
        None if used.is_some_and(|u| u.kind == ModelKind::Embedding) => 1,
        found => found.ok_or_else(|| CatalogError {
            model: id.to_string(),
            field: "max_output_tokens".into(),
            message: "required".into(),
        })?,
    };
    if let Some(u) = used {
        uses.insert(id.to_string(), u);
    }
    Ok(max_output_tokens)
}

/// The facts of `entry`, checked; `None` when it has none to keep (a chat model without a tokenizer).
fn uses_of(id: &str, entry: &ModelEntry) -> Result<Option<Uses>, CatalogError> {
    let err = |field: &str, message: &str| CatalogError {
        model: id.to_string(),
        field: field.into(),
        message: message.into(),
    };
    let kind = entry.kind.unwrap_or_default();
    let max_inputs = entry.embedding.and_then(|e| e.max_inputs);
    if kind == ModelKind::Embedding {
        if entry.fallbacks.as_ref().is_some_and(|f| !f.is_empty()) {
            return Err(err(
                "fallbacks",
                "an embedding model has no fallbacks: vectors of two models cannot be compared",
            ));
        }
        if max_inputs == Some(0) {
            return Err(err("embedding.max_inputs", "must be positive"));
        }
    } else if entry.embedding.is_some() {
        return Err(err(
            "embedding",
            "only for models with kind = \"embedding\"",
        ));
    }
    let uses = Uses {
        kind,
        tokenizer: entry.tokenizer,
        max_inputs,
    };
    Ok((uses != Uses::default()).then_some(uses))
}

/// Layers `e` over `slot`, field by field.
pub(super) fn merge(slot: &mut ModelEntry, e: &ModelEntry) {
    slot.kind = e.kind.or(slot.kind);
    slot.tokenizer = e.tokenizer.or(slot.tokenizer);
    if let Some(over) = e.embedding {
        let base = slot.embedding.unwrap_or_default();
        slot.embedding = Some(EmbeddingEntry {
            max_inputs: over.max_inputs.or(base.max_inputs),
        });
    }
}

impl Catalog {
    /// What model `id` is for; `Chat` for a model the catalog does not have (an unlisted one).
    pub fn kind(&self, id: &str) -> ModelKind {
        self.uses.get(id).map(|u| u.kind).unwrap_or_default()
    }

    /// The facts of model `id` (defaults when it has none).
    pub fn uses(&self, id: &str) -> Uses {
        self.uses.get(id).copied().unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "catalog_kind_tests.rs"]
mod tests;
