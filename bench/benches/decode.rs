//! Criterion micro-benchmarks of the gateway's per-event code: the SSE parser, each adapter's decoder, and the two
//! together with the conversion to the wire message, on the recorded fixtures scaled up to many text deltas
//! (bench::fixtures). Throughput is in elements: SSE frames for the parser, text deltas for everything else, so
//! criterion's `elem/s` is events per second on one core.
//!
//! Each workload is one `#[inline(never)]` function, so a profiler can count exactly its instructions. Profile mode
//! runs one workload once, without criterion, for an instruction count per event (docs/benchmarks.md, "Profiles"):
//!
//! ```sh
//! DECODE_PROFILE=decoder/openai_chat valgrind --tool=callgrind --toggle-collect='*profiled_run*' \
//!     target/release/deps/decode-<hash>
//! ```
//!
//! `DECODE_PROFILE` is `<workload>/<protocol>`, workload one of `sse_16k`, `sse_frame`, `decoder`, `whole_path`;
//! the run prints the number of events, which divides callgrind's total.
// Benchmark start-up: a broken fixture should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::hint::black_box;

use bench::fixtures::{Proto, Scaled, scaled};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use llm_gateway::adapter::Decoder;
use llm_gateway::adapter::bedrock::BedrockDecoder;
use llm_gateway::adapter::framing::eventstream::{EventStreamDecoder, encode};
use llm_gateway::adapter::framing::sse::{SseItem, SseParser};
use llm_gateway::catalog::{Capabilities, ModelInfo};
use llm_gateway::event::Event;
use prost::Message;

/// Text deltas per scaled stream: long enough that the prelude and finish frames do not matter.
const DELTAS: usize = 10_000;

fn streams() -> Vec<(Proto, Scaled)> {
    Proto::ALL
        .iter()
        .map(|&p| (p, scaled(p, DELTAS).expect("fixture")))
        .collect()
}

fn model(proto: Proto) -> ModelInfo {
    let protocol = match proto {
        Proto::OpenaiChat => llm_gateway::adapter::Protocol::OpenaiChat,
        Proto::OpenaiResponses => llm_gateway::adapter::Protocol::OpenaiResponses,
        Proto::Anthropic => llm_gateway::adapter::Protocol::Anthropic,
        Proto::Gemini => llm_gateway::adapter::Protocol::Gemini,
    };
    ModelInfo {
        id: "bench/model".into(),
        provider: "bench".into(),
        name: "model".into(),
        display_name: "model".into(),
        protocol,
        context_window: 128_000,
        max_input_tokens: 0,
        max_output_tokens: 8192,
        capabilities: Capabilities::default(),
        pricing: None,
    }
}

/// The stream's frames already parsed (event name and data), as the decoder sees them.
fn parsed_frames(s: &Scaled) -> Vec<(String, String)> {
    let mut frames: Vec<(String, String)> = Vec::new();
    let mut parser = SseParser::new();
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        match item {
            SseItem::Event { event, data } => frames.push((event.to_owned(), data.to_owned())),
            SseItem::BareJson(json) => frames.push((String::new(), json.to_owned())),
            SseItem::Comment => {}
        }
        Ok(())
    };
    parser.feed(s.body.as_bytes(), &mut on).unwrap();
    parser.finish(&mut on).unwrap();
    frames
}

/// The SSE parser over the whole body in 16 KiB reads (a burst). Returns the items parsed.
#[inline(never)]
fn run_sse_16k(parser: &mut SseParser, s: &Scaled) -> usize {
    let mut items = 0usize;
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        black_box(item);
        items += 1;
        Ok(())
    };
    for read in s.body.as_bytes().chunks(16 * 1024) {
        parser.feed(read, &mut on).unwrap();
    }
    parser.finish(&mut on).unwrap();
    items
}

/// The SSE parser with one frame per read (a paced stream). Returns the items parsed.
#[inline(never)]
fn run_sse_frame(parser: &mut SseParser, s: &Scaled) -> usize {
    let mut items = 0usize;
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        black_box(item);
        items += 1;
        Ok(())
    };
    for frame in &s.frames {
        parser.feed(frame.as_bytes(), &mut on).unwrap();
    }
    parser.finish(&mut on).unwrap();
    items
}

