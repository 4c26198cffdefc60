//! Both services' `/metrics` endpoints after a two-step tool conversation run through two real service processes:
//! the GenAI client metrics on both sides, and the processor's own steps, tool calls and Redis latency; and every
//! metric the Grafana dashboard (deploy/grafana/llm-platform.json) queries is one these scrapes expose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::TOKEN;
use e2e_tests::processor::PROCESSOR_TOKEN;
use e2e_tests::stack::{Stack, StackSetup, push_list_files};
use fake_provider::FakeProvider;

/// The value of the sample whose name and labels start with `prefix` (labels in encoding order), summed over
/// every matching series.
fn value(text: &str, series: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(name, _)| {
            (name.starts_with(&format!("{series}{{")) || *name == series)
                && labels.iter().all(|want| name.contains(want))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

/// The metric names a PromQL expression reads: identifiers that are not functions, keywords, label names (inside
/// `{}` or `by (...)`), ranges, numbers, strings or `$variables`.
fn promql_metrics(expr: &str) -> Vec<String> {
    // Followed by a parenthesised list of label names (optional for group_left / group_right).
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    // Aggregations (`sum by (le) (...)` puts the grouping between the name and its parenthesis) and operators.
    const KEYWORDS: [&str; 17] = [
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let (mut out, mut i, mut skip_group) = (Vec::new(), 0, false);
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '"' => Some('"'),
            '{' => Some('}'),
            '[' => Some(']'),
            '(' if skip_group => Some(')'),
            _ => None,
        };
        if let Some(close) = close {
            skip_group = false;
            i += chars[i + 1..].iter().position(|&x| x == close).unwrap() + 2;
        } else if c == '$' || c.is_ascii_digit() {
            // A variable or a number (1e9 included): skip the whole token.
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_.{}".contains(chars[i]))
            {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            skip_group = GROUPING.contains(&word.as_str());
            if !skip_group && next != Some(&'(') && !KEYWORDS.contains(&word.as_str()) {
                out.push(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Whether a scrape exposes `name`: as a sample, or as the `_total` of a counter or the `_bucket`, `_sum` or
/// `_count` of a histogram family declared by a `# TYPE` line (families without samples yet included).
fn exposes(scrape: &str, name: &str) -> bool {
    let declared = |family: &str, kind: &str| {
        scrape
            .lines()
            .any(|l| l == format!("# TYPE {family} {kind}"))
    };
    let histogram = ["_bucket", "_sum", "_count"].iter().any(|s| {
        name.strip_suffix(s)
            .is_some_and(|f| declared(f, "histogram"))
    });
    let counter = name
        .strip_suffix("_total")
        .is_some_and(|f| declared(f, "counter"));
    histogram || counter || declared(name, "gauge")
}

#[test]
fn promql_metric_names_are_found() {
    let expr = r#"histogram_quantile(0.95, sum by (le, op) (rate(session_processor_redis_seconds_bucket{job="session-processor", namespace=~"$namespace"}[$__rate_interval]))) * 3600 / 1e9 + on (pod) group_left llm_gateway_inflight_generations"#;
    assert_eq!(
        promql_metrics(expr),
        [
            "session_processor_redis_seconds_bucket",
            "llm_gateway_inflight_generations"
        ]
    );
}

/// The counters this conversation leaves without series: prometheus-client writes nothing, not even `# TYPE`, for
/// a family without one, so their exported names are taken from the services' own constants (plus the `_total`
/// a counter gets) instead of the scrape. The test checks that they are indeed absent from the scrapes, so a name
/// the run does produce is always checked against the scrape.
fn without_series() -> Vec<String> {
    use llm_gateway::metrics as gw;
    use session_processor::metrics as sp;
    [
        gw::ERRORS,
        gw::PROVIDER_ERRORS,
        gw::REJECTED,
        gw::FALLBACKS,
        sp::COMPACTIONS,
    ]
    .iter()
    .map(|family| format!("{family}_total"))
    .collect()
}

/// Every query of the dashboard, with the scrape of the service its `job` label names.
fn check_dashboard(gw: &str, sp: &str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/grafana/llm-platform.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let unproduced = without_series();
    for name in &unproduced {
        assert!(
            !gw.contains(name.as_str()) && !sp.contains(name.as_str()),
            "{name} has series now: drop it from without_series()"
        );
    }
    let mut checked = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let scrape = if expr.contains(r#"job="llm-gateway""#) {
                gw
            } else {
                assert!(expr.contains(r#"job="session-processor""#), "{expr}");
                sp
            };
            let names = promql_metrics(expr);
            assert!(!names.is_empty(), "no metric in {expr}");
            for name in names {
                assert!(
                    exposes(scrape, &name) || unproduced.contains(&name),
                    "panel {}: {name} is not exported\n{expr}",
                    panel["title"]
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "{checked} metric references checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_services_expose_their_metrics_after_a_tool_conversation() {
    let fake = FakeProvider::start().await.unwrap();
    push_list_files(&fake);
    let log = vec![("RUST_LOG", "warn".to_string())];
    // The gateway's metrics listener comes from its file, the processor's from the environment: both paths covered.
    let stack = Stack::start(
        StackSetup {
            label: "metrics",
            gateway_toml: format!(
                "[server]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n",
                fake.base_url()
            ),
            gateway_token: TOKEN,
            processor_token: PROCESSOR_TOKEN,
            gateway_env: log.clone(),
            processor_env: [
                log,
                vec![("PROCESSOR_METRICS_LISTEN", "127.0.0.1:0".to_string())],
            ]
            .concat(),
            gateway_ready: &["llm-gateway metrics on "],
            processor_ready: &["session-processor metrics on "],
        },
        env!("CARGO_BIN_EXE_gateway_replica"),
        env!("CARGO_BIN_EXE_processor_replica"),
    )
    .await;
    stack.ask_how_many_files(None).await;
    let (gw_metrics, sp_metrics) = (&stack.gateway.also[0], &stack.processor.also[0]);

    let gw = e2e_tests::scrape_metrics(gw_metrics.parse().unwrap()).await;
    let model = [
        "gen_ai_operation_name=\"chat\"",
        "gen_ai_provider_name=\"openai\"",
        "gen_ai_request_model=\"openai/gpt-4o\"",
    ];
    for (series, extra, min) in [
        (
            "gen_ai_client_token_usage_sum",
            Some("gen_ai_token_type=\"input\""),
            300.0,
        ),
        (
            "gen_ai_client_token_usage_sum",
            Some("gen_ai_token_type=\"output\""),
            15.0,
        ),
        ("gen_ai_client_operation_duration_seconds_count", None, 2.0),
        ("gen_ai_client_time_to_first_chunk_seconds_count", None, 2.0),
    ] {
        let mut labels = model.to_vec();
        labels.extend(extra);
        let v = value(&gw, series, &labels);
        assert!(v >= min, "gateway {series} {labels:?} = {v}\n{gw}");
    }

    // The gateway's own metrics stay beside the GenAI ones.
    let own = value(
        &gw,
        "llm_gateway_tokens_total",
        &["provider=\"openai\"", "type=\"input\""],
    );
    assert!(own >= 300.0, "llm_gateway_tokens_total = {own}\n{gw}");

    // The loop's last writes (status, done) race the `Done` event on the caller's stream: wait for the gauge to
    // fall back before reading the rest.
    let mut sp = e2e_tests::scrape_metrics(sp_metrics.parse().unwrap()).await;
    for _ in 0..50 {
        if value(&sp, "session_processor_active_sessions", &[]) == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        sp = e2e_tests::scrape_metrics(sp_metrics.parse().unwrap()).await;
    }
    assert_eq!(
        value(&sp, "session_processor_active_sessions", &[]),
        0.0,
        "{sp}"
    );
    for (series, labels, min) in [
        ("session_processor_steps_total", vec![], 2.0),
        (
            "session_processor_steps_total",
            vec!["finish=\"tool_calls\""],
            1.0,
        ),
        (
            "session_processor_tool_calls_total",
            vec!["kind=\"builtin\"", "outcome=\"completed\""],
            1.0,
        ),
        ("session_processor_redis_seconds_count", vec![], 1.0),
        (
            "gen_ai_client_token_usage_sum",
            [model.as_slice(), &["gen_ai_token_type=\"input\""]].concat(),
            300.0,
        ),
        (
            "gen_ai_client_token_usage_sum",
            [model.as_slice(), &["gen_ai_token_type=\"output\""]].concat(),
            15.0,
        ),
        (
            "gen_ai_client_operation_duration_seconds_count",
            model.to_vec(),
            2.0,
        ),
    ] {
        let v = value(&sp, series, &labels);
        assert!(v >= min, "processor {series} {labels:?} = {v}\n{sp}");
    }

    // The standard process metrics, on both scrapes.
    for (service, text) in [("gateway", &gw), ("processor", &sp)] {
        for (series, min) in [
            ("process_resident_memory_bytes", 1.0),
            ("process_virtual_memory_bytes", 1.0),
            ("process_start_time_seconds", 1.0e9),
            ("process_open_fds", 1.0),
            ("process_max_fds", 1.0),
            ("process_threads", 1.0),
            ("process_cpu_seconds_total", 0.0),
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{series} "))),
                "{service} has no {series}\n{text}"
            );
            let v = value(text, series, &[]);
            assert!(v >= min, "{service} {series} = {v}");
        }
    }

    check_dashboard(&gw, &sp);
}
