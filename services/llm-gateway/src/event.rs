//! Unified events (docs/architecture.md "Unified events"): what every language adapter's decoder produces, whatever the provider.
//!
//! The gateway core turns these into `llm.gateway.v1.StreamResponse` messages; `Finish` becomes `StepFinish` once the
//! cost has been computed from the catalog.

use crate::error::ProviderError;

/// One unified event decoded from a provider stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Text block `id` opened.
    TextStart { id: String },
    /// Text appended to block `id`.
    TextDelta { id: String, delta: String },
    /// Text block `id` closed.
    TextEnd { id: String },
    /// Reasoning block `id` opened.
    ReasoningStart { id: String },
    /// Reasoning text appended to block `id`.
    ReasoningDelta { id: String, delta: String },
    /// Reasoning block `id` closed; `metadata` is the JSON object the adapter needs back to replay it.
    ReasoningEnd {
        id: String,
        metadata: Option<String>,
    },
    /// The model began tool call `call_id`.
    ToolInputStart { call_id: String, tool: String },
    /// A fragment of the call's JSON arguments.
    ToolInputDelta { call_id: String, delta: String },
    /// The call's arguments are complete.
    ToolInputEnd { call_id: String },
    /// A complete tool call; `input_json` is `{}` when the model sent no arguments.
    ToolCall {
        call_id: String,
        tool: String,
        input_json: String,
        metadata: Option<String>,
    },
    /// The step finished. Always the last event of a successful stream.
    Finish(Finish),
    /// The stream failed. Always the last event of a failed stream.
    Error(ProviderError),
    /// The provider said it is still at work (a `ping`, an SSE comment); relayed once the generation started.
    KeepAlive,
}

impl Event {
    /// Ends tool call `call_id`: its `ToolInputEnd`, then the complete `ToolCall`. The arguments are passed through
    /// as streamed (a call cut short by the output limit is still reported, and the processor's argument validation
    /// tells the model what is wrong); none at all become `{}`.
    pub fn end_tool_call(call_id: String, tool: String, input: String, out: &mut Vec<Event>) {
        out.push(Event::ToolInputEnd {
            call_id: call_id.clone(),
        });
        let input_json = if input.trim().is_empty() {
            "{}".to_string()
        } else {
            input
        };
        out.push(Event::ToolCall {
            call_id,
            tool,
            input_json,
            metadata: None,
        });
    }
}

/// The end of a step, before cost is computed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Finish {
    /// Unified finish reason.
    pub reason: FinishReason,
    /// The provider's own string, kept for diagnosis.
    pub raw_reason: String,
    /// Normalised usage.
    pub usage: Usage,
    /// Provider response id.
    pub response_id: String,
    /// Model name the provider reported.
    pub response_model: String,
}

/// Unified finish reasons (docs/architecture.md "Unified events").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FinishReason {
    #[default]
    Unspecified,
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Error,
    Other,
}

/// Usage normalised so the five counts are disjoint and mean the same for every provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens neither read from nor written to the cache.
    pub input: u64,
    /// Prompt tokens read from the cache.
    pub cache_read: u64,
    /// Prompt tokens written to the cache.
    pub cache_write: u64,
    /// Visible output tokens, reasoning excluded.
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
}

impl Usage {
    /// The disjoint counts from totals that include their parts, as OpenAI's protocols report them: `prompt`
    /// includes the cache reads and writes, `completion` the reasoning. Subtracted saturating, so a server that
    /// counts them separately cannot make a count wrap around.
    pub fn from_inclusive(
        prompt: u64,
        cache_read: u64,
        cache_write: u64,
        completion: u64,
        reasoning: u64,
    ) -> Usage {
        Usage {
            input: prompt
                .saturating_sub(cache_read)
                .saturating_sub(cache_write),
            cache_read,
            cache_write,
            output: completion.saturating_sub(reasoning),
            reasoning,
        }
    }

    /// The sum of the five disjoint counts.
    pub fn total(&self) -> u64 {
        self.input + self.cache_read + self.cache_write + self.output + self.reasoning
    }

    /// Every prompt token, cached or not: what tiered prices and context checks look at.
    pub fn prompt_total(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}
