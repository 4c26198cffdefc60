//! Stream decoder: Responses `response.*` events → unified [`Event`]s (docs/providers.md §2 "Events").
//!
//! Each frame is parsed once into small borrowed structs rather than walked as `serde_json::Value`: a stream carries
//! hundreds of deltas and this runs for every one. The event is identified by `data.type`; the `event:` line only
//! stands in when `data` has no `type`.
//!
//! Ids: a text block is its message item's id (`msg_…`) and a reasoning block its reasoning item's id (`rs_…`). A
//! reasoning item may stream several summary parts (`summary_index` 0, 1, …); they stay **one** reasoning block,
//! with the parts joined by a blank line (`"\n\n"`, sent at the start of the first delta of each later part), so
//! the block maps one-to-one onto the item that is replayed on the next step. Tool calls are reported under the
//! item's `call_id`; argument deltas, which only name the item id, are mapped back to it.

use std::borrow::Cow;

use super::ReasoningMetadata;
use crate::adapter::Decoder;
use crate::adapter::common::strict::StrictTools;
use crate::adapter::transport::classify::{classify, truncate};
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Finish, FinishReason, Usage};

use super::wire::*;

/// Longest part of a malformed frame kept in the error for diagnosis (a `response.completed` frame repeats the
/// whole response and can be large).
const MAX_ERROR_BODY: usize = 2048;

/// What separates two summary (or raw reasoning) parts inside one reasoning block.
const PART_SEPARATOR: &str = "\n\n";

/// Decoder state for one Responses stream.
///
/// Tool calls are finalized at their item's `output_item.done` (or at the terminal event for an item that never
/// got one), never because the argument buffer already parses as JSON (docs/providers.md §5).
#[derive(Debug, Default)]
pub struct ResponsesDecoder {
    done: bool,
    response_id: String,
    response_model: String,
    /// Output items started and not yet done, in order of appearance.
    items: Vec<Item>,
    /// A `function_call` item appeared, so a completed response finished with tool calls.
    saw_function_call: bool,
    /// The `call_id`s handed out: one used twice is refused, never passed on.
    call_ids: Vec<String>,
    /// The items done so far: an item's id is its block's, so anything more about one would reuse an ended id.
    done_items: Vec<String>,
    /// The tools the request sent in strict mode, whose final arguments lose the nulls strict mode added.
    strict: StrictTools,
}

/// One output item in progress.
#[derive(Debug)]
struct Item {
    /// The provider's item id.
    id: String,
    state: ItemState,
}

#[derive(Debug)]
enum ItemState {
    /// A `message`; its text block opens with the first non-empty text.
    Message { text_open: bool },
    /// A `reasoning` item; `ReasoningStart` was pushed when it was created.
    Reasoning {
        /// The part the last delta belonged to, to tell when a new part starts.
        part: Option<Part>,
        /// Some reasoning text was pushed.
        has_text: bool,
    },
    /// A `function_call`; `ToolInputStart` was pushed when it was created.
    Function {
        call_id: String,
        name: String,
        /// Every argument fragment so far.
        args: String,
        /// At least one non-empty argument fragment was pushed.
        streamed: bool,
    },
}

/// Which part of a reasoning item a delta belongs to: summary part `n` or raw reasoning content part `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Summary(u64),
    Raw(u64),
}

