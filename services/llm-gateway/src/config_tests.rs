use super::*;

const TOKEN: &str = "a-caller-token-of-length";

#[test]
fn env_enables_builtin_providers_with_their_base_urls() {
    let env = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("OPENAI_API_KEY", "sk-test"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
    ];
    let c = Config::from_file(FileConfig::default(), &env).unwrap();
    assert_eq!(c.providers["openai"].base_url, "https://api.openai.com/v1");
    assert_eq!(c.providers["anthropic"].base_url, "http://127.0.0.1:9");
    assert_eq!(c.providers["anthropic"].api_key.expose(), "sk-ant");
    assert!(c.catalog.get("openai/gpt-4o").is_some());
    assert!(c.catalog.get("anthropic/claude-sonnet-4-5").is_some());
    assert!(
        c.catalog.get("demo/scripted").is_none(),
        "unconfigured providers' models are left out"
    );
}

#[test]
fn tls_files_are_checked_and_the_environment_overrides_them() {
    let dir = tempfile::tempdir().unwrap();
    let pki = service_kit::test_certs::generate(dir.path());
    let (cert, key) = (
        pki.server_cert.display().to_string(),
        pki.server_key.display().to_string(),
    );
    struct Vars<'a>(&'a [(&'a str, &'a str)]);
    impl Env for Vars<'_> {
        fn var(&self, name: &str) -> Option<String> {
            let token = (name == "GATEWAY_AUTH_TOKENS").then(|| TOKEN.to_owned());
            token.or_else(|| {
                self.0
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            })
        }
    }
    let load = |server: String, env: &[(&str, &str)]| {
        let file = Config::parse(&format!("[server]\n{server}\n")).unwrap();
        Config::from_file(file, &Vars(env))
    };
    assert!(load(String::new(), &[]).unwrap().tls.is_none());
    let c = load(format!("tls = {}", pki.server_toml(true)), &[]).unwrap();
    assert!(c.tls.unwrap().mutual());
    let c = load(
        String::new(),
        &[
            ("GATEWAY_TLS_CERT_FILE", &cert),
            ("GATEWAY_TLS_KEY_FILE", &key),
        ],
    )
    .unwrap();
    assert!(!c.tls.unwrap().mutual());
    let e = load(
        format!("tls = {{ cert_file = \"{cert}\", key_file = \"/nope.key\" }}"),
        &[],
    )
    .unwrap_err();
    assert_eq!(e.key, "server.tls.key_file");
    let e = load(String::new(), &[("GATEWAY_TLS_CERT_FILE", &cert)]).unwrap_err();
    assert_eq!(e.key, "server.tls.key_file");
}

#[test]
fn no_tokens_is_refused_unless_explicitly_allowed() {
    let err = Config::from_file(FileConfig::default(), &[("X", "")]).unwrap_err();
    assert_eq!(err.key, "server.auth_tokens");
    let file = Config::parse("[server]\nallow_unauthenticated = true\n").unwrap();
    assert!(Config::from_file(file, &[("X", "")]).is_ok());
}

#[test]
fn errors_name_the_key() {
    let env = [("GATEWAY_AUTH_TOKENS", TOKEN)];
    let bad_url =
        Config::parse("[providers.local]\nprotocol = \"openai_chat\"\nbase_url = \"ftp://x\"\n")
            .unwrap();
    assert_eq!(
        Config::from_file(bad_url, &env).unwrap_err().key,
        "providers.local.base_url"
    );
    let missing_key =
            Config::parse("[providers.local]\nprotocol = \"openai_chat\"\nbase_url = \"http://h/v1\"\napi_key_env = \"NOPE\"\n")
                .unwrap();
    assert_eq!(
        Config::from_file(missing_key, &env).unwrap_err().key,
        "providers.local.api_key_env"
    );
    assert!(
        Config::parse("[server]\nlisten_typo = 1\n")
            .unwrap_err()
            .message
            .contains("listen_typo")
    );
    let zero = Config::parse("[timeouts]\nidle_ms = 0\n").unwrap();
    assert_eq!(
        Config::from_file(zero, &env).unwrap_err().key,
        "timeouts.idle_ms"
    );
}

#[test]
fn message_content_capture_is_off_unless_opted_in() {
    let env = [("GATEWAY_AUTH_TOKENS", TOKEN)];
    let off = Config::from_file(FileConfig::default(), &env).unwrap();
    assert!(!off.capture_message_content);
    let file = || Config::parse("[telemetry]\ncapture_message_content = true\n").unwrap();
    assert!(
        Config::from_file(file(), &env)
            .unwrap()
            .capture_message_content
    );
    let var = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
    let env_off = [("GATEWAY_AUTH_TOKENS", TOKEN), (var, "false")];
    assert!(
        !Config::from_file(file(), &env_off)
            .unwrap()
            .capture_message_content
    );
    let env_on = [("GATEWAY_AUTH_TOKENS", TOKEN), (var, "TRUE")];
    assert!(
        Config::from_file(FileConfig::default(), &env_on)
            .unwrap()
            .capture_message_content
    );
    let env_bad = [("GATEWAY_AUTH_TOKENS", TOKEN), (var, "yes please")];
    assert_eq!(
        Config::from_file(FileConfig::default(), &env_bad)
            .unwrap_err()
            .key,
        var
    );
}

