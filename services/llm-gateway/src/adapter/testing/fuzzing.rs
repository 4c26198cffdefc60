//! The fuzzing harness: provider bytes in, unified events out, checked. The cargo-fuzz targets in `fuzz/` call
//! these functions on libFuzzer's inputs, and the stable test suite replays every recorded fixture through the very
//! same functions (`fuzzing_tests.rs`), so a corpus input that fails under the fuzzer fails `make test` too.
//!
//! An input is one plan byte followed by the body, exactly as a provider would send it:
//! - the plan's low seven bits choose how the body is cut into reads ([`reads`]): 0 is one read, `n` is reads of
//!   1 to `n` bytes from a generator seeded by `n` (1 is byte by byte), so splits inside a CRLF, a UTF-8 character
//!   or an eventstream prelude are all reached;
//! - its high bit chooses the framing limit: [`SMALL_LIMIT`] (so fuzz-sized inputs reach the over-limit path) or
//!   [`LARGE_LIMIT`] (so they do not).
//!
//! The body goes through the framing parser the transport uses (SSE, or the AWS eventstream for Bedrock) into the
//! protocol's decoder, fed the way `ProviderStream::pump` feeds it: nothing after the decoder is done, `end` at the
//! end of the body, a framing error becoming the stream's typed error. What is asserted, by panicking:
//! - the events pass [`invariants::check`]: block ids unique, every block opened before its deltas and closed once,
//!   tool calls named and their ids used once, exactly one terminal event, last;
//! - the split decodes exactly like the whole body in one read, by a decoder made with [`Decoder::restart`] from the
//!   first one (so a retry's decoder carries none of the previous stream's state);
//! - and, for the SSE parser alone ([`sse_target`]), the same items and the same overflow whatever the split.

use std::convert::Infallible;

use crate::adapter::framing::Parser;
use crate::adapter::framing::sse::{SseItem, SseParser};
use crate::adapter::{Decoder, Protocol, Target, testing::invariants};
use crate::catalog::{Capabilities, ModelInfo};
use crate::event::Event;

/// The framing limit of plans with the high bit set: small enough for fuzz inputs to go over it.
pub const SMALL_LIMIT: usize = 512;
/// The framing limit of the other plans: larger than any fuzz input.
pub const LARGE_LIMIT: usize = 1 << 20;

/// The framing limit `plan` selects.
pub fn limit(plan: u8) -> usize {
    if plan & 0x80 != 0 {
        SMALL_LIMIT
    } else {
        LARGE_LIMIT
    }
}

