//! The SSE parser alone: any bytes, cut into any reads, parse like the whole body in one read.
//! A plan byte and the body in; the harness (llm_gateway::adapter::testing::fuzzing) panics on any violation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_gateway::adapter::testing::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::sse_target(data));