/// A fresh decoder over parsed frames, its output drained after every frame as the gateway does. Returns the
/// events decoded.
#[inline(never)]
fn run_decoder(proto: Proto, frames: &[(String, String)], out: &mut Vec<Event>) -> usize {
    let mut decoder = proto.decoder();
    let mut n = 0usize;
    for (event, data) in frames {
        decoder.frame(event, data, out);
        n += out.len();
        black_box(&*out);
        out.clear();
    }
    decoder.end(out);
    out.clear();
    n
}

/// Parser, decoder, `event_to_pb` and protobuf encoding, one frame per read. Returns the bytes encoded.
#[inline(never)]
fn run_whole_path(
    proto: Proto,
    s: &Scaled,
    info: &ModelInfo,
    out: &mut Vec<Event>,
    wire: &mut Vec<u8>,
) -> usize {
    let mut parser = SseParser::new();
    let mut decoder = proto.decoder();
    let mut bytes = 0usize;
    for frame in &s.frames {
        let mut on = |item: SseItem<'_>| -> Result<(), ()> {
            match item {
                SseItem::Event { event, data } => decoder.frame(event, data, out),
                SseItem::BareJson(json) => decoder.bare_json(json, out),
                SseItem::Comment => {}
            }
            Ok(())
        };
        parser.feed(frame.as_bytes(), &mut on).unwrap();
        for ev in out.drain(..) {
            let msg = llm_gateway::convert::event_to_pb(ev, info);
            wire.clear();
            msg.encode(wire).unwrap();
            bytes += wire.len();
        }
    }
    bytes
}

/// The SSE parser alone: the whole body in 16 KiB reads (a burst), and one frame per read (a paced stream).
fn sse_parser(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse_parser");
    for (proto, s) in streams() {
        group.throughput(Throughput::Elements(s.frames.len() as u64));
        group.bench_with_input(BenchmarkId::new("16KiB_reads", proto.name()), &s, |b, s| {
            let mut parser = SseParser::new();
            b.iter(|| run_sse_16k(&mut parser, s));
        });
        group.bench_with_input(
            BenchmarkId::new("frame_per_read", proto.name()),
            &s,
            |b, s| {
                let mut parser = SseParser::new();
                b.iter(|| run_sse_frame(&mut parser, s));
            },
        );
    }
    group.finish();
}

/// Each decoder alone, fed frames already parsed (event name and data), its output drained after every frame as
/// the gateway does.
fn decoders(c: &mut Criterion) {
    let mut group = c.benchmark_group("decoder");
    for (proto, s) in streams() {
        let frames = parsed_frames(&s);
        group.throughput(Throughput::Elements(s.deltas as u64));
        group.bench_with_input(
            BenchmarkId::new("text_deltas", proto.name()),
            &frames,
            |b, frames| {
                let mut out: Vec<Event> = Vec::with_capacity(16);
                b.iter(|| run_decoder(proto, frames, &mut out));
            },
        );
    }
    group.finish();
}

/// The gateway's per-event work in one process: one frame per read through the parser and the decoder, each event
/// converted to its `StreamResponse` and encoded as protobuf (what tonic then frames and writes). No I/O.
fn whole_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_decode_encode");
    for (proto, s) in streams() {
        let info = model(proto);
        group.throughput(Throughput::Elements(s.deltas as u64));
        group.bench_with_input(BenchmarkId::new("text_deltas", proto.name()), &s, |b, s| {
            let mut out: Vec<Event> = Vec::with_capacity(16);
            let mut wire: Vec<u8> = Vec::with_capacity(1024);
            b.iter(|| run_whole_path(proto, s, &info, &mut out, &mut wire));
        });
    }
    group.finish();
}