impl ResponsesDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder for a request that sent `strict` tools in strict mode (see [`StrictTools::clean`]).
    pub fn with_strict(strict: StrictTools) -> Self {
        ResponsesDecoder {
            strict,
            ..Self::default()
        }
    }

    fn fail(&mut self, err: ProviderError, out: &mut Vec<Event>) {
        self.done = true;
        out.push(Event::Error(err));
    }

    fn malformed(&mut self, what: String, data: &str, out: &mut Vec<Event>) {
        let mut err =
            ProviderError::malformed(format!("malformed OpenAI Responses stream: {what}"));
        err.provider_body = truncate(data, MAX_ERROR_BODY).to_string();
        self.fail(err, out);
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.items.iter().position(|i| i.id == id)
    }

    fn item_added(&mut self, item: WireItem<'_>, data: &str, out: &mut Vec<Event>) {
        let id = item.id.as_deref().unwrap_or_default().to_string();
        if self.position(&id).is_some() {
            // A repeated `added` for a live item carries nothing new; starting the block twice would confuse callers.
            return;
        }
        let (state, initial_args) = match item.kind.as_ref() {
            "message" => (ItemState::Message { text_open: false }, None),
            "reasoning" => {
                out.push(Event::ReasoningStart { id: id.clone() });
                let state = ItemState::Reasoning {
                    part: None,
                    has_text: false,
                };
                (state, None)
            }
            "function_call" => {
                let Some(state) = self.start_function(&item, data, out) else {
                    return;
                };
                // Not seen in practice (the item starts with `arguments: ""`), but arguments already present are
                // part of the call and must reach the caller.
                (state, item.arguments.filter(|a| !a.is_empty()))
            }
            // Hosted tools (web search, file search, …) and item types newer than this adapter: nothing the unified
            // stream carries.
            _ => return,
        };
        self.items.push(Item { id, state });
        if let Some(args) = initial_args {
            self.push_args(self.items.len() - 1, args, out);
        }
    }

    /// Pushes `ToolInputStart` for a function call item; `None` (after reporting a malformed stream) when the item
    /// has no `call_id`, since a call whose result cannot be paired is unusable.
    fn start_function(
        &mut self,
        item: &WireItem<'_>,
        data: &str,
        out: &mut Vec<Event>,
    ) -> Option<ItemState> {
        let call_id = item.call_id.as_deref().unwrap_or_default();
        if call_id.is_empty() {
            self.malformed("function_call item without call_id".into(), data, out);
            return None;
        }
        let name = item.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            self.malformed("function_call item without a name".into(), data, out);
            return None;
        }
        if self.call_ids.iter().any(|used| used == call_id) {
            self.malformed(format!("call_id `{call_id}` used twice"), data, out);
            return None;
        }
        self.call_ids.push(call_id.to_string());
        self.saw_function_call = true;
        out.push(Event::ToolInputStart {
            call_id: call_id.to_string(),
            tool: name.to_string(),
        });
        Some(ItemState::Function {
            call_id: call_id.to_string(),
            name: name.to_string(),
            args: String::new(),
            streamed: false,
        })
    }

    fn push_args(&mut self, index: usize, delta: String, out: &mut Vec<Event>) {
        if let Some(Item {
            state:
                ItemState::Function {
                    call_id,
                    args,
                    streamed,
                    ..
                },
            ..
        }) = self.items.get_mut(index)
        {
            args.push_str(&delta);
            *streamed = true;
            out.push(Event::ToolInputDelta {
                call_id: call_id.clone(),
                delta,
            });
        }
    }

    /// Text for message item `id`. A delta whose item was never announced still opens a block: dropping it would
    /// lose text the model wrote.
    fn text_delta(&mut self, id: &str, delta: String, data: &str, out: &mut Vec<Event>) {
        let index = match self.position(id) {
            Some(i) => i,
            None => {
                self.items.push(Item {
                    id: id.to_string(),
                    state: ItemState::Message { text_open: false },
                });
                self.items.len() - 1
            }
        };
        let ItemState::Message { text_open } = &mut self.items[index].state else {
            self.malformed(
                format!("text for item {id}, which is not a message"),
                data,
                out,
            );
            return;
        };
        if delta.is_empty() {
            return;
        }
        if !*text_open {
            *text_open = true;
            out.push(Event::TextStart { id: id.to_string() });
        }
        out.push(Event::TextDelta {
            id: id.to_string(),
            delta,
        });
    }

    /// Reasoning text for item `id`, part `at`; a later part is separated from the text before it by a blank line.
    fn reasoning_delta(
        &mut self,
        id: &str,
        at: Part,
        delta: String,
        data: &str,
        out: &mut Vec<Event>,
    ) {
        let index = match self.position(id) {
            Some(i) => i,
            None => {
                out.push(Event::ReasoningStart { id: id.to_string() });
                self.items.push(Item {
                    id: id.to_string(),
                    state: ItemState::Reasoning {
                        part: None,
                        has_text: false,
                    },
                });
                self.items.len() - 1
            }
        };
        let ItemState::Reasoning { part, has_text } = &mut self.items[index].state else {
            self.malformed(
                format!("reasoning for item {id}, which is not a reasoning item"),
                data,
                out,
            );
            return;
        };
        if delta.is_empty() {
            return;
        }
        let delta = if *has_text && *part != Some(at) {
            format!("{PART_SEPARATOR}{delta}")
        } else {
            delta
        };
        *part = Some(at);
        *has_text = true;
        out.push(Event::ReasoningDelta {
            id: id.to_string(),
            delta,
        });
    }

    fn arguments_delta(&mut self, id: &str, delta: String, data: &str, out: &mut Vec<Event>) {
        match self.position(id) {
            Some(i) if matches!(self.items[i].state, ItemState::Function { .. }) => {
                if !delta.is_empty() {
                    self.push_args(i, delta, out);
                }
            }
            // Without its `output_item.added` the fragment has no call id or tool name to go under.
            _ => self.malformed(
                format!("arguments for item {id}, which is not an open function call"),
                data,
                out,
            ),
        }
    }

    /// An event that did not parse: the provider's failure if it is one, ignored if it is of a type (or about an
    /// item) this decoder does not translate, else malformed.
    fn unparsed(&mut self, event: &str, data: &str, e: &serde_json::Error, out: &mut Vec<Event>) {
        // Fields of unknown events and items may have any shape; only what this decoder reads must parse.
        let head: Option<WireHead<'_>> = serde_json::from_str(data).ok();
        let kind = head
            .as_ref()
            .map(|h| h.kind.as_ref())
            .filter(|k| !k.is_empty())
            .unwrap_or(event);
        if kind == "error" || kind == "response.failed" {
            // Whatever its shape, the provider's failure: classify reads any body.
            self.fail(classify(None, None, data), out);
            return;
        }
        let item_kind = head
            .as_ref()
            .and_then(|h| h.item.as_ref())
            .map(|i| i.kind.as_ref());
        if (!kind.is_empty() && !is_known(kind))
            || item_kind.is_some_and(|k| !is_translated_item(k))
        {
            return;
        }
        let name = if kind.is_empty() { "untyped" } else { kind };
        self.malformed(format!("`{name}` event: {e}"), data, out);
    }

    /// Whether an event of type `kind` is refused before it is applied (then the stream has failed): a fragment
    /// without its item's id, an output item without an id, or anything about an item already done.
    fn refused(
        &mut self,
        kind: &str,
        ev: &WireEvent<'_>,
        data: &str,
        out: &mut Vec<Event>,
    ) -> bool {
        let item_id = ev.item_id.as_deref().unwrap_or_default();
        let names_an_item = matches!(
            kind,
            "response.output_text.delta"
                | "response.refusal.delta"
                | "response.reasoning_summary_text.delta"
                | "response.reasoning_text.delta"
                | "response.function_call_arguments.delta"
        );
        if names_an_item && item_id.is_empty() {
            // Without the item id the fragment cannot be placed in any block.
            self.malformed(format!("`{kind}` without item_id"), data, out);
            return true;
        }
        let about = match kind {
            "response.output_item.added" | "response.output_item.done" => {
                let item = ev.item.as_ref();
                let id = item.and_then(|i| i.id.as_deref()).unwrap_or_default();
                if id.is_empty() && item.is_some_and(|i| is_translated_item(&i.kind)) {
                    // An item's id is its block's: without one it could not be told from the next such item.
                    self.malformed(format!("`{kind}` item without an id"), data, out);
                    return true;
                }
                id
            }
            _ if names_an_item => item_id,
            _ => "",
        };
        if !about.is_empty() && self.done_items.iter().any(|d| d == about) {
            self.malformed(
                format!("`{kind}` for item {about}, which is done"),
                data,
                out,
            );
            return true;
        }
        false
    }

    /// One parsed event; its type is `event` (the SSE event name) when its JSON names none.
    fn apply(&mut self, event: &str, ev: WireEvent<'_>, data: &str, out: &mut Vec<Event>) {
        let kind = if ev.kind.is_empty() {
            event
        } else {
            ev.kind.as_ref()
        };
        let item_id = ev.item_id.as_deref().unwrap_or_default();
        if self.refused(kind, &ev, data, out) {
            return;
        }
        match kind {
            "response.created" | "response.in_progress" => {
                if let Some(r) = ev.response {
                    if let Some(id) = r.id.filter(|s| !s.is_empty()) {
                        self.response_id = id.into_owned();
                    }
                    if let Some(model) = r.model.filter(|s| !s.is_empty()) {
                        self.response_model = model.into_owned();
                    }
                }
            }
            "response.output_item.added" => match ev.item {
                Some(item) => self.item_added(item, data, out),
                None => self.malformed(
                    "`response.output_item.added` without item".into(),
                    data,
                    out,
                ),
            },
            "response.output_item.done" => match ev.item {
                Some(item) => self.item_done(item, data, out),
                None => {
                    self.malformed("`response.output_item.done` without item".into(), data, out)
                }
            },
            // A refusal is shown as text: it is the model's answer.
            "response.output_text.delta" | "response.refusal.delta" => {
                self.text_delta(item_id, ev.delta.unwrap_or_default(), data, out);
            }
            "response.reasoning_summary_text.delta" => {
                let at = Part::Summary(ev.summary_index.unwrap_or(0));
                self.reasoning_delta(item_id, at, ev.delta.unwrap_or_default(), data, out);
            }
            "response.reasoning_text.delta" => {
                let at = Part::Raw(ev.content_index.unwrap_or(0));
                self.reasoning_delta(item_id, at, ev.delta.unwrap_or_default(), data, out);
            }
            "response.function_call_arguments.delta" => {
                self.arguments_delta(item_id, ev.delta.unwrap_or_default(), data, out);
            }
            "response.function_call_arguments.done" => {
                self.arguments_done(item_id, ev.arguments.unwrap_or_default(), out);
            }
            "response.completed" | "response.incomplete" => self.finish(kind, ev.response, out),
            // The `error` event (flat or nested) is followed by `response.failed`; whichever comes first ends the
            // stream and the other is never looked at.
            "error" | "response.failed" => self.fail(classify(None, None, data), out),
            "" => self.malformed("event without a type".into(), data, out),
            // `content_part.*`, `output_text.done`, `reasoning_summary_part.*`, annotations, hosted-tool progress
            // and event types newer than this adapter carry nothing the unified stream needs.
            _ => {}
        }
    }

    /// `function_call_arguments.done` repeats the arguments whole; used only when no delta carried them.
    fn arguments_done(&mut self, id: &str, arguments: String, out: &mut Vec<Event>) {
        if let Some(i) = self.position(id)
            && let ItemState::Function {
                streamed: false, ..
            } = self.items[i].state
            && !arguments.is_empty()
        {
            self.push_args(i, arguments, out);
        }
    }

    fn item_done(&mut self, item: WireItem<'_>, data: &str, out: &mut Vec<Event>) {
        let id = item.id.as_deref().unwrap_or_default().to_string();
        let known = self.position(&id).map(|i| self.items.remove(i));
        if !id.is_empty() {
            self.done_items.push(id.clone());
        }
        match item.kind.as_ref() {
            "message" => message_done(id, known, &item, out),
            "reasoning" => reasoning_done(id, known, item, out),
            "function_call" => self.function_done(known, item, data, out),
            _ => {
                // Not a type this adapter translates; if its id was somehow tracked, close it like the stream end.
                if let Some(known) = known {
                    self.close(known, out);
                }
            }
        }
    }

    /// A completed function call: its arguments (the item's, else the streamed ones) and the call.
    fn function_done(
        &mut self,
        known: Option<Item>,
        item: WireItem<'_>,
        data: &str,
        out: &mut Vec<Event>,
    ) {
        let (call_id, name, args, streamed) = match known {
            Some(Item {
                state:
                    ItemState::Function {
                        call_id,
                        name,
                        args,
                        streamed,
                    },
                ..
            }) => (call_id, name, args, streamed),
            _ => {
                let Some(ItemState::Function { call_id, name, .. }) =
                    self.start_function(&item, data, out)
                else {
                    return;
                };
                (call_id, name, String::new(), false)
            }
        };
        // The completed item's `arguments` are authoritative; the streamed fragments are the fallback.
        let input = item.arguments.unwrap_or(args);
        if !streamed && !input.is_empty() {
            out.push(Event::ToolInputDelta {
                call_id: call_id.clone(),
                delta: input.clone(),
            });
        }
        out.push(Event::ToolInputEnd {
            call_id: call_id.clone(),
        });
        let input_json = if input.trim().is_empty() {
            "{}".to_string()
        } else {
            self.strict.clean(&name, input)
        };
        out.push(Event::ToolCall {
            call_id,
            tool: name,
            input_json,
            metadata: None,
        });
    }

    /// Closes an item that never got its `output_item.done`, so nothing opened is left open at the finish.
    fn close(&mut self, item: Item, out: &mut Vec<Event>) {
        match item.state {
            ItemState::Message { text_open } => {
                if text_open {
                    out.push(Event::TextEnd { id: item.id });
                }
            }
            ItemState::Reasoning { .. } => {
                // No encrypted content came: the metadata still names the item, but it cannot be replayed.
                let metadata = ReasoningMetadata {
                    item_id: item.id.clone(),
                    encrypted_content: None,
                };
                out.push(Event::ReasoningEnd {
                    id: item.id,
                    metadata: serde_json::to_string(&metadata).ok(),
                });
            }
            ItemState::Function {
                call_id,
                name,
                args,
                ..
            } => {
                out.push(Event::ToolInputEnd {
                    call_id: call_id.clone(),
                });
                // Passed through as streamed: a call cut short is still reported, and the processor's argument
                // validation tells the model what is wrong.
                let input_json = if args.trim().is_empty() {
                    "{}".to_string()
                } else {
                    self.strict.clean(&name, args)
                };
                out.push(Event::ToolCall {
                    call_id,
                    tool: name,
                    input_json,
                    metadata: None,
                });
            }
        }
    }

    /// `response.completed` / `response.incomplete`: closes what is open, then `Finish`.
    fn finish(&mut self, terminal: &str, response: Option<WireResponse<'_>>, out: &mut Vec<Event>) {
        for item in std::mem::take(&mut self.items) {
            self.close(item, out);
        }
        let mut usage = Usage::default();
        let mut incomplete_reason = None;
        if let Some(r) = response {
            if let Some(id) = r.id.filter(|s| !s.is_empty()) {
                self.response_id = id.into_owned();
            }
            if let Some(model) = r.model.filter(|s| !s.is_empty()) {
                self.response_model = model.into_owned();
            }
            if let Some(u) = &r.usage {
                usage = normalize_usage(u);
            }
            incomplete_reason = r
                .incomplete_details
                .and_then(|d| d.reason)
                .map(Cow::into_owned);
        }
        let (reason, raw_reason) = if terminal == "response.incomplete" {
            let raw = incomplete_reason.unwrap_or_else(|| "incomplete".to_string());
            let reason = match raw.as_str() {
                "max_output_tokens" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                _ => FinishReason::Other,
            };
            (reason, raw)
        } else {
            // Responses has no finish reason on success: a response that called functions is waiting for their
            // results (vercel `map-openai-responses-finish-reason.ts`). The raw string is the response status.
            let reason = if self.saw_function_call {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            };
            (reason, "completed".to_string())
        };
        self.done = true;
        out.push(Event::Finish(Finish {
            reason,
            raw_reason,
            usage,
            response_id: std::mem::take(&mut self.response_id),
            response_model: std::mem::take(&mut self.response_model),
        }));
    }
}

