//! The model catalog: limits, capabilities and prices, bundled with the binary and extended or overridden from config.
//!
//! Prices are kept as integer nano-USD per million tokens, so a step's cost is one exact integer division, rounded
//! once (docs/architecture.md "Usage and cost").

use std::collections::BTreeMap;

use llm_proto::gateway as pb;
use serde::Deserialize;

use crate::event::Usage;
use crate::protocol::Protocol;

#[path = "catalog_kind.rs"]
mod kind;
pub use kind::{EmbeddingEntry, ModelKind, TokenizerName, Uses};

/// The catalog bundled with the gateway.
pub const BUNDLED: &str = include_str!("../catalog.toml");

/// One model the gateway can serve.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// `provider/model`, the id callers use.
    pub id: String,
    /// Provider id (the part before the first `/`).
    pub provider: String,
    /// The model's name on the provider's API (the part after the first `/`).
    pub name: String,
    /// Human-readable name.
    pub display_name: String,
    /// Wire protocol, from the provider.
    pub protocol: Protocol,
    /// Context window in tokens (input + output).
    pub context_window: u64,
    /// Maximum input tokens (0 = the context window).
    pub max_input_tokens: u64,
    /// Maximum output tokens; also the default `max_tokens` where a provider requires one.
    pub max_output_tokens: u64,
    /// What the model accepts.
    pub capabilities: Capabilities,
    /// Prices, when known.
    pub pricing: Option<Pricing>,
}

/// What a model accepts; adapters drop what it rejects.
#[cfg(test)]
impl ModelInfo {
    /// A model of provider `p` named `name` on `protocol`, with 100k context, 8k output, no capabilities and no
    /// price: what decoder and adapter tests need.
    pub(crate) fn for_tests(name: &str, protocol: Protocol) -> ModelInfo {
        ModelInfo {
            id: format!("p/{name}"),
            provider: "p".into(),
            name: name.into(),
            display_name: name.into(),
            protocol,
            context_window: 100_000,
            max_input_tokens: 0,
            max_output_tokens: 8192,
            capabilities: Capabilities::default(),
            pricing: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct Capabilities {
    /// Accepts tools.
    pub tools: bool,
    /// Reasoning model: on OpenAI Chat it takes `developer` instead of `system`, `max_completion_tokens` instead of
    /// `max_tokens`, and no sampling parameters.
    pub reasoning: bool,
    /// Accepts images.
    pub vision: bool,
    /// Supports JSON Schema output. On the Anthropic protocols it marks the models with structured outputs, which
    /// the adapter uses for JSON Schema output and strict tools and refuses both without.
    pub json_schema: bool,
    /// Accepts `temperature`.
    pub temperature: bool,
    /// Supports prompt-cache markers or automatic caching.
    pub prompt_cache: bool,
    /// Rejects `temperature` and `top_p` together (recent Claude models): `top_p` is dropped when both are set.
    pub exclusive_temperature_top_p: bool,
    /// The tool-call id rule of the server behind an OpenAI Chat model (other protocols have one rule each and
    /// ignore this).
    pub tool_call_ids: ToolCallIds,
    /// OpenAI Chat and Responses: send tools and JSON Schema output with `strict: true`, their schemas lowered to
    /// what strict mode accepts (see `adapter::common::strict`). Off by default because strict mode changes what the model
    /// may answer (every property present, `null` for the ones the caller left optional).
    pub strict_schemas: bool,
    /// How an OpenAI Chat server wants earlier reasoning back on assistant turns.
    pub reasoning_replay: ReasoningReplay,
    /// Bedrock: the model takes tools on the streaming `ConverseStream` API (AWS's "streaming tool use"). Off for
    /// the models that use tools only through the non-streaming `Converse` (Llama, Mistral): their requests with
    /// tools go there, and the whole answer is decoded into the same events at once.
    pub streaming_tool_use: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            tools: true,
            reasoning: false,
            vision: false,
            json_schema: false,
            temperature: true,
            prompt_cache: false,
            exclusive_temperature_top_p: false,
            tool_call_ids: ToolCallIds::Standard,
            strict_schemas: false,
            reasoning_replay: ReasoningReplay::None,
            streaming_tool_use: true,
        }
    }
}

/// Which tool-call id rule an OpenAI-compatible server enforces (docs/providers.md §6.2). Ids are rewritten
/// deterministically to it, on the calls and on the results that answer them, so they stay paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "snake_case")]
pub enum ToolCallIds {
    /// The protocol's own rule (OpenAI Chat: at most 40 characters).
    #[default]
    Standard,
    /// Mistral: exactly 9 characters of `[a-zA-Z0-9]`.
    Mistral,
}

/// Where an OpenAI Chat server reads replayed reasoning (docs/providers.md §6.3). Reasoning is replayed only to
/// the model that produced it; from any other model it is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "snake_case")]
pub enum ReasoningReplay {
    /// Never sent back: OpenAI, DeepSeek R1 (which rejects it) and servers that ignore it.
    #[default]
    None,
    /// `reasoning_content` on **every** assistant turn, `""` when the turn has no reasoning of this model: DeepSeek
    /// V4 in thinking mode rejects an assistant turn without the field; older vLLM.
    ReasoningContent,
    /// `reasoning` on assistant turns that have reasoning of this model: newer vLLM, OpenRouter.
    Reasoning,
}

/// Prices in nano-USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prices {
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
}

