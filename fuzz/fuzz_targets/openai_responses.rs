//! The OpenAI Responses decoder over SSE.
//! A plan byte and the body in; the harness (llm_gateway::adapter::testing::fuzzing) panics on any violation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_gateway::adapter::Protocol;
use llm_gateway::adapter::testing::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::decoder_target(Protocol::OpenaiResponses, data));