/// `body` cut into the reads `plan` selects (see the module docs). The reads always join back into `body`.
pub fn reads(plan: u8, body: &[u8]) -> Vec<&[u8]> {
    let most = usize::from(plan & 0x7f);
    if most == 0 {
        return vec![body];
    }
    // xorshift32: any seed but 0 works, and the cut points only need to vary, not be random.
    let mut state = u32::from(plan).wrapping_mul(0x9E37_79B9) | 1;
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let len = 1 + usize::try_from(state).unwrap_or(0) % most;
        let (head, tail) = rest.split_at(len.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// A fresh decoder for `protocol`, as the gateway makes one for a request without strict tools.
pub fn decoder(protocol: Protocol) -> Box<dyn Decoder> {
    let model = ModelInfo {
        id: "fuzz/fuzz".into(),
        provider: "fuzz".into(),
        name: "fuzz".into(),
        display_name: "fuzz".into(),
        protocol,
        context_window: 100_000,
        max_input_tokens: 0,
        max_output_tokens: 8192,
        capabilities: Capabilities::default(),
        pricing: None,
    };
    protocol.adapter().decoder(&Target::new(&model))
}

/// Decodes `reads` with `decoder` through `protocol`'s framing capped at `limit`, as the transport does.
pub fn decode(
    protocol: Protocol,
    decoder: &mut dyn Decoder,
    reads: &[&[u8]],
    limit: usize,
) -> Vec<Event> {
    let mut parser = Parser::new(protocol.adapter().framing(), limit);
    let mut out = Vec::new();
    let mut ended = Ok(());
    for read in reads {
        ended = parser.feed(read, decoder, &mut out);
        if ended.is_err() {
            break;
        }
    }
    if ended.is_ok() {
        ended = parser.finish(decoder, &mut out);
    }
    if !decoder.is_done() {
        match ended {
            Ok(()) => decoder.end(&mut out),
            Err(e) => out.push(Event::Error(e)),
        }
    }
    out
}

/// The fuzz target of a provider stream decoder: `data` is a plan byte and a body (module docs). Panics on any
/// violation.
pub fn decoder_target(protocol: Protocol, data: &[u8]) {
    let Some((&plan, body)) = data.split_first() else {
        return;
    };
    let limit = limit(plan);
    let mut first = decoder(protocol);
    let split = decode(protocol, first.as_mut(), &reads(plan, body), limit);
    if let Err(e) = invariants::check(&split) {
        panic!("{protocol:?}: {e}: {split:#?}");
    }
    let mut retry = first.restart();
    let whole = decode(protocol, retry.as_mut(), &[body], limit);
    assert_eq!(
        split, whole,
        "{protocol:?}: reads of plan {plan} decode unlike the whole body"
    );
}

/// An SSE item, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// [`SseItem::Event`].
    Event { event: String, data: String },
    /// [`SseItem::BareJson`].
    BareJson(String),
    /// [`SseItem::Comment`].
    Comment,
}

/// The items the SSE parser (capped at `limit`) yields for `reads`, and whether it overflowed.
pub fn parse_sse(reads: &[&[u8]], limit: usize) -> (Vec<Item>, bool) {
    let mut parser = SseParser::with_limit(limit);
    let mut items = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), Infallible> {
        items.push(match item {
            SseItem::Event { event, data } => Item::Event {
                event: event.into(),
                data: data.into(),
            },
            SseItem::BareJson(json) => Item::BareJson(json.into()),
            SseItem::Comment => Item::Comment,
        });
        Ok(())
    };
    for read in reads {
        let Ok(()) = parser.feed(read, &mut on);
    }
    let Ok(()) = parser.finish(&mut on);
    let overflowed = parser.overflowed();
    (items, overflowed)
}

/// The fuzz target of the SSE parser: `data` is a plan byte and a body. Panics unless the split parses exactly
/// like the whole body (items and overflow).
pub fn sse_target(data: &[u8]) {
    let Some((&plan, body)) = data.split_first() else {
        return;
    };
    let limit = limit(plan);
    let split = parse_sse(&reads(plan, body), limit);
    let whole = parse_sse(&[body], limit);
    assert_eq!(
        split, whole,
        "reads of plan {plan} parse unlike the whole body"
    );
    if !whole.1 {
        for item in &whole.0 {
            let len = match item {
                Item::Event { data, .. } => data.len(),
                Item::BareJson(json) => json.len(),
                Item::Comment => 0,
            };
            assert!(
                len <= limit,
                "an item of {len} bytes passed the {limit}-byte limit"
            );
        }
    }
}

/// The protocols with a fuzz target of their own, by target name. Vertex's Anthropic models use the Anthropic
/// decoder unchanged, so `anthropic` covers them, as `openai_chat` and `openai_responses` cover Azure OpenAI's
/// (seeded with its fixtures too); `vertex_gemini` is the Gemini decoder again, seeded with Vertex's
/// streamed function-call arguments (`partialArgs`).
pub const TARGETS: [(&str, Protocol); 6] = [
    ("openai_chat", Protocol::OpenaiChat),
    ("openai_responses", Protocol::OpenaiResponses),
    ("anthropic", Protocol::Anthropic),
    ("gemini", Protocol::Gemini),
    ("vertex_gemini", Protocol::VertexGemini),
    ("bedrock", Protocol::Bedrock),
];

#[cfg(test)]
#[path = "fuzzing_tests.rs"]
mod tests;