/// A model's prices: a base and optional higher tiers by prompt size.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pricing {
    /// Prices when no tier applies.
    pub base: Prices,
    /// `(above_input_tokens, prices)`, ascending by threshold.
    pub tiers: Vec<(u64, Prices)>,
}

impl Pricing {
    /// The prices that apply to a step with this usage: the highest tier whose threshold the prompt exceeds.
    pub fn prices_for(&self, usage: &Usage) -> Prices {
        let prompt = usage.prompt_total();
        self.tiers
            .iter()
            .rev()
            .find(|(above, _)| prompt > *above)
            .map(|(_, p)| *p)
            .unwrap_or(self.base)
    }

    /// Exact cost of a step in nano-USD, rounded once (half up). Reasoning is billed at the output price.
    pub fn cost_nano_usd(&self, usage: &Usage) -> i64 {
        let p = self.prices_for(usage);
        let term = |tokens: u64, price: i64| i128::from(tokens) * i128::from(price);
        let numerator = term(usage.input, p.input)
            + term(usage.output + usage.reasoning, p.output)
            + term(usage.cache_read, p.cache_read)
            + term(usage.cache_write, p.cache_write);
        let rounded = (numerator + 500_000).div_euclid(1_000_000);
        i64::try_from(rounded).unwrap_or(i64::MAX)
    }
}

/// USD per million tokens → nano-USD per million tokens, rounded to the nearest nano-dollar.
pub fn usd_to_nano(usd: f64) -> i64 {
    (usd * 1e9).round() as i64
}

/// Catalog file format (`catalog.toml`, and `[models]` in the gateway config).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// Models by id (`provider/model`).
    #[serde(default)]
    pub models: BTreeMap<String, ModelEntry>,
}

/// One model in a catalog file. Every field is optional so config entries can override single values.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub display_name: Option<String>,
    /// Wire protocol when it differs from the provider's (e.g. an OpenAI model served over the Responses API).
    pub protocol: Option<Protocol>,
    pub context_window: Option<u64>,
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub capabilities: Option<CapabilitiesEntry>,
    pub pricing: Option<PricingEntry>,
    /// Models (`provider/model`) tried in order when this one fails before any output reached the caller (see
    /// `generate`). A request's own `fallback_models` replace these. Only the requested model's fallbacks count:
    /// fallbacks of fallbacks are not followed.
    pub fallbacks: Option<Vec<String>>,
    /// Sampling parameters used when the caller left them unset, before any hook runs (see [`SamplingDefaults`]).
    pub defaults: Option<SamplingDefaults>,
    /// What the model is for: `chat` (the default) or `embedding` ([`ModelKind`]).
    pub kind: Option<ModelKind>,
    /// The tokenizer token counts use when the provider has no counting endpoint ([`TokenizerName`]).
    pub tokenizer: Option<TokenizerName>,
    /// An embedding model's batching ([`EmbeddingEntry`]).
    pub embedding: Option<EmbeddingEntry>,
}

/// A model's sampling defaults (`defaults = { temperature = 0.7, max_output_tokens = 8192 }` on a catalog entry).
///
/// Applied by the gateway core to the caller's request where a parameter is unset, *before* the hooks run, so a
/// hook's `params.set` still overrides them and hook services see the request as the model will get it. Adapters
/// then drop what the model rejects, exactly as for a caller's values.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SamplingDefaults {
    /// 0 to 2.
    pub temperature: Option<f64>,
    /// 0 to 1.
    pub top_p: Option<f64>,
    /// Positive.
    pub top_k: Option<u32>,
    /// Positive, at most the model's `max_output_tokens`.
    pub max_output_tokens: Option<u32>,
}

