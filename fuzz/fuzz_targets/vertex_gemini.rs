//! The Gemini decoder as Vertex AI uses it, seeded with streamed function-call arguments (partialArgs).
//! A plan byte and the body in; the harness (llm_gateway::adapter::testing::fuzzing) panics on any violation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_gateway::adapter::Protocol;
use llm_gateway::adapter::testing::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::decoder_target(Protocol::VertexGemini, data));