/// The non-empty texts of summary or content parts, joined by the part separator.
fn joined<'a>(parts: impl Iterator<Item = &'a WireText>) -> String {
    let mut out = String::new();
    for text in parts
        .filter_map(|p| p.text.as_deref())
        .filter(|t| !t.is_empty())
    {
        if !out.is_empty() {
            out.push_str(PART_SEPARATOR);
        }
        out.push_str(text);
    }
    out
}

/// docs/architecture.md "Usage and cost": the five counts made disjoint ([`Usage::from_inclusive`]); `input_tokens`
/// includes cached (and, where reported, cache write) tokens and `output_tokens` includes reasoning.
fn normalize_usage(u: &WireUsage) -> Usage {
    let details = u.input_tokens_details.as_ref();
    let cache_read = details.and_then(|d| d.cached_tokens).unwrap_or(0);
    let cache_write = details.and_then(|d| d.cache_write_tokens).unwrap_or(0);
    let reasoning = u
        .output_tokens_details
        .as_ref()
        .and_then(|d| d.reasoning_tokens)
        .unwrap_or(0);
    Usage::from_inclusive(
        u.input_tokens.unwrap_or(0),
        cache_read,
        cache_write,
        u.output_tokens.unwrap_or(0),
        reasoning,
    )
}

