//! Response-stream framings: SSE (every protocol but Bedrock), the binary AWS eventstream, and a whole JSON body
//! (Bedrock's non-streaming `Converse`), behind one [`Parser`] the transport feeds body reads into and that hands
//! each complete frame, message or body to the decoder.

use std::convert::Infallible;

use crate::adapter::Decoder;
use crate::adapter::eventstream::EventStreamDecoder;
use crate::adapter::sse::{SseItem, SseParser};
use crate::error::{ErrorKind, ProviderError};
use crate::event::Event;

/// How a provider frames its response stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// `text/event-stream` (every protocol but Bedrock).
    #[default]
    Sse,
    /// The binary `application/vnd.amazon.eventstream` (Bedrock), see [`crate::adapter::eventstream`].
    EventStream,
    /// One JSON document, not a stream (Bedrock's `Converse`): collected whole, handed to
    /// [`Decoder::bare_json`] when the body ends.
    Json,
}

/// The framing parser of an open stream.
pub(crate) enum Parser {
    Sse(SseParser),
    EventStream(EventStreamDecoder),
    Json { body: Vec<u8>, limit: usize },
}

impl Parser {
    /// A parser for `framing`, capped at `limit` bytes per line, event or message.
    pub(crate) fn new(framing: Framing, limit: usize) -> Self {
        match framing {
            Framing::Sse => Parser::Sse(SseParser::with_limit(limit)),
            Framing::EventStream => Parser::EventStream(EventStreamDecoder::with_limit(limit)),
            Framing::Json => Parser::Json {
                body: Vec::new(),
                limit,
            },
        }
    }
}

impl Parser {
    /// Feeds one body read through the framing parser into `decoder`.
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        decoder: &mut dyn Decoder,
        out: &mut Vec<Event>,
    ) -> Result<(), ProviderError> {
        match self {
            Parser::Sse(parser) => {
                let mut route = sse_route(decoder, out);
                let Ok(()) = parser.feed(chunk, &mut route);
                if parser.overflowed() {
                    return Err(ProviderError::new(
                        ErrorKind::ProviderError,
                        format!(
                            "the provider sent an SSE line or event over {} bytes (limits.max_sse_event_bytes)",
                            parser.limit()
                        ),
                    ));
                }
                Ok(())
            }
            Parser::EventStream(parser) => {
                let fed = parser.feed(chunk, &mut |m| {
                    if !decoder.is_done() {
                        decoder.message(&m, out);
                    }
                });
                fed.map_err(|e| ProviderError::malformed(e.to_string()))
            }
            Parser::Json { body, limit } => {
                if body.len().saturating_add(chunk.len()) > *limit {
                    // The body is dropped with the parser: memory stays bounded by the limit.
                    *body = Vec::new();
                    return Err(ProviderError::new(
                        ErrorKind::ProviderError,
                        format!(
                            "the provider sent a response body over {limit} bytes (limits.max_sse_event_bytes)"
                        ),
                    ));
                }
                body.extend_from_slice(chunk);
                Ok(())
            }
        }
    }

    /// The body ended: flushes what the framing parser holds.
    pub(crate) fn finish(
        &mut self,
        decoder: &mut dyn Decoder,
        out: &mut Vec<Event>,
    ) -> Result<(), ProviderError> {
        match self {
            Parser::Sse(parser) => {
                let mut route = sse_route(decoder, out);
                let Ok(()) = parser.finish(&mut route);
                Ok(())
            }
            Parser::EventStream(parser) => parser
                .finish()
                .map_err(|e| ProviderError::malformed(e.to_string())),
            Parser::Json { body, .. } => {
                let body = std::mem::take(body);
                let text = String::from_utf8(body)
                    .map_err(|_| ProviderError::malformed("the response body is not UTF-8"))?;
                if !decoder.is_done() {
                    decoder.bare_json(&text, out);
                }
                Ok(())
            }
        }
    }
}

/// Routes SSE items to `decoder` until it is done (its contract is to push nothing more after that).
fn sse_route<'d>(
    decoder: &'d mut dyn Decoder,
    out: &'d mut Vec<Event>,
) -> impl FnMut(SseItem<'_>) -> Result<(), Infallible> + 'd {
    move |item| {
        if !decoder.is_done() {
            match item {
                SseItem::Event { event, data } => decoder.frame(event, data, out),
                SseItem::BareJson(json) => decoder.bare_json(json, out),
            }
        }
        Ok(())
    }
}
