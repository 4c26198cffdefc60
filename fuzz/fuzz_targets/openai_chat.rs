//! The OpenAI Chat Completions decoder (OpenAI and every compatible server: OpenRouter, Mistral, Azure) over SSE.
//! A plan byte and the body in; the harness (llm_gateway::adapter::testing::fuzzing) panics on any violation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_gateway::adapter::Protocol;
use llm_gateway::adapter::testing::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::decoder_target(Protocol::OpenaiChat, data));
