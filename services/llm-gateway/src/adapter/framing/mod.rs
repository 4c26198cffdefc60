//! Response-stream framings: SSE (every protocol but Bedrock), the binary AWS eventstream, and a whole JSON body
//! (Bedrock's non-streaming `Converse`), behind one [`Parser`] the transport feeds body reads into and that hands
//! each complete frame, message or body to the decoder.

pub mod eventstream;
pub(crate) mod json_scan;
pub mod sse;
#[cfg(test)]
mod tests;

use std::convert::Infallible;

use crate::adapter::Decoder;
use crate::adapter::framing::eventstream::EventStreamDecoder;
use crate::adapter::framing::sse::{SseItem, SseParser};
use crate::error::{ErrorKind, ProviderError};
use crate::event::Event;

/// How a provider frames its response stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// `text/event-stream` (every protocol but Bedrock).
    #[default]
    Sse,
    /// The binary `application/vnd.amazon.eventstream` (Bedrock), see [`crate::adapter::framing::eventstream`].
    EventStream,
    /// One JSON document, not a stream (Bedrock's `Converse`, or any provider that answered a streaming request
    /// with its non-streaming response): collected whole, handed to [`Decoder::whole`] when the body ends.
    Json,
}

impl Framing {
    /// The media type a response in this framing has.
    pub fn media_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::EventStream => "application/vnd.amazon.eventstream",
            Framing::Json => "application/json",
        }
    }
}

/// How a 2xx response whose `Content-Type` is `content_type` is framed, for a request that asked for `expected`.
///
/// A server may answer a streaming request with its whole non-streaming response (several OpenAI-compatible
/// servers ignore `stream: true`): a JSON media type means one JSON document, whatever was asked for. No content type,
/// or one that names no format (`text/plain`, `application/octet-stream`), is decided by the body's first byte
/// ([`Parser::sniffing`]). Any other media type (an HTML page, XML, NDJSON) is a body the adapter cannot read: `Err`
/// with the media type, so that it becomes a typed error and never an empty success.
pub fn answered(expected: Framing, content_type: Option<&str>) -> Result<Option<Framing>, String> {
    let media = content_type
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "" | "text/plain" | "application/octet-stream" => Ok(None),
        "application/json" | "text/json" => Ok(Some(Framing::Json)),
        m if m.ends_with("+json") => Ok(Some(Framing::Json)),
        "text/event-stream" if expected == Framing::Sse => Ok(Some(Framing::Sse)),
        "application/vnd.amazon.eventstream" if expected == Framing::EventStream => {
            Ok(Some(Framing::EventStream))
        }
        _ => Err(media),
    }
}

/// The framing parser of an open stream.
pub(crate) enum Parser {
    Sse(SseParser),
    EventStream(EventStreamDecoder),
    Json {
        body: Vec<u8>,
        limit: usize,
    },
    /// No content type said how the body is framed: the first byte that is not white space decides (`{` or `[`: one
    /// JSON document; anything else: `expected`). What came before it is held and replayed into the chosen parser.
    Sniffing {
        expected: Framing,
        held: Vec<u8>,
        limit: usize,
    },
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
    /// A parser that decides between `expected` and one JSON document from the body's first bytes.
    pub(crate) fn sniffing(expected: Framing, limit: usize) -> Self {
        Parser::Sniffing {
            expected,
            held: Vec::new(),
            limit,
        }
    }

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
            Parser::Sniffing {
                expected,
                held,
                limit,
            } => {
                let Some(first) = chunk.iter().find(|b| !b.is_ascii_whitespace()) else {
                    if held.len().saturating_add(chunk.len()) > *limit {
                        *held = Vec::new();
                        return Err(over_limit(*limit));
                    }
                    held.extend_from_slice(chunk);
                    return Ok(());
                };
                let framing = if matches!(first, b'{' | b'[') {
                    Framing::Json
                } else {
                    *expected
                };
                let held = std::mem::take(held);
                *self = Parser::new(framing, *limit);
                if !held.is_empty() {
                    self.feed(&held, decoder, out)?;
                }
                self.feed(chunk, decoder, out)
            }
            Parser::Json { body, limit } => {
                if body.len().saturating_add(chunk.len()) > *limit {
                    // The body is dropped with the parser: memory stays bounded by the limit.
                    *body = Vec::new();
                    return Err(over_limit(*limit));
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
                    decoder.whole(&text, out);
                }
                Ok(())
            }
            // Nothing but white space came: an empty body, which the decoder reports as a cut stream.
            Parser::Sniffing { .. } => Ok(()),
        }
    }
}

fn over_limit(limit: usize) -> ProviderError {
    ProviderError::new(
        ErrorKind::ProviderError,
        format!(
            "the provider sent a response body over {limit} bytes (limits.max_sse_event_bytes)"
        ),
    )
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
                SseItem::Comment => out.push(Event::KeepAlive),
            }
        }
        Ok(())
    }
}
