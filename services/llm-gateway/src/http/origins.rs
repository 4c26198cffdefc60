//! Where each piece of the unified request came from in the HTTP body, so an error found after translation (by
//! validation, or by the adapter of the model's protocol) names the caller's own field (`messages[3].content`,
//! `max_tokens`) rather than the unified request's (`generation.messages[2].parts[0]`,
//! `generation.sampling.max_output_tokens`).

use llm_proto::gateway as pb;

/// Unified request fields and the body field each is in an endpoint's API, most specific first.
pub type FieldNames = &'static [(&'static str, &'static str)];

/// Chat Completions' names of the unified request's fields.
pub const CHAT: FieldNames = &[
    ("generation.model", "model"),
    (
        "generation.sampling.max_output_tokens",
        "max_completion_tokens",
    ),
    ("generation.sampling.temperature", "temperature"),
    ("generation.sampling.top_p", "top_p"),
    ("generation.sampling.stop_sequences", "stop"),
    ("generation.sampling.seed", "seed"),
    ("generation.output_format", "response_format"),
    (
        "generation.tool_choice.disable_parallel",
        "parallel_tool_calls",
    ),
    ("generation.tool_choice", "tool_choice"),
    ("generation.reasoning", "reasoning_effort"),
];

/// Responses' names of the unified request's fields.
pub const RESPONSES: FieldNames = &[
    ("generation.model", "model"),
    ("generation.sampling.max_output_tokens", "max_output_tokens"),
    ("generation.sampling.temperature", "temperature"),
    ("generation.sampling.top_p", "top_p"),
    ("generation.output_format", "text.format"),
    (
        "generation.tool_choice.disable_parallel",
        "parallel_tool_calls",
    ),
    ("generation.tool_choice", "tool_choice"),
    ("generation.reasoning", "reasoning"),
    ("generation.system", "instructions"),
];

/// Messages' names of the unified request's fields.
pub const MESSAGES: FieldNames = &[
    ("generation.model", "model"),
    ("generation.sampling.max_output_tokens", "max_tokens"),
    ("generation.sampling.temperature", "temperature"),
    ("generation.sampling.top_p", "top_p"),
    ("generation.sampling.top_k", "top_k"),
    ("generation.sampling.stop_sequences", "stop_sequences"),
    ("generation.output_format", "output_config.format"),
    (
        "generation.tool_choice.disable_parallel",
        "tool_choice.disable_parallel_tool_use",
    ),
    ("generation.tool_choice", "tool_choice"),
    ("generation.reasoning", "thinking"),
    ("generation.system", "system"),
];

/// The origins of one translated request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    names: FieldNames,
    /// Where a tool's schema is, below `tools[i]` (`.function.parameters`, `.input_schema`, `.parameters`).
    schema: &'static str,
    /// Runs of parts: (unified message, its first part of the run, the body field they came from).
    spans: Vec<(usize, usize, String)>,
    /// The body field of each system section.
    systems: Vec<String>,
}

/// Where the unified conversation stood before a body item was translated.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    messages: usize,
    last_parts: usize,
}

impl Origins {
    /// Origins for an endpoint naming fields `names`, its tools' schemas at `schema` below each tool.
    pub fn new(names: FieldNames, schema: &'static str) -> Origins {
        Origins {
            names,
            schema,
            spans: Vec::new(),
            systems: Vec::new(),
        }
    }

    /// Where `g`'s conversation stands now.
    pub fn mark(g: &pb::Generation) -> Mark {
        Mark {
            messages: g.messages.len(),
            last_parts: g.messages.last().map_or(0, |m| m.parts.len()),
        }
    }

    /// Notes that what `g`'s conversation gained since `mark` came from body field `path`: parts added to the last
    /// message there (tool results joining those before them), then every new message.
    pub fn note(&mut self, g: &pb::Generation, mark: Mark, path: &str) {
        if mark.messages > 0
            && let Some(m) = g.messages.get(mark.messages - 1)
            && m.parts.len() > mark.last_parts
        {
            self.spans
                .push((mark.messages - 1, mark.last_parts, path.to_string()));
        }
        for m in mark.messages..g.messages.len() {
            self.spans.push((m, 0, path.to_string()));
        }
    }

    /// Notes that the next system section came from body field `path`.
    pub fn note_system(&mut self, path: &str) {
        self.systems.push(path.to_string());
    }

    /// The body field of unified `field`, when it is one this request's translation knows.
    pub fn locate(&self, field: &str) -> Option<String> {
        if let Some(rest) = field.strip_prefix("generation.system[") {
            let (k, rest) = rest.split_once(']')?;
            let path = self.systems.get(k.parse::<usize>().ok()?)?;
            return Some(format!("{path}{rest}"));
        }
        if let Some(rest) = field.strip_prefix("generation.messages[") {
            return self.message(rest);
        }
        if let Some(rest) = field.strip_prefix("generation.tools[") {
            let (index, rest) = rest.split_once(']')?;
            let rest = match rest {
                ".input_schema_json" => self.schema,
                other => other,
            };
            return Some(format!("tools[{index}]{rest}"));
        }
        self.names
            .iter()
            .find(|(unified, _)| field.starts_with(unified))
            .map(|(unified, ours)| format!("{ours}{}", &field[unified.len()..]))
    }

    /// `rest` is what follows `generation.messages[`: `2].parts[0].text`, `2]`.
    fn message(&self, rest: &str) -> Option<String> {
        let (m, rest) = rest.split_once(']')?;
        let m: usize = m.parse().ok()?;
        let part = rest
            .strip_prefix(".parts[")
            .and_then(|r| r.split_once(']'))
            .and_then(|(p, _)| p.parse::<usize>().ok());
        let span = self
            .spans
            .iter()
            .rfind(|(msg, first, _)| *msg == m && part.is_none_or(|p| p >= *first))?;
        Some(match part {
            Some(_) => format!("{}.content", span.2),
            None => format!("{}{rest}", span.2),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "origins_tests.rs"]
mod tests;