/// Event types whose frames must parse; a frame of any other type is ignored whatever its shape.
fn is_known(kind: &str) -> bool {
    matches!(
        kind,
        "response.created"
            | "response.in_progress"
            | "response.output_item.added"
            | "response.output_item.done"
            | "response.output_text.delta"
            | "response.refusal.delta"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta"
            | "response.function_call_arguments.delta"
            | "response.function_call_arguments.done"
            | "response.completed"
            | "response.incomplete"
            | "response.failed"
            | "error"
    )
}

/// Item types the decoder translates; an `output_item` frame for any other type is ignored whatever its shape.
fn is_translated_item(kind: &str) -> bool {
    matches!(kind, "message" | "reasoning" | "function_call")
}

/// A completed message: its end, and its whole text first when no delta carried it.
fn message_done(id: String, known: Option<Item>, item: &WireItem<'_>, out: &mut Vec<Event>) {
    let text_open = match known {
        Some(Item {
            state: ItemState::Message { text_open },
            ..
        }) => text_open,
        _ => false,
    };
    if !text_open {
        // No delta came (a proxy that only forwards items): the completed item has the whole text.
        let text: String = item
            .content
            .iter()
            .flatten()
            .filter_map(|c| c.text.as_deref().or(c.refusal.as_deref()))
            .collect();
        if text.is_empty() {
            return;
        }
        out.push(Event::TextStart { id: id.clone() });
        out.push(Event::TextDelta {
            id: id.clone(),
            delta: text,
        });
    }
    out.push(Event::TextEnd { id });
}

