use super::*;

fn labels() -> ModelLabels {
    ModelLabels {
        provider: "openai".into(),
        model: "openai/gpt-4o".into(),
    }
}

#[test]
fn a_generation_is_recorded_with_bounded_labels() {
    let m = Metrics::new();
    m.generation_started();
    m.first_event(&labels(), Duration::from_millis(120));
    m.provider_error(&labels(), "rate_limited");
    m.generation_ended(&Ended {
        labels: &labels(),
        outcome: Outcome::Ok,
        duration: Duration::from_millis(900),
        overhead: Duration::from_micros(300),
        error_kind: None,
        usage: Some(Usage {
            input: 10,
            cache_read: 20,
            cache_write: 0,
            output: 5,
            reasoning: 1,
        }),
        cost_nano_usd: Some(1234),
    });
    m.rejected("invalid_argument");
    let text = m.encode();
    for line in [
        "llm_gateway_requests_total{provider=\"openai\",model=\"openai/gpt-4o\",outcome=\"ok\"} 1",
        "llm_gateway_provider_errors_total{provider=\"openai\",model=\"openai/gpt-4o\",kind=\"rate_limited\"} 1",
        "llm_gateway_tokens_total{provider=\"openai\",model=\"openai/gpt-4o\",type=\"cache_read\"} 20",
        "llm_gateway_cost_nano_usd_total{provider=\"openai\",model=\"openai/gpt-4o\"} 1234",
        "llm_gateway_time_to_first_event_seconds_count{provider=\"openai\",model=\"openai/gpt-4o\"} 1",
        "llm_gateway_stream_duration_seconds_count{provider=\"openai\",model=\"openai/gpt-4o\",outcome=\"ok\"} 1",
        "llm_gateway_overhead_seconds_count{provider=\"openai\",model=\"openai/gpt-4o\"} 1",
        "llm_gateway_inflight_generations 0",
        "llm_gateway_rejected_total{reason=\"invalid_argument\"} 1",
        "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"openai/gpt-4o\",gen_ai_token_type=\"input\"} 30.0",
        "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"openai/gpt-4o\",gen_ai_token_type=\"output\"} 6.0",
        "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"openai/gpt-4o\"} 1",
        "gen_ai_client_time_to_first_chunk_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"openai/gpt-4o\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
}

#[tokio::test]
async fn the_endpoint_serves_metrics_and_nothing_else() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let metrics = Arc::new(Metrics::new());
    metrics.rejected("busy");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(metrics, listener, async move {
        let _ = stop_rx.await;
    }));
    for (request, status, needle) in [
        (
            "GET /metrics",
            "200",
            "llm_gateway_rejected_total{reason=\"busy\"} 1",
        ),
        ("GET /", "404", "metrics are at /metrics"),
        ("POST /metrics", "405", "only GET"),
    ] {
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(
            format!(
                "{request} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut reply = String::new();
        sock.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with(&format!("HTTP/1.1 {status}")), "{reply}");
        assert!(reply.contains(needle), "{reply}");
    }
    stop_tx.send(()).unwrap();
    server.await.unwrap();
}
