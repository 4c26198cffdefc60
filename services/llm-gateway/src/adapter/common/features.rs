//! What a generation asks of the provider besides the conversation itself, read once for every builder: the kind
//! of output (text, any JSON object, JSON matching a schema), strict tools, and at most one tool call per step.
//! Each builder writes these in its provider's shape or refuses them with the helpers here, so a protocol without
//! the feature names the same field in the same words (docs/gateway.md "Request features by provider").

use crate::adapter::{BuildError, pb};

/// The field a refused output kind is named by.
pub(crate) const OUTPUT_TYPE: &str = "generation.output_format.type";
/// The field a refused "one tool call per step" is named by.
pub(crate) const DISABLE_PARALLEL: &str = "generation.tool_choice.disable_parallel";

/// The output the generation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output<'a> {
    /// Text: no output format, or `TYPE_TEXT`.
    Text,
    /// Any JSON object, no schema (`TYPE_JSON_OBJECT`).
    JsonObject,
    /// JSON matching the format's schema (`TYPE_JSON_SCHEMA`).
    JsonSchema(&'a pb::OutputFormat),
}

/// The output `g` asks for.
pub(crate) fn output(g: &pb::Generation) -> Output<'_> {
    use pb::output_format::Type;
    match g.output_format.as_ref() {
        Some(f) if f.r#type() == Type::JsonObject => Output::JsonObject,
        Some(f) if f.r#type() == Type::JsonSchema => Output::JsonSchema(f),
        _ => Output::Text,
    }
}

/// Refuses JSON-object output on a protocol without a JSON mode (`provider` names it in the message).
pub(crate) fn refuse_json_object(g: &pb::Generation, provider: &str) -> Result<(), BuildError> {
    if output(g) == Output::JsonObject {
        return Err(BuildError::new(
            OUTPUT_TYPE,
            format!(
                "{provider} has no JSON mode (any JSON object without a schema); ask for TYPE_JSON_SCHEMA with a schema"
            ),
        ));
    }
    Ok(())
}

/// The field of tool `i`'s `strict`.
pub(crate) fn strict_field(i: usize) -> String {
    format!("generation.tools[{i}].strict")
}

/// The index of the first tool the caller marked strict.
pub(crate) fn first_strict_tool(g: &pb::Generation) -> Option<usize> {
    g.tools.iter().position(|t| t.strict)
}

/// Whether the caller asked for at most one tool call per step where the model could make several: the flag set,
/// tools offered, and a choice that lets the model call them (with NONE there is no call to limit).
pub(crate) fn one_call_per_step(g: &pb::Generation) -> bool {
    g.tool_choice
        .as_ref()
        .is_some_and(|c| c.disable_parallel && c.mode() != pb::tool_choice::Mode::None)
        && !g.tools.is_empty()
}

/// Refuses [`one_call_per_step`] on a protocol with no switch for it (`provider` names it in the message).
pub(crate) fn refuse_one_call_per_step(
    g: &pb::Generation,
    provider: &str,
) -> Result<(), BuildError> {
    if one_call_per_step(g) {
        return Err(BuildError::new(
            DISABLE_PARALLEL,
            format!(
                "{provider} has no switch to limit a step to one tool call; leave it unset and run the calls one \
                 at a time"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "features_tests.rs"]
mod tests;
