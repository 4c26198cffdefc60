//! `generationConfig` (sampling, JSON output, thinking budgets per model family) and provider options merged into the
//! body.

use super::request_wire::{GenerationConfig, ThinkingConfig};
use super::schema;
use crate::adapter::common::features::{self, Output};
use crate::adapter::{BuildError, Protocol, common::options, pb};
use crate::catalog::ModelInfo;
use serde_json::{Map, Value};

/// Body keys the gateway builds itself, in both spellings Gemini's JSON parser accepts; `provider_options_json`
/// cannot set them, or a caller could smuggle in tools or a conversation the gateway never validated.
pub(super) const RESERVED: [&str; 7] = [
    "contents",
    "systemInstruction",
    "system_instruction",
    "tools",
    "toolConfig",
    "tool_config",
    "model",
];

/// Most stop sequences Gemini accepts.
pub(super) const MAX_STOP_SEQUENCES: usize = 5;

/// Thinking budgets for an effort without an explicit budget, before clamping to the model family's range. Xhigh,
/// which Gemini has no level for, asks for the largest budget any family takes, so each gets its highest.
pub(super) const EFFORT_BUDGETS: [(pb::reasoning::Effort, u32); 5] = [
    (pb::reasoning::Effort::Minimal, 512),
    (pb::reasoning::Effort::Low, 1024),
    (pb::reasoning::Effort::Medium, 8192),
    (pb::reasoning::Effort::High, 24_576),
    (pb::reasoning::Effort::Xhigh, 32_768),
];

/// Model families whose request rules differ, told apart by the model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    /// Gemini 3: `thinkingLevel`, mandatory thought signatures on function calls, JSON output with tools.
    Gemini3,
    /// Gemini 2.5 Pro: thinking budget 128..=32768, cannot be turned off.
    Pro25,
    /// Gemini 2.5 Flash: thinking budget 0..=24576 (0 turns it off).
    Flash25,
    /// Gemini 2.5 Flash-Lite: thinking budget 512..=24576, or 0 (off, its default).
    FlashLite25,
    /// Anything else (Gemini 2.0, unlisted models): no family-specific rule is applied.
    Other,
}

impl Family {
    /// The family of a Gemini model name such as `gemini-2.5-flash-lite-preview-06-17`.
    pub(super) fn of(name: &str) -> Family {
        if name.starts_with("gemini-3") {
            Family::Gemini3
        } else if name.starts_with("gemini-2.5-pro") {
            Family::Pro25
        } else if name.starts_with("gemini-2.5-flash-lite") {
            Family::FlashLite25
        } else if name.starts_with("gemini-2.5-flash") {
            Family::Flash25
        } else {
            Family::Other
        }
    }

    /// The smallest thinking budget while thinking (0 when unknown).
    pub(super) fn min_budget(self) -> u32 {
        self.budget_range().map_or(0, |(min, _, _)| min)
    }

    /// `(smallest budget while thinking, largest budget, whether 0 turns thinking off)`, or `None` when unknown.
    fn budget_range(self) -> Option<(u32, u32, bool)> {
        match self {
            Family::Pro25 => Some((128, 32_768, false)),
            Family::Flash25 => Some((1, 24_576, true)),
            Family::FlashLite25 => Some((512, 24_576, true)),
            Family::Gemini3 | Family::Other => None,
        }
    }
}

