//! Any bytes, split into two reads at any point, through the eventstream framing and the Bedrock decoder: never a
//! panic, the same messages whatever the split, and a stream the decoder finished is well formed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_gateway::adapter::Decoder;
use llm_gateway::adapter::bedrock::BedrockDecoder;
use llm_gateway::adapter::eventstream::EventStreamDecoder;
use llm_gateway::adapter::invariants;
use llm_gateway::event::Event;

/// The events and whether the framing failed, for `bytes` fed in reads split at `cuts`.
fn run(bytes: &[u8], cut: usize) -> (Vec<Event>, bool) {
    let mut framing = EventStreamDecoder::with_limit(64 * 1024);
    let mut decoder = BedrockDecoder::new();
    let mut out = Vec::new();
    let mut failed = false;
    for read in [&bytes[..cut], &bytes[cut..]] {
        let fed = framing.feed(read, &mut |m| {
            if !decoder.is_done() {
                decoder.message(&m, &mut out);
            }
        });
        if fed.is_err() {
            failed = true;
            break;
        }
    }
    if !failed {
        failed = framing.finish().is_err();
        if !decoder.is_done() {
            decoder.end(&mut out);
        }
    }
    (out, failed)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let cut = usize::from(first) * bytes.len() / 255;
    let (split, split_failed) = run(bytes, cut);
    let (whole, whole_failed) = run(bytes, bytes.len());
    assert_eq!(split_failed, whole_failed);
    if !whole_failed {
        assert_eq!(split, whole);
        if let Err(e) = invariants::check(&whole) {
            panic!("{e}: {whole:?}");
        }
    }
});