impl SamplingDefaults {
    /// True when no default is set.
    pub fn is_empty(&self) -> bool {
        *self == SamplingDefaults::default()
    }

    /// Fills what `g` leaves unset with these defaults; a value the caller set, even to the provider's own default,
    /// is kept.
    pub fn apply(&self, g: &mut pb::Generation) {
        if self.is_empty() {
            return;
        }
        let s = g.sampling.get_or_insert_with(Default::default);
        s.temperature = s.temperature.or(self.temperature);
        s.top_p = s.top_p.or(self.top_p);
        s.top_k = s.top_k.or(self.top_k);
        s.max_output_tokens = s.max_output_tokens.or(self.max_output_tokens);
    }

    /// Later layers replace single fields of earlier ones.
    fn merge(self, over: SamplingDefaults) -> SamplingDefaults {
        SamplingDefaults {
            temperature: over.temperature.or(self.temperature),
            top_p: over.top_p.or(self.top_p),
            top_k: over.top_k.or(self.top_k),
            max_output_tokens: over.max_output_tokens.or(self.max_output_tokens),
        }
    }

    /// Range checks, naming the field (`defaults.top_p`).
    fn check(&self, max_output_tokens: u64) -> Result<(), (&'static str, String)> {
        if self.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
            return Err(("defaults.temperature", "must be between 0 and 2".into()));
        }
        if self.top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return Err(("defaults.top_p", "must be between 0 and 1".into()));
        }
        if self.top_k == Some(0) {
            return Err(("defaults.top_k", "must be positive".into()));
        }
        match self.max_output_tokens {
            Some(0) => Err(("defaults.max_output_tokens", "must be positive".into())),
            Some(n) if u64::from(n) > max_output_tokens => Err((
                "defaults.max_output_tokens",
                format!("must not exceed the model's max_output_tokens ({max_output_tokens})"),
            )),
            _ => Ok(()),
        }
    }
}

/// Most fallback models one model (or one request) may name: each is a full provider round trip before the caller
/// sees anything, so a long chain only delays the error.
pub const MAX_FALLBACKS: usize = 4;

/// Capabilities in a catalog file; unset fields keep their previous (or default) value.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesEntry {
    pub tools: Option<bool>,
    pub reasoning: Option<bool>,
    pub vision: Option<bool>,
    pub json_schema: Option<bool>,
    pub temperature: Option<bool>,
    pub prompt_cache: Option<bool>,
    pub exclusive_temperature_top_p: Option<bool>,
    /// `"standard"` or `"mistral"`; see [`Capabilities::tool_call_ids`].
    pub tool_call_ids: Option<ToolCallIds>,
    /// See [`Capabilities::strict_schemas`].
    pub strict_schemas: Option<bool>,
    /// `"none"`, `"reasoning_content"` or `"reasoning"`; see [`Capabilities::reasoning_replay`].
    pub reasoning_replay: Option<ReasoningReplay>,
    /// See [`Capabilities::streaming_tool_use`].
    pub streaming_tool_use: Option<bool>,
}

/// Prices in a catalog file, USD per million tokens.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PricingEntry {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
    #[serde(default)]
    pub tiers: Vec<TierEntry>,
}

/// A price tier in a catalog file.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TierEntry {
    pub above_input_tokens: u64,
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl PricingEntry {
    fn to_pricing(&self) -> Pricing {
        let prices = |input: f64, output: f64, cr: Option<f64>, cw: Option<f64>| Prices {
            input: usd_to_nano(input),
            output: usd_to_nano(output),
            // A provider that does not price cache reads separately bills them as input.
            cache_read: usd_to_nano(cr.unwrap_or(input)),
            cache_write: usd_to_nano(cw.unwrap_or(input)),
        };
        let mut tiers: Vec<(u64, Prices)> = self
            .tiers
            .iter()
            .map(|t| {
                (
                    t.above_input_tokens,
                    prices(t.input, t.output, t.cache_read, t.cache_write),
                )
            })
            .collect();
        tiers.sort_by_key(|(above, _)| *above);
        Pricing {
            base: prices(self.input, self.output, self.cache_read, self.cache_write),
            tiers,
        }
    }
}

