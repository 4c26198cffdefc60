//! Operating the gateway: the Prometheus endpoint after real generations, configuration reload under a live stream,
//! and the global in-flight generation limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::*;
use fake_provider::Reply;
use llm_gateway::generate::ReloadError;
use llm_proto::gateway as pb;
use tonic::Code;
use tonic_types::StatusExt;

const GPT: &str = "openai/gpt-4o";
const LABELS: &str = "provider=\"openai\",model=\"openai/gpt-4o\"";

/// The value of the series `name{labels}` in a scrape.
fn value(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no series {series} in\n{scrape}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_generations_tokens_cost_errors_and_latencies() {
    let h = Harness::start().await;
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    h.openai.push(Reply::json(
        400,
        include_str!(
            "../../shared/fake-provider/fixtures/openai_chat/errors/context_length_exceeded.json"
        ),
    ));
    let ok = render(&h.stream(generation(GPT, "Say hello")).await.unwrap());
    assert!(ok.last().unwrap().starts_with("step_finish"), "{ok:#?}");
    let failed = render(&h.stream(generation(GPT, "too long")).await.unwrap());
    assert!(failed.last().unwrap().starts_with("error ContextOverflow"));

    let m = h.scrape_metrics().await;
    // The fixture's usage: in=210 cr=1024 cw=0 out=9 rs=0, cost 1895000 nano-USD (see gateway_scenarios).
    for (series, expected) in [
        (
            format!("llm_gateway_requests_total{{{LABELS},outcome=\"ok\"}}"),
            1.0,
        ),
        (
            format!("llm_gateway_requests_total{{{LABELS},outcome=\"error\"}}"),
            1.0,
        ),
        (
            format!("llm_gateway_errors_total{{{LABELS},kind=\"context_overflow\"}}"),
            1.0,
        ),
        (
            format!("llm_gateway_provider_errors_total{{{LABELS},kind=\"context_overflow\"}}"),
            1.0,
        ),
        (
            format!("llm_gateway_tokens_total{{{LABELS},type=\"input\"}}"),
            210.0,
        ),
        (
            format!("llm_gateway_tokens_total{{{LABELS},type=\"cache_read\"}}"),
            1024.0,
        ),
        (
            format!("llm_gateway_tokens_total{{{LABELS},type=\"output\"}}"),
            9.0,
        ),
        (
            format!("llm_gateway_tokens_total{{{LABELS},type=\"reasoning\"}}"),
            0.0,
        ),
        (
            format!("llm_gateway_cost_nano_usd_total{{{LABELS}}}"),
            1_895_000.0,
        ),
        // Only the successful generation had a first event.
        (
            format!("llm_gateway_time_to_first_event_seconds_count{{{LABELS}}}"),
            1.0,
        ),
        (
            format!("llm_gateway_stream_duration_seconds_count{{{LABELS},outcome=\"ok\"}}"),
            1.0,
        ),
        (
            format!("llm_gateway_overhead_seconds_count{{{LABELS}}}"),
            2.0,
        ),
        ("llm_gateway_inflight_generations".to_string(), 0.0),
    ] {
        assert_eq!(value(&m, &series), expected, "{series}");
    }
    let ttfe = value(
        &m,
        &format!("llm_gateway_time_to_first_event_seconds_sum{{{LABELS}}}"),
    );
    let duration = value(
        &m,
        &format!("llm_gateway_stream_duration_seconds_sum{{{LABELS},outcome=\"ok\"}}"),
    );
    let overhead = value(&m, &format!("llm_gateway_overhead_seconds_sum{{{LABELS}}}"));
    assert!(
        ttfe > 0.0 && ttfe <= duration,
        "ttfe {ttfe}, duration {duration}"
    );
    // The gateway's own share of each generation is positive and within that generation's duration. The overhead
    // is summed over both generations (the answered and the failed one), so it is held against both durations.
    let failed_duration = value(
        &m,
        &format!("llm_gateway_stream_duration_seconds_sum{{{LABELS},outcome=\"error\"}}"),
    );
    assert!(
        overhead > 0.0 && overhead <= duration + failed_duration,
        "overhead {overhead}, durations {duration} + {failed_duration}"
    );

    // Calls refused before they start are counted by reason, with no caller-chosen label values.
    let _ = h
        .client()
        .await
        .stream(pb::StreamRequest {
            generation: Some(generation("openai/no-such-model-xyz", "hi")),
        })
        .await
        .unwrap_err();
    let m = h.scrape_metrics().await;
    assert_eq!(
        value(&m, "llm_gateway_rejected_total{reason=\"unknown_model\"}"),
        1.0
    );
    assert!(!m.contains("no-such-model-xyz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_stream_is_counted_as_cancelled() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/text.sse").stall_after(4));
    let mut client = h.client().await;
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation(GPT, "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().unwrap();
    drop(stream);
    h.openai
        .wait_closed(0, SHORT)
        .await
        .expect("upstream closed");
    let m = h.scrape_metrics().await;
    assert_eq!(
        value(
            &m,
            &format!("llm_gateway_requests_total{{{LABELS},outcome=\"cancelled\"}}")
        ),
        1.0
    );
    assert_eq!(value(&m, "llm_gateway_inflight_generations"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_changes_the_catalog_without_dropping_a_stream_in_flight() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/text.sse").pace(Duration::from_millis(30)));
    let mut client = h.client().await;
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation(GPT, "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = vec![stream.message().await.unwrap().unwrap()];

    let new_model =
        "[models.\"openai/my-finetune\"]\ncontext_window = 8000\nmax_output_tokens = 512\n";
    assert_eq!(
        client
            .get_model(pb::GetModelRequest {
                model: "openai/my-finetune".into()
            })
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    h.gateway.reload(h.config("", new_model).unwrap()).unwrap();

    while let Some(ev) = stream.message().await.unwrap() {
        events.push(ev);
    }
    let lines = render(&events);
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "the stream in flight finished: {lines:#?}"
    );
    assert_eq!(lines.len(), 14, "nothing lost or repeated: {lines:#?}");

    let m = client
        .get_model(pb::GetModelRequest {
            model: "openai/my-finetune".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(m.model.unwrap().max_output_tokens, 512);
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let lines = render(
        &h.stream(generation("openai/my-finetune", "hi"))
            .await
            .unwrap(),
    );
    assert_eq!(lines[0], "stream_start openai openai/my-finetune attempt=1");
    assert_eq!(h.openai.requests()[1].json()["model"], "my-finetune");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_from_an_invalid_file_keeps_the_running_configuration() {
    let h = Harness::start().await;
    let valid = BASE_CONFIG
        .replace("OPENAI_URL", &h.openai.base_url())
        .replace("ANTHROPIC_URL", &h.anthropic.base_url())
        .replace("GEMINI_URL", &h.gemini.base_url())
        + "\n[models.\"openai/from-file\"]\ncontext_window = 8000\nmax_output_tokens = 512\n";
    let path = std::env::temp_dir().join(format!(
        "gateway-reload-{}-{:?}.toml",
        std::process::id(),
        std::thread::current().id()
    ));
    let env = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("E2E_OPENAI_KEY", OPENAI_KEY),
        ("E2E_ANTHROPIC_KEY", ANTHROPIC_KEY),
        ("E2E_GEMINI_KEY", GEMINI_KEY),
    ];
    std::fs::write(&path, &valid).unwrap();
    h.gateway.reload_from(Some(&path), &env).unwrap();
    assert!(h.gateway.resolve("openai/from-file").is_ok());

    // A hook that would send an auth header: refused, naming the key, and nothing changes.
    std::fs::write(
        &path,
        format!("{valid}\n[[hooks]]\nheaders = {{ authorization = \"Bearer x\" }}\n"),
    )
    .unwrap();
    let err = h.gateway.reload_from(Some(&path), &env).unwrap_err();
    let _ = std::fs::remove_file(&path);
    let ReloadError::Config(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!(e.key, "hooks[0].headers.authorization");
    assert!(
        h.gateway.resolve("openai/from-file").is_ok(),
        "old config kept"
    );
    assert!(h.gateway.config().hooks.is_empty());
    let m = h.scrape_metrics().await;
    assert_eq!(
        value(&m, "llm_gateway_config_reloads_total{result=\"ok\"}"),
        1.0
    );
    assert_eq!(
        value(&m, "llm_gateway_config_reloads_total{result=\"error\"}"),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generations_beyond_the_in_flight_limit_are_resource_exhausted() {
    let h = Harness::start_custom("max_inflight_generations = 1", "").await;
    h.openai
        .push(Reply::fixture("openai_chat/text.sse").stall_after(4));
    let mut client = h.client().await;
    let mut first = client
        .stream(pb::StreamRequest {
            generation: Some(generation(GPT, "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    first.message().await.unwrap().unwrap();

    let err = h
        .client()
        .await
        .generate(pb::GenerateRequest {
            generation: Some(generation(GPT, "hi")),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(err.message(), "too many concurrent generations");
    let details = err.get_error_details();
    assert_eq!(details.error_info().unwrap().reason, "TOO_MANY_GENERATIONS");
    assert!(details.retry_info().is_some());
    assert_eq!(
        h.openai.requests().len(),
        1,
        "the refused call sent nothing"
    );

    // The slot comes back when the first generation goes away.
    drop(first);
    h.openai
        .wait_closed(0, SHORT)
        .await
        .expect("upstream closed");
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let lines = render(&h.stream(generation(GPT, "hi")).await.unwrap());
    assert!(
        lines.last().unwrap().starts_with("step_finish"),
        "{lines:#?}"
    );
    let m = h.scrape_metrics().await;
    assert_eq!(
        value(
            &m,
            "llm_gateway_rejected_total{reason=\"too_many_generations\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_rotates_caller_tokens() {
    let h = Harness::start().await;
    let rotated = "rotated-caller-token-0123456789";
    let list = |token| {
        let h = &h;
        async move {
            h.client_with_token(Some(token))
                .await
                .list_models(pb::ListModelsRequest::default())
                .await
        }
    };
    assert_eq!(
        list(rotated).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    h.gateway
        .reload(
            h.config(&format!("auth_tokens = [\"{rotated}\"]"), "")
                .unwrap(),
        )
        .unwrap();
    assert!(list(rotated).await.is_ok());
    assert!(
        list(TOKEN).await.is_ok(),
        "tokens from the environment stay"
    );
}