#[test]
fn the_http_front_door_is_off_unless_an_address_is_given() {
    let env = [("GATEWAY_AUTH_TOKENS", TOKEN)];
    assert_eq!(
        Config::from_file(FileConfig::default(), &env)
            .unwrap()
            .http_listen,
        None
    );
    let file = Config::parse("[server]\nhttp_listen = \"127.0.0.1:8080\"\n").unwrap();
    let c = Config::from_file(file, &env).unwrap();
    assert_eq!(c.http_listen, Some("127.0.0.1:8080".parse().unwrap()));
    let env_over = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("GATEWAY_HTTP_LISTEN", "0.0.0.0:8081"),
    ];
    let c = Config::from_file(FileConfig::default(), &env_over).unwrap();
    assert_eq!(c.http_listen, Some("0.0.0.0:8081".parse().unwrap()));
    let file = Config::parse("[server]\nhttp_listen = \"nope\"\n").unwrap();
    assert_eq!(
        Config::from_file(file, &env).unwrap_err().key,
        "server.http_listen"
    );
}

#[test]
fn ops_keys_are_validated_and_fallbacks_must_resolve() {
    let env = [("GATEWAY_AUTH_TOKENS", TOKEN), ("OPENAI_API_KEY", "sk-x")];
    let c = Config::from_file(FileConfig::default(), &env).unwrap();
    assert_eq!(c.metrics_listen, None);
    assert_eq!(c.max_inflight_generations, 4096);
    assert_eq!(c.receive_window.stream_bytes(), 65_535);
    let file = Config::parse(
        "[server]\nmetrics_listen = \"127.0.0.1:9464\"\nmax_inflight_generations = 8\nstream_window_bytes = 1048576\n",
    )
    .unwrap();
    let c = Config::from_file(file, &env).unwrap();
    assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(c.max_inflight_generations, 8);
    assert_eq!(c.receive_window.stream_bytes(), 1_048_576);
    let env_over = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("GATEWAY_METRICS_LISTEN", "0.0.0.0:9100"),
    ];
    let c = Config::from_file(FileConfig::default(), &env_over).unwrap();
    assert_eq!(c.metrics_listen, Some("0.0.0.0:9100".parse().unwrap()));

    for (text, key) in [
        (
            "[server]\nmetrics_listen = \"nope\"\n",
            "server.metrics_listen",
        ),
        (
            "[server]\nmax_inflight_generations = 0\n",
            "server.max_inflight_generations",
        ),
        (
            "[server]\nstream_window_bytes = 16383\n",
            "server.stream_window_bytes",
        ),
        (
            "[server]\nstream_window_bytes = 16777217\n",
            "server.stream_window_bytes",
        ),
        (
            "[models.\"openai/gpt-4o\"]\nfallbacks = [\"anthropic/claude-sonnet-4-5\"]\n",
            "models.\"openai/gpt-4o\".fallbacks[0]",
        ),
        (
            "[[hooks]]\nheaders = { \"x-api-key\" = \"k\" }\n",
            "hooks[0].headers.x-api-key",
        ),
    ] {
        let file = Config::parse(text).unwrap();
        assert_eq!(
            Config::from_file(file, &env).unwrap_err().key,
            key,
            "{text}"
        );
    }
    let ok = Config::parse("[models.\"openai/gpt-4o\"]\nfallbacks = [\"openai/gpt-4o-mini\"]\n")
        .unwrap();
    let c = Config::from_file(ok, &env).unwrap();
    assert_eq!(c.catalog.fallbacks("openai/gpt-4o"), ["openai/gpt-4o-mini"]);
}

#[test]
fn the_example_config_is_valid() {
    // The annotated example is the reference operators copy from: it must keep up with the schema.
    let file = Config::parse(include_str!("../../../deploy/gateway.example.toml")).unwrap();
    assert_eq!(file.hooks.len(), 2);
    let env = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("OPENAI_API_KEY", "sk-x"),
        ("ANTHROPIC_API_KEY", "sk-ant-x"),
        ("DEEPSEEK_API_KEY", "sk-d"),
    ];
    let c = Config::from_file(file, &env).unwrap();
    assert_eq!(
        c.catalog.fallbacks("openai/gpt-4o"),
        ["anthropic/claude-sonnet-4-5"]
    );
}

#[test]
fn secrets_never_print() {
    let env = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("OPENAI_API_KEY", "sk-very-secret"),
    ];
    let c = Config::from_file(FileConfig::default(), &env).unwrap();
    let dump = format!("{c:?}");
    assert!(!dump.contains("sk-very-secret"));
    assert!(!dump.contains(TOKEN));
}