/// A catalog error, naming the model and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("models.\"{model}\".{field}: {message}")]
pub struct CatalogError {
    pub model: String,
    pub field: String,
    pub message: String,
}

/// The layers' entries merged field by field, later layers over earlier ones.
fn merge_layers(layers: &[&CatalogFile]) -> BTreeMap<String, ModelEntry> {
    let mut merged: BTreeMap<String, ModelEntry> = BTreeMap::new();
    for layer in layers {
        for (id, entry) in &layer.models {
            merge_entry(merged.entry(id.clone()).or_default(), entry);
        }
    }
    merged
}

/// Records a bundled model left out because its provider is not configured, by id and by provider-side name.
fn note_unconfigured(
    unconfigured: &mut BTreeMap<String, Vec<String>>,
    id: &str,
    provider: &str,
    name: &str,
) {
    unconfigured.insert(id.to_string(), vec![provider.to_string()]);
    let by_name = unconfigured.entry(name.to_string()).or_default();
    if !by_name.iter().any(|p| p == provider) {
        by_name.push(provider.to_string());
    }
}

/// The resolved catalog: every model the gateway serves, by id.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    models: BTreeMap<String, ModelInfo>,
    /// Configured fallbacks by model id. Kept beside [`ModelInfo`] rather than in it: adapters build `ModelInfo`
    /// literals in their tests, and fallbacks are the core's business, not theirs.
    fallbacks: BTreeMap<String, Vec<String>>,
    /// The ids of the models with each provider-side name (`gpt-4o` → `openai/gpt-4o`, `azure/gpt-4o`), so a bare
    /// name resolves without a scan.
    names: BTreeMap<String, Vec<String>>,
    /// Sampling defaults by model id, beside [`ModelInfo`] for the same reason: the core applies them before the
    /// adapter ever sees the request.
    defaults: BTreeMap<String, SamplingDefaults>,
    /// What each model is for and the facts only embeddings and token counts read ([`Uses`]), for the models
    /// that have any; beside [`ModelInfo`] for the same reason.
    uses: BTreeMap<String, Uses>,
    /// Provider by catalog id and by provider-side name, for the bundled models left out because their provider is
    /// not configured: an unknown-model error then says what would enable the model.
    unconfigured: BTreeMap<String, Vec<String>>,
}

impl Catalog {
    /// Builds the catalog from layered entries (bundled first, config overrides after) for the configured providers.
    /// Models whose provider is not configured are left out.
    pub fn build(
        layers: &[&CatalogFile],
        providers: &BTreeMap<String, Protocol>,
    ) -> Result<Catalog, CatalogError> {
        let mut models = BTreeMap::new();
        let mut fallbacks = BTreeMap::new();
        let mut defaults = BTreeMap::new();
        let mut uses = BTreeMap::new();
        let mut unconfigured = BTreeMap::new();
        for (id, entry) in merge_layers(layers) {
            let Some((provider, name)) = id.split_once('/') else {
                return Err(CatalogError {
                    model: id.clone(),
                    field: "id".into(),
                    message: "model ids are `provider/model`".into(),
                });
            };
            let Some(protocol) = providers.get(provider) else {
                note_unconfigured(&mut unconfigured, &id, provider, name);
                continue;
            };
            let err = |field: &str, message: &str| CatalogError {
                model: id.clone(),
                field: field.into(),
                message: message.into(),
            };
            let context_window = entry
                .context_window
                .ok_or_else(|| err("context_window", "required"))?;
            let max_output_tokens = kind::register(&id, &entry, &mut uses)?;
            if context_window == 0 || max_output_tokens == 0 {
                return Err(err("context_window", "limits must be positive"));
            }
            if let Some(p) = &entry.pricing {
                let all = [Some(p.input), Some(p.output), p.cache_read, p.cache_write];
                if all.iter().flatten().any(|v| !v.is_finite() || *v < 0.0) {
                    return Err(err("pricing", "prices must be finite and not negative"));
                }
            }
            if let Some(list) = entry.fallbacks.as_ref().filter(|l| !l.is_empty()) {
                check_fallback_list(&id, list)?;
                fallbacks.insert(id.clone(), list.clone());
            }
            if let Some(d) = entry.defaults.filter(|d| !d.is_empty()) {
                d.check(max_output_tokens)
                    .map_err(|(field, message)| err(field, &message))?;
                defaults.insert(id.clone(), d);
            }
            models.insert(
                id.clone(),
                ModelInfo {
                    display_name: entry
                        .display_name
                        .clone()
                        .unwrap_or_else(|| name.to_string()),
                    provider: provider.to_string(),
                    name: name.to_string(),
                    protocol: entry.protocol.unwrap_or(*protocol),
                    context_window,
                    max_input_tokens: entry.max_input_tokens.unwrap_or(0),
                    max_output_tokens,
                    capabilities: apply_capabilities(Capabilities::default(), entry.capabilities),
                    pricing: entry.pricing.as_ref().map(PricingEntry::to_pricing),
                    id,
                },
            );
        }
        Ok(Catalog {
            names: name_index(&models),
            models,
            fallbacks,
            defaults,
            uses,
            unconfigured,
        })
    }