/// A completed reasoning item: its text when no delta carried it, and its end with the replay metadata.
fn reasoning_done(id: String, known: Option<Item>, item: WireItem<'_>, out: &mut Vec<Event>) {
    let has_text = match known {
        Some(Item {
            state: ItemState::Reasoning { has_text, .. },
            ..
        }) => has_text,
        _ => {
            out.push(Event::ReasoningStart { id: id.clone() });
            false
        }
    };
    if !has_text {
        let summary = joined(item.summary.iter().flatten());
        let text = if summary.is_empty() {
            joined(item.content.iter().flatten())
        } else {
            summary
        };
        if !text.is_empty() {
            out.push(Event::ReasoningDelta {
                id: id.clone(),
                delta: text,
            });
        }
    }
    let metadata = ReasoningMetadata {
        item_id: id.clone(),
        encrypted_content: item.encrypted_content.filter(|e| !e.is_empty()),
    };
    out.push(Event::ReasoningEnd {
        id,
        metadata: serde_json::to_string(&metadata).ok(),
    });
}

impl Decoder for ResponsesDecoder {
    fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        if data.trim().is_empty() {
            return;
        }
        let ev: WireEvent<'_> = match serde_json::from_str(data) {
            Ok(ev) => ev,
            Err(e) => return self.unparsed(event, data, &e, out),
        };
        self.apply(event, ev, data, out);
    }

    fn whole(&mut self, json: &str, out: &mut Vec<Event>) {
        super::whole::decode(self, json, out);
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        self.fail(
            ProviderError::new(
                ErrorKind::Network,
                "stream ended before the response completed",
            ),
            out,
        );
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(ResponsesDecoder::with_strict(self.strict.clone()))
    }
}
