//! Builders of unified events and a stand-in SSE splitter for the decoders' unit tests, so an expected stream
//! reads as the events it holds.

use crate::adapter::Decoder;
use crate::adapter::framing::sse::{SseItem, SseParser};
use crate::event::{Event, Finish, FinishReason, Usage};

/// Splits an SSE body into `(event, data)` frames on blank lines: a stand-in for the real SSE parser, which is
/// written separately. Comment lines (`: …`) are skipped; a block with no `data:` line is no frame.
pub(crate) fn frames(sse: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for block in sse.split("\n\n") {
        let mut event = String::new();
        let mut data: Option<String> = None;
        for line in block.lines() {
            if line.starts_with(':') {
                continue;
            }
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim_start().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                let v = v.strip_prefix(' ').unwrap_or(v);
                match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(v);
                    }
                    None => data = Some(v.to_string()),
                }
            }
        }
        if let Some(data) = data {
            out.push((event, data));
        }
    }
    out
}

pub(crate) fn ts(id: &str) -> Event {
    Event::TextStart { id: id.into() }
}

pub(crate) fn td(id: &str, delta: &str) -> Event {
    Event::TextDelta {
        id: id.into(),
        delta: delta.into(),
    }
}

pub(crate) fn te(id: &str) -> Event {
    Event::TextEnd { id: id.into() }
}

pub(crate) fn rs(id: &str) -> Event {
    Event::ReasoningStart { id: id.into() }
}

pub(crate) fn rd(id: &str, delta: &str) -> Event {
    Event::ReasoningDelta {
        id: id.into(),
        delta: delta.into(),
    }
}

pub(crate) fn tis(call_id: &str, tool: &str) -> Event {
    Event::ToolInputStart {
        call_id: call_id.into(),
        tool: tool.into(),
    }
}

pub(crate) fn tid(call_id: &str, delta: &str) -> Event {
    Event::ToolInputDelta {
        call_id: call_id.into(),
        delta: delta.into(),
    }
}

pub(crate) fn tie(call_id: &str) -> Event {
    Event::ToolInputEnd {
        call_id: call_id.into(),
    }
}

pub(crate) fn tc(call_id: &str, tool: &str, input_json: &str) -> Event {
    Event::ToolCall {
        call_id: call_id.into(),
        tool: tool.into(),
        input_json: input_json.into(),
        metadata: None,
    }
}

pub(crate) fn finish(
    reason: FinishReason,
    raw: &str,
    usage: Usage,
    id: &str,
    model: &str,
) -> Event {
    Event::Finish(Finish {
        reason,
        raw_reason: raw.into(),
        usage,
        response_id: id.into(),
        response_model: model.into(),
    })
}

pub(crate) fn usage(
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    reasoning: u64,
) -> Usage {
    Usage {
        input,
        cache_read,
        cache_write,
        output,
        reasoning,
    }
}

pub(crate) fn texts(id: &str, deltas: &[&str]) -> Vec<Event> {
    deltas.iter().map(|d| td(id, d)).collect()
}

/// The four events of one whole function call.
pub(crate) fn call(call_id: &str, tool: &str, args: &str, metadata: Option<String>) -> Vec<Event> {
    vec![
        Event::ToolInputStart {
            call_id: call_id.into(),
            tool: tool.into(),
        },
        Event::ToolInputDelta {
            call_id: call_id.into(),
            delta: args.into(),
        },
        Event::ToolInputEnd {
            call_id: call_id.into(),
        },
        Event::ToolCall {
            call_id: call_id.into(),
            tool: tool.into(),
            input_json: args.into(),
            metadata,
        },
    ]
}

/// The events of one whole call (no metadata) and the stream's finish: a one-call stream.
pub(crate) fn one_call(call_id: &str, tool: &str, args: &str, end: Event) -> Vec<Event> {
    let mut out = call(call_id, tool, args, None);
    out.push(end);
    out
}

/// `body` through the real SSE parser in reads of `read` bytes and into `decoder`, then its end: what the decoder
/// emits for the body as the transport would hand it over.
pub(crate) fn decode_in_reads(decoder: &mut dyn Decoder, body: &str, read: usize) -> Vec<Event> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        match item {
            SseItem::Event { event, data } => decoder.frame(event, data, &mut out),
            SseItem::BareJson(json) => decoder.bare_json(json, &mut out),
            SseItem::Comment => out.push(Event::KeepAlive),
        }
        Ok(())
    };
    for bytes in body.as_bytes().chunks(read) {
        parser
            .feed(bytes, &mut on)
            .expect("the SSE parser takes the body");
    }
    parser
        .finish(&mut on)
        .expect("the SSE parser ends the body");
    decoder.end(&mut out);
    // Keep-alives (comments, pings) are the transport's; what the tests compare is the stream's content.
    out.retain(|e| !matches!(e, Event::KeepAlive));
    out
}

/// The decoder contract on a whole stream's events: exactly one terminal event (`Finish` or `Error`), and it last.
pub(crate) fn assert_one_terminal_last(out: &[Event]) {
    let terminal = out
        .iter()
        .filter(|e| matches!(e, Event::Finish(_) | Event::Error(_)))
        .count();
    assert_eq!(terminal, 1, "{out:#?}");
    assert!(matches!(
        out.last(),
        Some(Event::Finish(_) | Event::Error(_))
    ));
}