    /// The providers of a bundled model this gateway does not serve because they are not configured, by catalog id
    /// or provider-side name (`openai/gpt-4o-mini` → `openai`; `gpt-4o-mini` → `azure`, `openai`); empty otherwise.
    pub fn unconfigured_providers(&self, requested: &str) -> &[String] {
        self.unconfigured.get(requested).map_or(&[], Vec::as_slice)
    }

    /// The sampling defaults of model `id`, when its catalog entry sets any.
    pub fn defaults(&self, id: &str) -> Option<&SamplingDefaults> {
        self.defaults.get(id)
    }

    /// The configured fallbacks of model `id`, in order (empty when it has none).
    pub fn fallbacks(&self, id: &str) -> &[String] {
        self.fallbacks
            .get(id)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Checks that every configured fallback names a model `serves` accepts (the catalog, or a provider that allows
    /// unlisted models), so a typo fails at start-up rather than on the day the primary model is down.
    pub fn check_fallbacks(&self, serves: impl Fn(&str) -> bool) -> Result<(), CatalogError> {
        for (id, list) in &self.fallbacks {
            for (i, fallback) in list.iter().enumerate() {
                let wrong = if !serves(fallback) {
                    "is not a model this gateway serves"
                } else if self.kind(fallback) == ModelKind::Embedding {
                    "is an embedding model, not a chat model"
                } else {
                    continue;
                };
                return Err(CatalogError {
                    model: id.clone(),
                    field: format!("fallbacks[{i}]"),
                    message: format!("`{fallback}` {wrong}"),
                });
            }
        }
        Ok(())
    }

    /// The model with this id.
    pub fn get(&self, id: &str) -> Option<&ModelInfo> {
        self.models.get(id)
    }

    /// Adds a model outside the catalog (providers with `allow_unlisted_models`).
    pub fn insert(&mut self, model: ModelInfo) {
        let ids = self.names.entry(model.name.clone()).or_default();
        if !ids.contains(&model.id) {
            ids.push(model.id.clone());
        }
        self.models.insert(model.id.clone(), model);
    }

    /// The ids of the models whose provider-side name is `name`, in id order.
    pub fn named(&self, name: &str) -> &[String] {
        self.names.get(name).map(Vec::as_slice).unwrap_or_default()
    }

    /// Every model, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &ModelInfo> {
        self.models.values()
    }

    /// Up to three ids close to `id` (as a full id or as a provider-side name), for `NOT_FOUND` messages.
    pub fn close_matches(&self, id: &str) -> Vec<&str> {
        let needle = id.to_ascii_lowercase();
        // Against the provider-side name too: a bare name with a typo is far from every full id.
        let mut scored: Vec<(usize, &str)> = self
            .models
            .values()
            .map(|m| {
                let full = edit_distance(&needle, &m.id.to_ascii_lowercase());
                let bare = edit_distance(&needle, &m.name.to_ascii_lowercase());
                (full.min(bare), m.id.as_str())
            })
            .collect();
        scored.sort();
        let limit = needle.len().max(4) / 2;
        scored
            .into_iter()
            .filter(|(d, _)| *d <= limit)
            .take(3)
            .map(|(_, k)| k)
            .collect()
    }
}

/// The ids of the models with each provider-side name.
fn name_index(models: &BTreeMap<String, ModelInfo>) -> BTreeMap<String, Vec<String>> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in models.values() {
        names.entry(m.name.clone()).or_default().push(m.id.clone());
    }
    names
}

