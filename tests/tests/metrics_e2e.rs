//! Both services' `/metrics` endpoints after a two-step tool conversation run through two real service processes:
//! the GenAI client metrics on both sides, and the processor's own steps, tool calls and Redis latency; and every
//! metric the Grafana dashboard (deploy/grafana/llm-platform.json) queries is one these scrapes expose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use e2e_tests::processor::{PROCESSOR_TOKEN, prompt, redis_url};
use e2e_tests::{Bearer, TOKEN};
use fake_provider::openai_sse::ChatStream;
use fake_provider::{FakeProvider, Reply};
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// Starts `bin` and waits for every line prefix in `ready` on its stderr; returns the rest of each line, in order.
async fn spawn(
    bin: &str,
    config: &std::path::Path,
    envs: &[(&str, String)],
    ready: &[&str],
) -> (Child, Vec<String>) {
    let mut cmd = Command::new(bin);
    cmd.arg(config).stderr(Stdio::piped()).kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addrs = tokio::time::timeout(Duration::from_secs(20), async {
        let mut found: Vec<Option<String>> = vec![None; ready.len()];
        while found.iter().any(Option::is_none) {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("service exited before listening");
            for (i, prefix) in ready.iter().enumerate() {
                if let Some(a) = line.strip_prefix(prefix) {
                    found[i] = Some(a.to_string());
                }
            }
        }
        found.into_iter().map(Option::unwrap).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addrs)
}

/// `GET /metrics` over a raw connection; the body of a 200 reply.
async fn scrape(addr: &str) -> String {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    sock.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    reply
}

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
    fake.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-m1")
            .tool_call("call_l1", "list", &["{}"])
            .finish("tool_calls", Some((100, 10))),
    ));
    fake.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-m2")
            .text(&["Two ", "files."])
            .finish("stop", Some((200, 5))),
    ));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/w")).unwrap();
    std::fs::write(dir.path().join("ws/w/a.txt"), "a").unwrap();
    let gw_config = dir.path().join("gateway.toml");
    std::fs::write(
        &gw_config,
        format!("[server]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\n", fake.base_url()),
    )
    .unwrap();
    let gw_env = vec![
        ("RUST_LOG", "warn".to_string()),
        ("GATEWAY_AUTH_TOKENS", TOKEN.to_string()),
    ];
    let (_gw, gw_addrs) = spawn(
        env!("CARGO_BIN_EXE_gateway_replica"),
        &gw_config,
        &gw_env,
        &["llm-gateway listening on ", "llm-gateway metrics on "],
    )
    .await;
    let (gw_addr, gw_metrics) = (&gw_addrs[0], &gw_addrs[1]);

    let sp_config = dir.path().join("processor.toml");
    let prefix = format!("e2e:{}:", session_processor::ids::new("metrics"));
    std::fs::write(
        &sp_config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[gateway]\nurl = \"http://{gw_addr}\"\n[redis]\nprefix = \"{prefix}\"\n[titles]\nenabled = false\n[agents.default]\nmodel = \"openai/gpt-4o\"\ntools = [\"list\"]\n"
        ),
    )
    .unwrap();
    // The processor's listener comes from the environment, to cover that path too.
    let sp_env = vec![
        ("RUST_LOG", "warn".to_string()),
        ("PROCESSOR_METRICS_LISTEN", "127.0.0.1:0".to_string()),
        ("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN.to_string()),
        ("GATEWAY_TOKEN", TOKEN.to_string()),
        ("REDIS_URL", redis_url()),
        (
            "PROCESSOR_WORKSPACE_ROOT",
            dir.path().join("ws").to_string_lossy().to_string(),
        ),
    ];
    let (_sp, sp_addrs) = spawn(
        env!("CARGO_BIN_EXE_processor_replica"),
        &sp_config,
        &sp_env,
        &[
            "session-processor listening on ",
            "session-processor metrics on ",
        ],
    )
    .await;
    let (sp_addr, sp_metrics) = (&sp_addrs[0], &sp_addrs[1]);

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{sp_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c =
        SessionServiceClient::with_interceptor(channel, Bearer(Some(PROCESSOR_TOKEN.into())));
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let mut stream = c
        .prompt(prompt(&s.id, "How many files?"))
        .await
        .unwrap()
        .into_inner();
    while let Some(ev) = stream.message().await.unwrap() {
        if matches!(
            ev.event.and_then(|e| e.event),
            Some(spb::session_event::Event::Done(_))
        ) {
            break;
        }
    }

    let gw = scrape(gw_metrics).await;
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
    let mut sp = scrape(sp_metrics).await;
    for _ in 0..50 {
        if value(&sp, "session_processor_active_sessions", &[]) == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        sp = scrape(sp_metrics).await;
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