/// `generationConfig`: sampling, JSON output and thinking. Empty when the model's defaults apply throughout.
pub(super) fn generation_config<'a>(
    g: &'a pb::Generation,
    model: &ModelInfo,
    family: Family,
) -> Result<GenerationConfig<'a>, BuildError> {
    let mut c = GenerationConfig::default();
    if let Some(s) = &g.sampling {
        // Gemini's temperature range is 0..=2 like OpenAI's; clamp rather than fail a request others accept.
        c.temperature = s
            .temperature
            .filter(|t| t.is_finite() && model.capabilities.temperature)
            .map(|t| t.clamp(0.0, 2.0));
        c.top_p = s.top_p.filter(|p| p.is_finite()).map(|p| p.clamp(0.0, 1.0));
        c.top_k = s.top_k.filter(|&k| k > 0);
        // Never above the catalog's limit: Gemini refuses a larger value instead of capping it.
        c.max_output_tokens = s
            .max_output_tokens
            .filter(|&n| n > 0)
            .map(|max| u64::from(max).min(model.max_output_tokens.max(1)));
        let stops: Vec<&str> = s
            .stop_sequences
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect();
        if stops.len() > MAX_STOP_SEQUENCES {
            return Err(BuildError::new(
                "generation.sampling.stop_sequences",
                format!("Gemini accepts at most {MAX_STOP_SEQUENCES} stop sequences"),
            ));
        }
        c.stop_sequences = (!stops.is_empty()).then_some(stops);
        c.seed = s
            .seed
            .map(|seed| {
                i32::try_from(seed).map_err(|_| {
                    BuildError::new(
                        "generation.sampling.seed",
                        "Gemini's seed is a 32-bit integer",
                    )
                })
            })
            .transpose()?;
    }

    // JSON output: any JSON object (`application/json` alone), or JSON matching a schema, which Gemini always
    // constrains the output to (a caller's `strict` asks for nothing more).
    let output = features::output(g);
    if output != Output::Text {
        if !g.tools.is_empty() && family != Family::Gemini3 {
            return Err(BuildError::new(
                "generation.output_format",
                "Gemini before version 3 rejects function calling together with JSON output; ask for structured \
                 output through a forced tool instead",
            ));
        }
        c.response_mime_type = Some("application/json");
    }
    if let Output::JsonSchema(of) = output {
        const FIELD: &str = "generation.output_format.schema_json";
        let root: Value = serde_json::from_str(&of.schema_json)
            .map_err(|e| BuildError::new(FIELD, format!("not valid JSON: {e}")))?;
        c.response_schema = Some(schema::lower(&root, FIELD)?);
    }
    c.thinking_config = thinking_config(g, model, family);
    Ok(c)
}

/// `thinkingConfig` for reasoning models, `None` for the others (Gemini 2.0 rejects it).
///
/// Thought summaries are always asked for (`includeThoughts`), so reasoning streams to the caller. Gemini 2.5 takes
/// a token budget: the caller's, else one derived from the effort, clamped to the family's range; `EFFORT_NONE`
/// turns thinking off where the family allows it and uses the smallest budget where it does not (2.5 Pro). Gemini 3
/// takes `thinkingLevel` (`low` up to `EFFORT_LOW`, `high` above); a bare budget is passed on as `thinkingBudget`,
/// which Gemini 3 still accepts.
pub(super) fn thinking_config(
    g: &pb::Generation,
    model: &ModelInfo,
    family: Family,
) -> Option<ThinkingConfig> {
    use pb::reasoning::Effort;
    if !model.capabilities.reasoning {
        return None;
    }
    let (effort, budget) = g
        .reasoning
        .as_ref()
        .map_or((Effort::Unspecified, 0), |r| (r.effort(), r.budget_tokens));
    let mut c = ThinkingConfig::default();

    if family == Family::Gemini3 {
        c.include_thoughts = Some(true);
        match effort {
            Effort::None | Effort::Minimal | Effort::Low => c.thinking_level = Some("low"),
            Effort::Medium | Effort::High | Effort::Xhigh => c.thinking_level = Some("high"),
            Effort::Unspecified => c.thinking_budget = Some(budget).filter(|&b| b > 0),
        }
        return Some(c);
    }

    let range = family.budget_range();
    let wanted = match (effort, budget) {
        (Effort::None, _) => Some(0),
        (_, b) if b > 0 => Some(b),
        (Effort::Unspecified, _) => None,
        (e, _) => EFFORT_BUDGETS
            .iter()
            .find(|(k, _)| *k == e)
            .map(|(_, b)| *b),
    };
    let budget = match (wanted, range) {
        (Some(0), Some((min, _, false))) => Some(min),
        (Some(0), _) => Some(0),
        (Some(b), Some((min, max, _))) => Some(b.clamp(min, max)),
        (b, _) => b,
    };
    // Summaries of thoughts that will not happen are meaningless; some models refuse the pair.
    c.include_thoughts = (budget != Some(0)).then_some(true);
    c.thinking_budget = budget;
    Some(c)
}

/// Merges `provider_options_json["gemini"]` into the body (e.g. `safetySettings`, `cachedContent`,
/// `generationConfig.responseModalities`). Objects are merged key by key, so options inside `generationConfig` add
/// to the gateway's instead of replacing them; the caller's value wins on a conflict. The keys the gateway builds
/// are refused rather than silently ignored.
pub(super) fn merge_provider_options(
    body: &mut Map<String, Value>,
    json: &str,
) -> Result<(), BuildError> {
    let Some(options) = options::for_protocol(json, Protocol::Gemini, &RESERVED)? else {
        return Ok(());
    };
    merge_objects(body, options);
    Ok(())
}

pub(super) fn merge_objects(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::Object(mine)), Value::Object(theirs)) => merge_objects(mine, theirs),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}
