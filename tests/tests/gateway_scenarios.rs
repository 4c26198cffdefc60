//! The scenario suite every language adapter must pass, through the real gRPC server against fake providers that
//! replay wire-exact fixtures: text with usage, parallel tool calls in fragments, reasoning then text, an error after
//! HTTP 200, 429 then success, context overflow, a stall, and the caller cancelling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use e2e_tests::*;
use fake_provider::{FakeProvider, Reply};
use llm_proto::gateway as pb;

/// One protocol under test.
#[derive(Clone, Copy)]
struct Proto {
    /// Fixture folder under shared/fake-provider/fixtures.
    dir: &'static str,
    /// Model id served by that protocol's fake provider.
    model: &'static str,
}

const OPENAI: Proto = Proto {
    dir: "openai_chat",
    model: "openai/gpt-4o",
};
const ANTHROPIC: Proto = Proto {
    dir: "anthropic",
    model: "anthropic/claude-sonnet-4-5",
};

impl Proto {
    fn fake<'h>(&self, h: &'h Harness) -> &'h FakeProvider {
        if self.dir == "anthropic" {
            &h.anthropic
        } else {
            &h.openai
        }
    }
    fn fixture(&self, name: &str) -> Reply {
        Reply::fixture(&format!("{}/{name}", self.dir))
    }
    fn error_body(&self, name: &str) -> String {
        let path = format!(
            "{}/../shared/fake-provider/fixtures/{}/errors/{name}",
            env!("CARGO_MANIFEST_DIR"),
            self.dir
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }
}

async fn run(h: &Harness, p: Proto, g: pb::Generation) -> Vec<String> {
    let _ = p;
    render(&h.stream(g).await.expect("stream starts"))
}

