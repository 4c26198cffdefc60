use super::*;

#[test]
fn steps_tools_and_store_calls_are_recorded() {
    let m = Metrics::new();
    m.loop_started();
    m.step(
        "tool_calls",
        "openai/gpt-4o",
        Duration::from_millis(50),
        (10, 5),
        None,
    );
    m.compaction(true);
    m.tool_call(ToolKind::Builtin, ToolOutcome::Completed);
    m.redis("put_part", Duration::from_micros(300));
    m.prompt_phase(PromptPhase::FirstEvent, Duration::from_micros(900));
    let text = m.encode();
    for line in [
        "session_processor_active_sessions 1",
        "session_processor_steps_total{finish=\"tool_calls\"} 1",
        "session_processor_compactions_total{trigger=\"auto\"} 1",
        "session_processor_tool_calls_total{kind=\"builtin\",outcome=\"completed\"} 1",
        "session_processor_redis_seconds_count{op=\"put_part\"} 1",
        "session_processor_prompt_phase_seconds_count{phase=\"first_event\"} 1",
        "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"openai/gpt-4o\",gen_ai_token_type=\"input\"} 10.0",
        "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"openai/gpt-4o\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
}

#[test]
fn the_store_traffic_is_exported_once_named() {
    let m = Metrics::new();
    assert!(
        !m.encode().contains(REDIS_REQUESTS),
        "nothing before a store is named"
    );
    m.count_store_traffic(Arc::new(crate::store::Traffic::default()));
    let text = m.encode();
    for line in [
        "session_processor_redis_requests_total 0",
        "session_processor_redis_waits_total{outcome=\"acknowledged\"} 0",
        "session_processor_redis_waits_total{outcome=\"short\"} 0",
        "session_processor_redis_waits_total{outcome=\"skipped\"} 0",
        "session_processor_event_log_polls_total 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
}

#[test]
fn a_label_value_seen_again_counts_in_the_same_series() {
    let m = Metrics::new();
    for op in ["put_part", "put_message", "put_part"] {
        m.redis(op, Duration::from_micros(300));
    }
    m.prompt_phase(PromptPhase::Begun, Duration::from_micros(100));
    m.prompt_phase(PromptPhase::Begun, Duration::from_micros(200));
    let text = m.encode();
    for line in [
        "session_processor_redis_seconds_count{op=\"put_part\"} 2",
        "session_processor_redis_seconds_count{op=\"put_message\"} 1",
        "session_processor_prompt_phase_seconds_count{phase=\"begun\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
    let series = text
        .lines()
        .filter(|l| l.starts_with("session_processor_redis_seconds_count"))
        .count();
    assert_eq!(series, 2, "one series per value\n{text}");
}
