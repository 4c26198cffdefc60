//! Recorded provider streams, scaled up to many text deltas.
//!
//! Each protocol's `text.sse` fixture is cut into its SSE frames; the frames before the first text delta (the
//! prelude), one text-delta frame, and the frames after the last text delta (finish, usage, end marker) are kept,
//! and the delta frame is repeated `n` times in between. The result is still the provider's exact wire format, just
//! a longer answer.

use std::convert::Infallible;
use std::path::PathBuf;

use llm_gateway::adapter::Decoder;
use llm_gateway::adapter::anthropic::AnthropicDecoder;
use llm_gateway::adapter::framing::sse::{SseItem, SseParser};
use llm_gateway::adapter::gemini::GeminiDecoder;
use llm_gateway::adapter::openai_chat::ChatDecoder;
use llm_gateway::adapter::openai_responses::ResponsesDecoder;
use llm_gateway::event::Event;

/// The four wire protocols the gateway decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// OpenAI Chat Completions.
    OpenaiChat,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
}

impl Proto {
    /// Every protocol, in a stable order.
    pub const ALL: [Proto; 4] = [
        Proto::OpenaiChat,
        Proto::OpenaiResponses,
        Proto::Anthropic,
        Proto::Gemini,
    ];

    /// The fixture folder's name.
    pub fn name(self) -> &'static str {
        match self {
            Proto::OpenaiChat => "openai_chat",
            Proto::OpenaiResponses => "openai_responses",
            Proto::Anthropic => "anthropic",
            Proto::Gemini => "gemini",
        }
    }

    /// A fresh decoder for one stream of this protocol.
    pub fn decoder(self) -> Box<dyn Decoder> {
        match self {
            Proto::OpenaiChat => Box::new(ChatDecoder::new()),
            Proto::OpenaiResponses => Box::new(ResponsesDecoder::new()),
            Proto::Anthropic => Box::new(AnthropicDecoder::new()),
            Proto::Gemini => Box::new(GeminiDecoder::new()),
        }
    }

    /// True for a frame that carries (non-empty) answer text.
    fn is_text_delta(self, frame: &str) -> bool {
        match self {
            Proto::OpenaiChat => {
                frame.contains(r#""delta":{"content":""#) && !frame.contains(r#""content":"""#)
            }
            Proto::OpenaiResponses => frame.contains("event: response.output_text.delta"),
            Proto::Anthropic => frame.contains(r#""type":"text_delta""#),
            Proto::Gemini => frame.contains(r#""text": ""#) && !frame.contains("finishReason"),
        }
    }
}

/// `shared/fake-provider/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fake-provider/fixtures")
}

/// Splits an SSE body after each blank line (LF, CRLF or CR line ends), keeping every byte.
pub fn split_frames(body: &str) -> Vec<&str> {
    let bytes = body.as_bytes();
    let mut frames = Vec::new();
    let (mut start, mut i, mut at_line_start) = (0, 0, true);
    while i < bytes.len() {
        let eol = match bytes[i] {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => 2,
            b'\r' | b'\n' => 1,
            _ => 0,
        };
        if eol == 0 {
            at_line_start = false;
            i += 1;
            continue;
        }
        i += eol;
        if at_line_start {
            frames.push(&body[start..i]);
            start = i;
        }
        at_line_start = true;
    }
    if start < bytes.len() {
        frames.push(&body[start..]);
    }
    frames
}

/// A scaled stream: the body and its frames.
#[derive(Debug, Clone)]
pub struct Scaled {
    /// The whole body.
    pub body: String,
    /// The body cut into its frames (`body` is their concatenation).
    pub frames: Vec<String>,
    /// Text deltas in it.
    pub deltas: usize,
}

/// `<protocol>/text.sse` with its text-delta frame repeated `n` times.
pub fn scaled(proto: Proto, n: usize) -> Result<Scaled, String> {
    let path = fixtures_dir().join(proto.name()).join("text.sse");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let frames = split_frames(&text);
    let first = frames
        .iter()
        .position(|f| proto.is_text_delta(f))
        .ok_or_else(|| format!("{}: no text-delta frame", path.display()))?;
    let last = frames
        .iter()
        .rposition(|f| proto.is_text_delta(f))
        .unwrap_or(first);
    let mut out: Vec<String> = frames[..first].iter().map(|f| (*f).to_owned()).collect();
    out.extend(std::iter::repeat_n(frames[first].to_owned(), n));
    out.extend(frames[last + 1..].iter().map(|f| (*f).to_owned()));
    let body = out.concat();
    // Counted, not assumed: Gemini's last frame carries text too.
    let deltas = decode(proto, &body)
        .iter()
        .filter(|e| matches!(e, Event::TextDelta { .. }))
        .count();
    Ok(Scaled {
        body,
        frames: out,
        deltas,
    })
}

/// Every event the protocol's decoder makes of `body`, parsed in one read.
pub fn decode(proto: Proto, body: &str) -> Vec<Event> {
    let mut decoder = proto.decoder();
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), Infallible> {
        if !decoder.is_done() {
            match item {
                SseItem::Event { event, data } => decoder.frame(event, data, &mut events),
                SseItem::BareJson(json) => decoder.bare_json(json, &mut events),
                // A keep-alive carries no content to replay.
                SseItem::Comment => {}
            }
        }
        Ok(())
    };
    let Ok(()) = parser.feed(body.as_bytes(), &mut on);
    let Ok(()) = parser.finish(&mut on);
    if !decoder.is_done() {
        decoder.end(&mut events);
    }
    events
}

#[cfg(test)]
#[path = "fixtures_tests.rs"]
mod tests;