// ---------------------------------------------------------------------------------------------------------------
// OpenAI Chat Completions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_text_with_usage() {
    let h = Harness::start().await;
    OPENAI.fake(&h).push(OPENAI.fixture("text.sse"));
    let lines = run(&h, OPENAI, generation(OPENAI.model, "Say hello")).await;
    assert_eq!(lines, expected::OPENAI_TEXT, "{lines:#?}");
    assert_well_formed(&lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_parallel_tool_calls_in_fragments() {
    let h = Harness::start().await;
    OPENAI
        .fake(&h)
        .push(OPENAI.fixture("parallel_tools.sse").split_every(7));
    let lines = run(&h, OPENAI, tools_generation(OPENAI.model)).await;
    assert_eq!(lines, expected::OPENAI_PARALLEL_TOOLS, "{lines:#?}");
    assert_well_formed(&lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_reasoning_then_text() {
    let h = Harness::start().await;
    OPENAI.fake(&h).push(OPENAI.fixture("reasoning.sse"));
    let lines = run(&h, OPENAI, generation(OPENAI.model, "Think first")).await;
    assert_eq!(lines, expected::OPENAI_REASONING, "{lines:#?}");
    assert_well_formed(&lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_stop_with_tool_calls_is_reported_as_tool_calls() {
    let h = Harness::start().await;
    OPENAI
        .fake(&h)
        .push(OPENAI.fixture("stop_with_tool_calls.sse"));
    let lines = run(&h, OPENAI, tools_generation(OPENAI.model)).await;
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("step_finish ToolCalls raw=stop"),
        "{lines:#?}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Anthropic Messages

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_text_with_usage() {
    let h = Harness::start().await;
    ANTHROPIC.fake(&h).push(ANTHROPIC.fixture("text.sse"));
    let lines = run(&h, ANTHROPIC, generation(ANTHROPIC.model, "Say hello")).await;
    assert_eq!(lines, expected::ANTHROPIC_TEXT, "{lines:#?}");
    assert_well_formed(&lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_parallel_tool_calls_in_fragments() {
    let h = Harness::start().await;
    ANTHROPIC
        .fake(&h)
        .push(ANTHROPIC.fixture("parallel_tools.sse").split_every(5));
    let lines = run(&h, ANTHROPIC, tools_generation(ANTHROPIC.model)).await;
    assert_eq!(lines, expected::ANTHROPIC_PARALLEL_TOOLS, "{lines:#?}");
    assert_well_formed(&lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_reasoning_then_text_keeps_the_signature() {
    let h = Harness::start().await;
    ANTHROPIC.fake(&h).push(ANTHROPIC.fixture("reasoning.sse"));
    let lines = run(&h, ANTHROPIC, generation(ANTHROPIC.model, "Think first")).await;
    assert_eq!(lines, expected::ANTHROPIC_REASONING, "{lines:#?}");
    assert_well_formed(&lines);
    let end = lines
        .iter()
        .find(|l| l.starts_with("reasoning_end"))
        .unwrap();
    assert!(
        end.contains("anthropic|anthropic/claude-sonnet-4-5|{\"signature\":"),
        "{end}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_redacted_thinking_is_kept_opaque() {
    let h = Harness::start().await;
    ANTHROPIC
        .fake(&h)
        .push(ANTHROPIC.fixture("redacted_thinking.sse"));
    let lines = run(&h, ANTHROPIC, generation(ANTHROPIC.model, "Think first")).await;
    assert_well_formed(&lines);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("reasoning_end") && l.contains("redacted_data")),
        "{lines:#?}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Faults, for both protocols

const BOTH: [Proto; 2] = [OPENAI, ANTHROPIC];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_after_200_keeps_the_output_and_ends_with_a_typed_error() {
    for p in BOTH {
        let h = Harness::start().await;
        p.fake(&h).push(p.fixture("error_after_200.sse"));
        let lines = run(&h, p, generation(p.model, "hi")).await;
        assert_well_formed(&lines);
        assert!(
            lines.iter().any(|l| l.starts_with("text_delta")),
            "{}: {lines:#?}",
            p.dir
        );
        let last = lines.last().unwrap();
        assert!(
            last.starts_with("error ") && last.contains("retryable=true"),
            "{}: {lines:#?}",
            p.dir
        );
        assert_eq!(
            p.fake(&h).requests().len(),
            1,
            "{}: no retry once output reached the caller",
            p.dir
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_before_any_output_is_retried_without_duplicates() {
    for p in BOTH {
        let h = Harness::start().await;
        p.fake(&h).push(p.fixture("error_first.sse"));
        p.fake(&h).push(p.fixture("text.sse"));
        let lines = run(&h, p, generation(p.model, "Say hello")).await;
        assert_well_formed(&lines);
        assert!(lines[0].ends_with("attempt=2"), "{}: {lines:#?}", p.dir);
        let clean = run(
            &harness_with(p, "text.sse").await,
            p,
            generation(p.model, "Say hello"),
        )
        .await;
        assert_eq!(
            lines[1..],
            clean[1..],
            "{}: same events as a clean run, once",
            p.dir
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_then_success_is_retried_after_the_providers_delay() {
    for p in BOTH {
        let h = Harness::start().await;
        let retry = if p.dir == "anthropic" {
            ("retry-after", "1")
        } else {
            ("retry-after-ms", "150")
        };
        p.fake(&h)
            .push(Reply::json(429, p.error_body("rate_limit.json")).header(retry.0, retry.1));
        p.fake(&h).push(p.fixture("text.sse"));
        let lines = run(&h, p, generation(p.model, "Say hello")).await;
        assert_well_formed(&lines);
        assert!(lines[0].ends_with("attempt=2"), "{}: {lines:#?}", p.dir);
        let reqs = p.fake(&h).requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(
            reqs[0].body, reqs[1].body,
            "the retry sends the same request"
        );
        let waited = reqs[1].received_at - reqs[0].received_at;
        let asked = if p.dir == "anthropic" {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(150)
        };
        assert!(
            waited >= asked,
            "{}: waited {waited:?}, provider asked {asked:?}",
            p.dir
        );
        let deltas: Vec<_> = lines
            .iter()
            .filter(|l| l.starts_with("text_delta"))
            .collect();
        let clean = run(
            &harness_with(p, "text.sse").await,
            p,
            generation(p.model, "Say hello"),
        )
        .await;
        let clean_deltas: Vec<_> = clean
            .iter()
            .filter(|l| l.starts_with("text_delta"))
            .collect();
        assert_eq!(deltas, clean_deltas, "{}: nothing duplicated", p.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_bounded_and_the_error_says_how_many_attempts() {
    let h = Harness::start().await;
    h.openai
        .set_fallback(Reply::json(503, OPENAI.error_body("server_error.json")));
    let events = h.stream(generation(OPENAI.model, "hi")).await.unwrap();
    let lines = render(&events);
    assert_eq!(h.openai.requests().len(), 3, "max_attempts = 3");
    assert!(lines[0].ends_with("attempt=3"), "{lines:#?}");
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!()
    };
    assert!(e.message.contains("after 3 attempts"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_is_recognised_and_not_retried() {
    for (p, body) in [
        (OPENAI, "context_length_exceeded.json"),
        (ANTHROPIC, "prompt_too_long.json"),
    ] {
        let h = Harness::start().await;
        p.fake(&h).push(Reply::json(400, p.error_body(body)));
        let lines = run(&h, p, generation(p.model, "a very long prompt")).await;
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert_eq!(
            lines[1], "error ContextOverflow retryable=false status=400 retry_after_ms=-1",
            "{}",
            p.dir
        );
        assert_eq!(p.fake(&h).requests().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_ends_with_a_timeout_error() {
    for p in BOTH {
        let h = Harness::start().await;
        p.fake(&h).push(p.fixture("text.sse").stall_after(3));
        let started = Instant::now();
        let lines = run(&h, p, generation(p.model, "hi")).await;
        let last = lines.last().unwrap();
        assert!(last.starts_with("error Timeout"), "{}: {lines:#?}", p.dir);
        // idle_ms = 3000 in the test config: the stall is cut at the idle timeout, not the total one.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(p.fake(&h).requests().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_and_malformed_streams_become_typed_errors() {
    for p in BOTH {
        for (fixture, kind) in [
            ("truncated.sse", "error Network"),
            ("malformed.sse", "error ProviderError"),
        ] {
            let h = Harness::start().await;
            p.fake(&h).set_fallback(p.fixture(fixture));
            // The truncated Anthropic stream is cut inside a call of `search`: offered, as a model's calls are.
            let mut g = tools_generation(p.model);
            g.tools.push(pb::Tool {
                name: "search".into(),
                input_schema_json: r#"{"type":"object"}"#.into(),
                ..Default::default()
            });
            let lines = run(&h, p, g).await;
            assert!(
                lines.last().unwrap().starts_with(kind),
                "{}/{fixture}: {lines:#?}",
                p.dir
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_connection_mid_stream_is_a_network_error() {
    for p in BOTH {
        let h = Harness::start().await;
        p.fake(&h).push(p.fixture("text.sse").reset_after(3));
        let lines = run(&h, p, generation(p.model, "hi")).await;
        assert!(
            lines
                .last()
                .unwrap()
                .starts_with("error Network retryable=true"),
            "{}: {lines:#?}",
            p.dir
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_cancelling_closes_the_provider_connection() {
    for p in BOTH {
        let h = Harness::start().await;
        p.fake(&h).push(p.fixture("text.sse").stall_after(4));
        let mut client = h.client().await;
        let stream = client
            .stream(pb::StreamRequest {
                generation: Some(generation(p.model, "hi")),
            })
            .await
            .unwrap()
            .into_inner();
        let after = cancel_after_first_delta(stream, p.fake(&h)).await;
        assert!(
            after < CANCEL_NOTICED,
            "{}: upstream closed {after:?} after the cancel",
            p.dir
        );
    }
}

/// A fresh harness whose provider for `p` will replay `fixture` once.
async fn harness_with(p: Proto, fixture: &str) -> Harness {
    let h = Harness::start().await;
    p.fake(&h).push(p.fixture(fixture));
    h
}

/// Expected event sequences, written from the fixtures by hand: every delta, id and usage figure below can be found
/// in the fixture file it belongs to.
mod expected {
    pub const OPENAI_TEXT: &[&str] = &[
        "stream_start openai openai/gpt-4o attempt=1",
        "step_start",
        "text_start text-0",
        "text_delta text-0 \"Hello\"",
        "text_delta text-0 \"!\"",
        "text_delta text-0 \" How\"",
        "text_delta text-0 \" can\"",
        "text_delta text-0 \" I\"",
        "text_delta text-0 \" help\"",
        "text_delta text-0 \" you\"",
        "text_delta text-0 \" today\"",
        "text_delta text-0 \"?\"",
        "text_end text-0",
        "step_finish Stop raw=stop in=210 cr=1024 cw=0 out=9 rs=0 total=1243 cost=1895000 id=chatcmpl-CkR7qT2mVx9bLwP4nZ0aYs1eHd6uJ model=gpt-4.1-mini-2025-04-14",
    ];
    pub const OPENAI_PARALLEL_TOOLS: &[&str] = &[
        "stream_start openai openai/gpt-4o attempt=1",
        "step_start",
        "tool_input_start call_q5Jd0mXb3RkV8tYpL2wNcHsA get_weather",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"{\\\"\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"city\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"\\\":\\\"\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"Paris\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"\\\",\\\"\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"unit\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"\\\":\\\"c\"",
        "tool_input_delta call_q5Jd0mXb3RkV8tYpL2wNcHsA \"\\\"}\"",
        "tool_input_start call_Wm2Yv7Lx0QaB9cTd4NfKhS1e get_time",
        "tool_input_delta call_Wm2Yv7Lx0QaB9cTd4NfKhS1e \"{\\\"\"",
        "tool_input_delta call_Wm2Yv7Lx0QaB9cTd4NfKhS1e \"timezone\"",
        "tool_input_delta call_Wm2Yv7Lx0QaB9cTd4NfKhS1e \"\\\":\\\"\"",
        "tool_input_delta call_Wm2Yv7Lx0QaB9cTd4NfKhS1e \"Europe/Paris\"",
        "tool_input_delta call_Wm2Yv7Lx0QaB9cTd4NfKhS1e \"\\\"}\"",
        "tool_input_end call_q5Jd0mXb3RkV8tYpL2wNcHsA",
        "tool_call call_q5Jd0mXb3RkV8tYpL2wNcHsA get_weather {\"city\":\"Paris\",\"unit\":\"c\"}",
        "tool_input_end call_Wm2Yv7Lx0QaB9cTd4NfKhS1e",
        "tool_call call_Wm2Yv7Lx0QaB9cTd4NfKhS1e get_time {\"timezone\":\"Europe/Paris\"}",
        "step_finish ToolCalls raw=tool_calls in=152 cr=0 cw=0 out=58 rs=0 total=210 cost=960000 id=chatcmpl-CkR9fW1sGe7hTq3YbN5uXo2aLc8vD model=gpt-4.1-2025-04-14",
    ];
    pub const OPENAI_REASONING: &[&str] = &[
        "stream_start openai openai/gpt-4o attempt=1",
        "step_start",
        "reasoning_start reasoning-0",
        "reasoning_delta reasoning-0 \"Okay\"",
        "reasoning_delta reasoning-0 \", the user\"",
        "reasoning_delta reasoning-0 \" asks for 17\"",
        "reasoning_delta reasoning-0 \" × 3. 17\"",
        "reasoning_delta reasoning-0 \" × 3 = 51.\"",
        // The empty replay metadata records which protocol and model produced the reasoning.
        "reasoning_end reasoning-0 openai_chat|openai/gpt-4o|{}",
        "text_start text-0",
        "text_delta text-0 \"17\"",
        "text_delta text-0 \" × 3\"",
        "text_delta text-0 \" = **51**.\"",
        "text_end text-0",
        "step_finish Stop raw=stop in=32 cr=64 cw=0 out=9 rs=171 total=276 cost=1960000 id=5b2e4c1a-9d7f-4e3b-8a6c-0f1d2e3c4b5a model=deepseek-reasoner",
    ];
    pub const ANTHROPIC_TEXT: &[&str] = &[
        "stream_start anthropic anthropic/claude-sonnet-4-5 attempt=1",
        "step_start",
        "text_start 0",
        // The fixture's `ping` once the answer began: relayed.
        "keep_alive",
        "text_delta 0 \"Hello\"",
        "text_delta 0 \"! The file says \\\"done\\\".\\nAnything else?\"",
        "text_end 0",
        "step_finish Stop raw=end_turn in=25 cr=3840 cw=1210 out=15 rs=0 total=5090 cost=5989500 id=msg_01XFDUDYJgAACzvnptvVoYEL model=claude-sonnet-4-5-20250929",
    ];
    pub const ANTHROPIC_PARALLEL_TOOLS: &[&str] = &[
        "stream_start anthropic anthropic/claude-sonnet-4-5 attempt=1",
        "step_start",
        "text_start 0",
        "text_delta 0 \"I'll check the weather in both cities.\"",
        "text_end 0",
        "tool_input_start toolu_01A09q90qw90lq917835lq9 get_weather",
        // The fixture's `ping` once the answer began: relayed.
        "keep_alive",
        "tool_input_delta toolu_01A09q90qw90lq917835lq9 \"{\\\"city\\\"\"",
        "tool_input_delta toolu_01A09q90qw90lq917835lq9 \": \\\"Par\"",
        "tool_input_delta toolu_01A09q90qw90lq917835lq9 \"is\\\"}\"",
        "tool_input_end toolu_01A09q90qw90lq917835lq9",
        "tool_call toolu_01A09q90qw90lq917835lq9 get_weather {\"city\": \"Paris\"}",
        "tool_input_start toolu_01B7dXq3fJt8mYh2KcLzWp4V get_weather",
        "tool_input_delta toolu_01B7dXq3fJt8mYh2KcLzWp4V \"{\\\"ci\"",
        "tool_input_delta toolu_01B7dXq3fJt8mYh2KcLzWp4V \"ty\\\": \\\"Tokyo\\\", \"",
        "tool_input_delta toolu_01B7dXq3fJt8mYh2KcLzWp4V \"\\\"unit\\\": \\\"celsius\\\"}\"",
        "tool_input_end toolu_01B7dXq3fJt8mYh2KcLzWp4V",
        "tool_call toolu_01B7dXq3fJt8mYh2KcLzWp4V get_weather {\"city\": \"Tokyo\", \"unit\": \"celsius\"}",
        "step_finish ToolCalls raw=tool_use in=612 cr=2048 cw=0 out=131 rs=0 total=2791 cost=4415400 id=msg_01Rk8tSbDcQ5vGnEJmWpHa2N model=claude-sonnet-4-5-20250929",
    ];
    pub const ANTHROPIC_REASONING: &[&str] = &[
        "stream_start anthropic anthropic/claude-sonnet-4-5 attempt=1",
        "step_start",
        "reasoning_start 0",
        "reasoning_delta 0 \"The user asks for 27 * 453.\"",
        "reasoning_delta 0 \"\\n27 * 453 = 27 * 400 + 27 * 53 = 10800 + 1431\"",
        // The fixture's `ping` once the answer began: relayed.
        "keep_alive",
        "reasoning_delta 0 \" = 12231.\"",
        "reasoning_end 0 anthropic|anthropic/claude-sonnet-4-5|{\"signature\":\"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/1Nq8+8UtbwCk1TkAvNg8ZYnOkIoV0NvZc/0RoLjGTYQ4X3bnKxVXUlkQu3Cj4OLmjTy2DmAtFm2ZGxz+OWVrvG3nLkYqKsrB4o2CJqxCfrnhj1tY=\"}",
        "text_start 1",
        "text_delta 1 \"27 × 453 = **12,231**.\"",
        "text_end 1",
        "step_finish Stop raw=end_turn in=48 cr=0 cw=0 out=187 rs=0 total=235 cost=2949000 id=msg_01Jm5Lq2sPzW8vYbT3nKcR7e model=claude-sonnet-4-5-20250929",
    ];
}
