//! The seed corpus replayed on stable: every byte-exact fixture, under a spread of read plans, through the same
//! target functions libFuzzer calls, and every input kept under `fuzz/regressions/<target>/` as it is.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::*;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Plans worth replaying: one read, byte by byte, small and large random reads, each with both limits.
const PLANS: [u8; 12] = [0, 1, 2, 3, 7, 64, 127, 0x80, 0x81, 0x83, 0x90, 0xff];

/// The fixture directories seeding each target, and the file extension of their bodies.
fn seeds_of(target: &str) -> (&'static [&'static str], &'static str) {
    match target {
        "openai_chat" => (&["openai_chat", "azure_chat"], "sse"),
        "openai_responses" => (&["openai_responses", "azure_responses"], "sse"),
        "anthropic" => (&["anthropic", "vertex_anthropic"], "sse"),
        "gemini" => (&["gemini"], "sse"),
        "vertex_gemini" => (&["vertex_gemini", "gemini"], "sse"),
        "bedrock" => (&["bedrock"], "es"),
        "sse" => (
            &[
                "openai_chat",
                "azure_chat",
                "openai_responses",
                "azure_responses",
                "anthropic",
                "vertex_anthropic",
                "gemini",
                "vertex_gemini",
                "selftest",
            ],
            "sse",
        ),
        other => panic!("no seeds for {other}"),
    }
}

fn files(dir: &Path, ext: Option<&str>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| ext.is_none_or(|x| p.extension().and_then(|e| e.to_str()) == Some(x)))
        .collect();
    out.sort();
    out
}

/// The fixture bodies seeding `target`.
fn fixtures(target: &str) -> Vec<PathBuf> {
    let (dirs, ext) = seeds_of(target);
    let out: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| {
            files(
                &Path::new(ROOT)
                    .join("shared/fake-provider/fixtures")
                    .join(d),
                Some(ext),
            )
        })
        .collect();
    assert!(!out.is_empty(), "no fixtures for {target}");
    out
}

/// Runs `run` on `[plan] + body` for every plan and fixture of `target`, then on every regression input.
fn replay(target: &str, run: impl Fn(&[u8])) -> usize {
    let mut count = 0;
    for path in fixtures(target) {
        let body = std::fs::read(&path).unwrap();
        for plan in PLANS {
            let mut input = vec![plan];
            input.extend_from_slice(&body);
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&input)));
            assert!(
                caught.is_ok(),
                "{target}: {} with plan {plan}",
                path.display()
            );
            count += 1;
        }
    }
    for path in files(&Path::new(ROOT).join("fuzz/regressions").join(target), None) {
        let input = std::fs::read(&path).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&input)));
        assert!(caught.is_ok(), "{target}: regression {}", path.display());
        count += 1;
    }
    count
}

#[test]
fn every_decoder_target_passes_its_seed_corpus() {
    for (target, protocol) in TARGETS {
        let n = replay(target, |input| decoder_target(protocol, input));
        assert!(n >= PLANS.len(), "{target}: {n} inputs");
    }
}

#[test]
fn the_sse_target_passes_its_seed_corpus() {
    assert!(replay("sse", sse_target) > PLANS.len());
}

#[test]
fn a_fixture_decodes_to_a_finished_stream_under_the_large_limit_and_an_error_under_the_small_one() {
    let body = std::fs::read(
        Path::new(ROOT).join("shared/fake-provider/fixtures/openai_responses/text.sse"),
    )
    .unwrap();
    let mut d = decoder(Protocol::OpenaiResponses);
    let out = decode(
        Protocol::OpenaiResponses,
        d.as_mut(),
        &reads(7, &body),
        limit(7),
    );
    assert!(matches!(out.last(), Some(Event::Finish(_))), "{out:#?}");
    let mut d = decoder(Protocol::OpenaiResponses);
    let out = decode(
        Protocol::OpenaiResponses,
        d.as_mut(),
        &reads(0x87, &body),
        limit(0x87),
    );
    match out.last() {
        Some(Event::Error(e)) => assert!(e.message.contains("max_sse_event_bytes"), "{e:?}"),
        other => panic!("want the over-limit error, got {other:?}"),
    }
}

#[test]
fn reads_join_back_into_the_body_and_respect_the_plan() {
    let body: Vec<u8> = (0..=255).cycle().take(5000).collect();
    for plan in 0..=255u8 {
        let r = reads(plan, &body);
        assert_eq!(r.concat(), body, "plan {plan}");
        let most = usize::from(plan & 0x7f);
        if most == 0 {
            assert_eq!(r.len(), 1);
        } else {
            assert!(
                r.iter().all(|x| !x.is_empty() && x.len() <= most),
                "plan {plan}"
            );
        }
    }
    assert!(reads(5, &[]).is_empty());
}