/// The entry `id` has once `layers` are merged in order (later layers override single fields), or `None` when no
/// layer has it.
pub fn merged_entry(layers: &[&CatalogFile], id: &str) -> Option<ModelEntry> {
    let mut found: Option<ModelEntry> = None;
    for layer in layers {
        if let Some(e) = layer.models.get(id) {
            merge_entry(found.get_or_insert_with(ModelEntry::default), e);
        }
    }
    found
}

fn merge_entry(slot: &mut ModelEntry, e: &ModelEntry) {
    if e.display_name.is_some() {
        slot.display_name.clone_from(&e.display_name);
    }
    slot.protocol = e.protocol.or(slot.protocol);
    slot.context_window = e.context_window.or(slot.context_window);
    slot.max_input_tokens = e.max_input_tokens.or(slot.max_input_tokens);
    slot.max_output_tokens = e.max_output_tokens.or(slot.max_output_tokens);
    if let Some(c) = e.capabilities {
        let base = slot.capabilities.unwrap_or_default();
        slot.capabilities = Some(CapabilitiesEntry {
            tools: c.tools.or(base.tools),
            reasoning: c.reasoning.or(base.reasoning),
            vision: c.vision.or(base.vision),
            json_schema: c.json_schema.or(base.json_schema),
            temperature: c.temperature.or(base.temperature),
            prompt_cache: c.prompt_cache.or(base.prompt_cache),
            exclusive_temperature_top_p: c
                .exclusive_temperature_top_p
                .or(base.exclusive_temperature_top_p),
            tool_call_ids: c.tool_call_ids.or(base.tool_call_ids),
            strict_schemas: c.strict_schemas.or(base.strict_schemas),
            reasoning_replay: c.reasoning_replay.or(base.reasoning_replay),
            streaming_tool_use: c.streaming_tool_use.or(base.streaming_tool_use),
        });
    }
    if let Some(d) = e.defaults {
        slot.defaults = Some(slot.defaults.unwrap_or_default().merge(d));
    }
    if e.pricing.is_some() {
        slot.pricing.clone_from(&e.pricing);
    }
    if e.fallbacks.is_some() {
        slot.fallbacks.clone_from(&e.fallbacks);
    }
    kind::merge(slot, e);
}

/// Shape checks of one model's fallback list: `provider/model` ids, not the model itself, no repeats, bounded.
fn check_fallback_list(id: &str, list: &[String]) -> Result<(), CatalogError> {
    let err = |field: String, message: &str| CatalogError {
        model: id.to_string(),
        field,
        message: message.into(),
    };
    if list.len() > MAX_FALLBACKS {
        return Err(err(
            "fallbacks".into(),
            &format!("at most {MAX_FALLBACKS} fallback models"),
        ));
    }
    for (i, f) in list.iter().enumerate() {
        let field = format!("fallbacks[{i}]");
        match f.split_once('/') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() => {}
            _ => return Err(err(field, "must be `provider/model`")),
        }
        if f == id {
            return Err(err(field, "a model cannot be its own fallback"));
        }
        if list[..i].contains(f) {
            return Err(err(field, "listed twice"));
        }
    }
    Ok(())
}

fn apply_capabilities(mut c: Capabilities, e: Option<CapabilitiesEntry>) -> Capabilities {
    let Some(e) = e else { return c };
    c.tools = e.tools.unwrap_or(c.tools);
    c.reasoning = e.reasoning.unwrap_or(c.reasoning);
    c.vision = e.vision.unwrap_or(c.vision);
    c.json_schema = e.json_schema.unwrap_or(c.json_schema);
    c.temperature = e.temperature.unwrap_or(c.temperature);
    c.prompt_cache = e.prompt_cache.unwrap_or(c.prompt_cache);
    c.exclusive_temperature_top_p = e
        .exclusive_temperature_top_p
        .unwrap_or(c.exclusive_temperature_top_p);
    c.tool_call_ids = e.tool_call_ids.unwrap_or(c.tool_call_ids);
    c.strict_schemas = e.strict_schemas.unwrap_or(c.strict_schemas);
    c.reasoning_replay = e.reasoning_replay.unwrap_or(c.reasoning_replay);
    c.streaming_tool_use = e.streaming_tool_use.unwrap_or(c.streaming_tool_use);
    c
}

/// Levenshtein distance, for close-match suggestions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
