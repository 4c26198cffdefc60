//! Criterion micro-benchmark of the session-processor's per-event path: `Processor::handle` on text deltas (append to
//! the text part, emit the `Delta` effect the run loop publishes). Throughput is in text deltas.
// Benchmark start-up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use prost_types::Timestamp;
use session_processor::processor::{Effect, Processor};

/// Deltas per assistant message (one batch).
const DELTAS: usize = 1_000;

fn ev(e: gw::stream_response::Event) -> gw::StreamResponse {
    gw::StreamResponse { event: Some(e) }
}

/// A processor that has seen the stream's start and an open text block `t0`.
fn started() -> Processor {
    use gw::stream_response::Event as E;
    let mut p = Processor::new(
        pb::Message {
            id: "msg_bench".into(),
            session_id: "ses_bench".into(),
            role: pb::Role::Assistant as i32,
            model: "bench/paced".into(),
            ..Default::default()
        },
        Some(100_000),
    );
    let now = Timestamp::default();
    let mut out = Vec::new();
    for e in [
        E::StreamStart(gw::StreamStart {
            provider: "bench".into(),
            model: "bench/paced".into(),
            attempt: 1,
            ..Default::default()
        }),
        E::StepStart(gw::StepStart {}),
        E::TextStart(gw::TextStart { id: "t0".into() }),
    ] {
        p.handle(ev(e), now, &mut out);
    }
    p
}

fn deltas() -> Vec<gw::StreamResponse> {
    (0..DELTAS)
        .map(|i| {
            ev(gw::stream_response::Event::TextDelta(gw::TextDelta {
                id: "t0".into(),
                delta: format!(" tok{i}"),
            }))
        })
        .collect()
}

fn handle_text_deltas(c: &mut Criterion) {
    let mut group = c.benchmark_group("processor");
    group.throughput(Throughput::Elements(DELTAS as u64));
    group.bench_function("handle_text_delta", |b| {
        let now = Timestamp {
            seconds: 1_767_225_600,
            nanos: 0,
        };
        b.iter_batched(
            || (started(), deltas()),
            |(mut p, events)| {
                let mut out: Vec<Effect> = Vec::with_capacity(4);
                for e in events {
                    p.handle(e, now, &mut out);
                    // The run loop takes each effect right away.
                    for effect in out.drain(..) {
                        black_box(effect);
                    }
                }
                p
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = handle_text_deltas
}
criterion_main!(benches);