/// Found by the `sse` target: a `data:` line of invalid UTF-8 under the limit in raw bytes grew to three times the
/// limit once each bad byte became U+FFFD, and whether the cap caught it depended on where the reads were cut. The
/// cap now counts decoded bytes.
#[test]
fn invalid_utf8_counts_at_its_decoded_size_whatever_the_reads() {
    let mut body = b"data: ".to_vec();
    body.extend(std::iter::repeat_n(0xbd_u8, 300));
    body.extend_from_slice(b"\ndata: x\n\n");
    for plan in [0x80, 0x81, 0x87, 0xff] {
        let (items, overflowed) = parse_sse(&reads(plan, &body), SMALL_LIMIT);
        assert!(overflowed && items.is_empty(), "plan {plan}: {items:?}");
    }
    let (items, overflowed) = parse_sse(&[&body], LARGE_LIMIT);
    assert!(!overflowed);
    assert_eq!(items.len(), 1);
    let mut input = vec![0x83];
    input.extend_from_slice(&body);
    sse_target(&input);
}

/// Found by the `anthropic` target: a `content_block_start` for an index already used (here after the block was
/// closed) reopened block id "0", a block id opened twice. It is now a typed `provider_error`.
#[test]
fn anthropic_refuses_a_block_index_started_twice() {
    let start =
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    let delta =
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}"#;
    let stop = r#"{"type":"content_block_stop","index":0}"#;
    for frames in [vec![start, delta, stop, start], vec![start, start]] {
        let mut d = decoder(Protocol::Anthropic);
        let mut out = Vec::new();
        for data in frames {
            if !d.is_done() {
                d.frame("", data, &mut out);
            }
        }
        assert_eq!(invariants::check(&out), Ok(()), "{out:#?}");
        match out.last() {
            Some(Event::Error(e)) => assert!(e.message.contains("started twice"), "{e:?}"),
            other => panic!("want the error, got {other:?}"),
        }
    }
}

/// Feeds `(event, data)` frames to a fresh decoder of `protocol` until it is done, checks the unified stream's
/// invariants, and returns the terminal error's message.
fn refused_with(protocol: Protocol, frames: &[(&str, &str)]) -> String {
    let mut d = decoder(protocol);
    let mut out = Vec::new();
    for (event, data) in frames {
        if !d.is_done() {
            d.frame(event, data, &mut out);
        }
    }
    assert_eq!(invariants::check(&out), Ok(()), "{out:#?}");
    match out.last() {
        Some(Event::Error(e)) => e.message.clone(),
        other => panic!("want the error, got {other:?}"),
    }
}

/// Found by the `bedrock` target: a text delta for a block index whose block had stopped opened block id "0" a
/// second time (Bedrock opens text blocks with their first delta). It is now a typed `provider_error`.
#[test]
fn bedrock_refuses_a_block_index_used_after_its_stop() {
    let delta = (
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"text":"a"}}"#,
    );
    let stop = ("contentBlockStop", r#"{"contentBlockIndex":0}"#);
    let tool = (
        "contentBlockStart",
        r#"{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t1","name":"f"}}}"#,
    );
    assert!(refused_with(Protocol::Bedrock, &[delta, stop, delta]).contains("after its stop"));
    assert!(refused_with(Protocol::Bedrock, &[delta, stop, tool]).contains("started twice"));
}

/// Found by the `openai_responses` target: a text delta for a message item already done reopened its block (the
/// item's id). Anything more about a done item is now a typed `provider_error`.
#[test]
fn openai_responses_refuses_more_about_a_done_item() {
    let delta = (
        "response.output_text.delta",
        r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}"#,
    );
    let done = (
        "response.output_item.done",
        r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"a"}]}}"#,
    );
    assert!(
        refused_with(Protocol::OpenaiResponses, &[delta, done, delta]).contains("which is done")
    );
    assert!(
        refused_with(Protocol::OpenaiResponses, &[delta, done, done]).contains("which is done")
    );
    // Found next by the same target: two reasoning items without an id both opened the block "".
    let nameless = (
        "response.output_item.done",
        r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"reasoning","summary":[{"type":"summary_text","text":"x"}]}}"#,
    );
    assert!(
        refused_with(Protocol::OpenaiResponses, &[nameless, nameless]).contains("without an id")
    );
}