/// A Bedrock ConverseStream body of `deltas` text deltas, framed as the service frames it (each payload with its
/// `p` padding field), one `Vec` per message.
fn bedrock_messages(deltas: usize) -> Vec<Vec<u8>> {
    let event = |kind: &str, payload: String| {
        encode(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.as_bytes(),
        )
    };
    let mut out = vec![event(
        "messageStart",
        r#"{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS","role":"assistant"}"#.into(),
    )];
    for i in 0..deltas {
        out.push(event(
            "contentBlockDelta",
            format!(
                r#"{{"contentBlockIndex":0,"delta":{{"text":" tok{i}"}},"p":"abcdefghijklmnopqr"}}"#
            ),
        ));
    }
    out.push(event(
        "contentBlockStop",
        r#"{"contentBlockIndex":0,"p":"abcdefgh"}"#.into(),
    ));
    out.push(event(
        "messageStop",
        r#"{"p":"abcdefghijk","stopReason":"end_turn"}"#.into(),
    ));
    out.push(event(
        "metadata",
        r#"{"metrics":{"latencyMs":412},"p":"abcdefghijklmnopq","usage":{"inputTokens":18,"outputTokens":10000,"totalTokens":10018}}"#.into(),
    ));
    out
}

/// The eventstream framing then the Bedrock decoder, over `reads`, output drained per read. Returns the events.
#[inline(never)]
fn run_bedrock(reads: &[&[u8]], out: &mut Vec<Event>) -> usize {
    let mut framing = EventStreamDecoder::new();
    let mut decoder = BedrockDecoder::new();
    let mut n = 0usize;
    for read in reads {
        framing
            .feed(read, &mut |m| decoder.message(&m, out))
            .unwrap();
        n += out.len();
        black_box(&*out);
        out.clear();
    }
    framing.finish().unwrap();
    n
}

/// The Bedrock path beside the SSE ones: the binary eventstream framing plus the decoder (Bedrock has no separate
/// parser stage to compare), in 16 KiB reads and one message per read; throughput in text deltas.
fn bedrock(c: &mut Criterion) {
    let messages = bedrock_messages(DELTAS);
    let body: Vec<u8> = messages.concat();
    let mut group = c.benchmark_group("decoder");
    group.throughput(Throughput::Elements(DELTAS as u64));
    let per_message: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let burst: Vec<&[u8]> = body.chunks(16 * 1024).collect();
    for (name, reads) in [
        ("bedrock_message_per_read", &per_message),
        ("bedrock_16KiB_reads", &burst),
    ] {
        group.bench_with_input(BenchmarkId::new("text_deltas", name), reads, |b, reads| {
            let mut out: Vec<Event> = Vec::with_capacity(16);
            b.iter(|| run_bedrock(reads, &mut out));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = sse_parser, decoders, whole_path, bedrock
}

/// Profile mode: runs the workload `spec` (`<workload>/<protocol>`) once inside [`profiled_run`] and prints what
/// divides the instruction count: SSE frames for the parser workloads, text deltas for the others.
fn profile(spec: &str) {
    let (workload, name) = spec
        .split_once('/')
        .expect("DECODE_PROFILE=<workload>/<protocol>");
    let proto = *Proto::ALL
        .iter()
        .find(|p| p.name() == name)
        .expect("protocol: openai_chat, openai_responses, anthropic or gemini");
    let s = scaled(proto, DELTAS).expect("fixture");
    let frames = parsed_frames(&s);
    let info = model(proto);
    let per = match workload {
        "sse_16k" | "sse_frame" => s.frames.len(),
        "decoder" | "whole_path" => s.deltas,
        other => panic!("unknown workload {other}"),
    };
    let result = profiled_run(workload, proto, &s, &frames, &info);
    println!("{spec}: {per} events (result {result})");
}

/// The one function profile mode collects instructions in (`--toggle-collect='*profiled_run*'`).
#[inline(never)]
fn profiled_run(
    workload: &str,
    proto: Proto,
    s: &Scaled,
    frames: &[(String, String)],
    info: &ModelInfo,
) -> usize {
    let mut out: Vec<Event> = Vec::with_capacity(16);
    let mut wire: Vec<u8> = Vec::with_capacity(1024);
    let mut parser = SseParser::new();
    match workload {
        "sse_16k" => run_sse_16k(&mut parser, s),
        "sse_frame" => run_sse_frame(&mut parser, s),
        "decoder" => run_decoder(proto, frames, &mut out),
        _ => run_whole_path(proto, s, info, &mut out, &mut wire),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("DECODE_PROFILE") {
        profile(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
