//! Criterion micro-benchmarks of the gateway's per-event code: the SSE parser, each adapter's decoder, and the two
//! together with the conversion to the wire message, on the recorded fixtures scaled up to many text deltas
//! (bench::fixtures). Throughput is in elements: SSE frames for the parser, text deltas for everything else, so
//! criterion's `elem/s` is events per second on one core.
// Benchmark start-up: a broken fixture should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use bench::fixtures::{Proto, Scaled, scaled};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llm_gateway::adapter::sse::{SseItem, SseParser};
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

/// The SSE parser alone: the whole body in 16 KiB reads (a burst), and one frame per read (a paced stream).
fn sse_parser(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse_parser");
    for (proto, s) in streams() {
        group.throughput(Throughput::Elements(s.frames.len() as u64));
        group.bench_with_input(BenchmarkId::new("16KiB_reads", proto.name()), &s, |b, s| {
            let mut parser = SseParser::new();
            b.iter(|| {
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
            });
        });
        group.bench_with_input(
            BenchmarkId::new("frame_per_read", proto.name()),
            &s,
            |b, s| {
                let mut parser = SseParser::new();
                b.iter(|| {
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
                });
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
        let mut frames: Vec<(String, String)> = Vec::new();
        let mut parser = SseParser::new();
        let mut on = |item: SseItem<'_>| -> Result<(), ()> {
            match item {
                SseItem::Event { event, data } => frames.push((event.to_owned(), data.to_owned())),
                SseItem::BareJson(json) => frames.push((String::new(), json.to_owned())),
            }
            Ok(())
        };
        parser.feed(s.body.as_bytes(), &mut on).unwrap();
        parser.finish(&mut on).unwrap();
        group.throughput(Throughput::Elements(s.deltas as u64));
        group.bench_with_input(
            BenchmarkId::new("text_deltas", proto.name()),
            &frames,
            |b, frames| {
                let mut out: Vec<Event> = Vec::with_capacity(16);
                b.iter(|| {
                    let mut decoder = proto.decoder();
                    let mut n = 0usize;
                    for (event, data) in frames {
                        decoder.frame(event, data, &mut out);
                        n += out.len();
                        black_box(&out);
                        out.clear();
                    }
                    decoder.end(&mut out);
                    out.clear();
                    n
                });
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
            b.iter(|| {
                let mut parser = SseParser::new();
                let mut decoder = proto.decoder();
                let mut bytes = 0usize;
                for frame in &s.frames {
                    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
                        match item {
                            SseItem::Event { event, data } => decoder.frame(event, data, &mut out),
                            SseItem::BareJson(json) => decoder.bare_json(json, &mut out),
                        }
                        Ok(())
                    };
                    parser.feed(frame.as_bytes(), &mut on).unwrap();
                    for ev in out.drain(..) {
                        let msg = llm_gateway::grpc::event_to_pb(ev, &info);
                        wire.clear();
                        msg.encode(&mut wire).unwrap();
                        bytes += wire.len();
                    }
                }
                bytes
            });
        });
    }
    group.finish();
}

fn config() -> Criterion {
    // BENCH_QUICK=1 (make bench): short runs, enough for a figure; the full mode keeps criterion's defaults.
    if std::env::var_os("BENCH_QUICK").is_some() {
        Criterion::default()
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20)
    } else {
        Criterion::default()
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = sse_parser, decoders, whole_path
}
criterion_main!(benches);
