use super::*;
use crate::protocol::Protocol;
use crate::settings::ConfigError;
use serde::Deserialize;

fn hooks(text: &str) -> Result<(Vec<DeclarativeHook>, Vec<HookService>), ConfigError> {
    #[derive(Deserialize)]
    struct F {
        #[serde(default)]
        hooks: Vec<HookFile>,
        #[serde(default)]
        hook_services: Vec<HookServiceFile>,
    }
    let f: F = toml::from_str(text).map_err(|e| ConfigError {
        key: "parse".into(),
        message: e.to_string(),
    })?;
    compile(&f.hooks, &f.hook_services)
}

fn model(id: &str) -> ModelInfo {
    let (provider, name) = id.split_once('/').unwrap();
    ModelInfo {
        id: id.into(),
        provider: provider.into(),
        name: name.into(),
        display_name: name.into(),
        protocol: Protocol::OpenaiChat,
        context_window: 1000,
        max_input_tokens: 0,
        max_output_tokens: 100,
        capabilities: Default::default(),
        pricing: None,
    }
}

#[test]
fn globs_match_stars_anywhere() {
    for (p, t, m) in [
        ("*", "openai/gpt-4o", true),
        ("openai/*", "openai/gpt-4o", true),
        ("openai/*", "anthropic/claude", false),
        ("*/gpt-4o*", "openai/gpt-4o-mini", true),
        ("*claude*sonnet*", "anthropic/claude-sonnet-4-5", true),
        ("openai/gpt-4o", "openai/gpt-4o-mini", false),
        ("a*b*c", "abxbc", true),
        ("a*b*c", "abxbd", false),
        ("**", "", true),
    ] {
        assert_eq!(glob_match(p, t), m, "{p} ~ {t}");
    }
}

#[tokio::test]
async fn declarative_hooks_apply_in_order_with_default_and_set_semantics() {
    let (decl, svc) = hooks(
        r#"
[[hooks]]
match = "openai/*"
system_prefix = "first"
headers = { "X-Team" = "search" }
params.default = { temperature = 0.7, max_output_tokens = 500 }
params.set = { top_p = 0.9 }

[[hooks]]
match = "*"
system_prefix = "second"
headers = { "x-team" = "ads", "x-other" = "1" }
params.set = { temperature = 0.1 }

[[hooks]]
match = "anthropic/*"
system_prefix = "never"
"#,
    )
    .unwrap();
    let runner = HookRunner::new(&decl, &svc);
    let mut g = pb::Generation {
        system: vec!["caller".into()],
        sampling: Some(pb::Sampling {
            max_output_tokens: Some(42),
            ..Default::default()
        }),
        ..Default::default()
    };
    let headers = runner
        .apply(&model("openai/gpt-4o"), &mut g, &Metrics::new())
        .await
        .unwrap();
    assert_eq!(g.system, ["first", "second", "caller"]);
    let s = g.sampling.unwrap();
    // The caller's max_output_tokens survives the default; the later `set` wins over the earlier default.
    assert_eq!(s.max_output_tokens, Some(42));
    assert_eq!(s.temperature, Some(0.1));
    assert_eq!(s.top_p, Some(0.9));
    assert_eq!(
        headers,
        [
            ("x-team".to_string(), "ads".to_string()),
            ("x-other".to_string(), "1".to_string())
        ]
    );

    let mut untouched = pb::Generation::default();
    let headers = runner
        .apply(
            &model("gemini/gemini-2.5-pro"),
            &mut untouched,
            &Metrics::new(),
        )
        .await
        .unwrap();
    assert_eq!(untouched.sampling.unwrap().temperature, Some(0.1));
    assert_eq!(untouched.system, ["second"]);
    assert_eq!(headers.len(), 2);
}

#[test]
fn config_errors_name_the_key() {
    for (text, key) in [
        (
            "[[hooks]]\nheaders = { Authorization = \"Bearer x\" }\n",
            "hooks[0].headers.Authorization",
        ),
        (
            "[[hooks]]\nheaders = { host = \"evil\" }\n",
            "hooks[0].headers.host",
        ),
        (
            "[[hooks]]\nsystem_prefix = \"a\"\n[[hooks]]\nparams.set = { temperature = 3.0 }\n",
            "hooks[1].params.set.temperature",
        ),
        ("[[hooks]]\nmatch = \"openai/*\"\n", "hooks[0]"),
        (
            "[[hooks]]\nmatch = \"\"\nsystem_prefix = \"x\"\n",
            "hooks[0].match",
        ),
        (
            "[[hook_services]]\nname = \"p\"\nurl = \"https://h:1\"\npolicy = \"fail_open\"\ntransforms = [\"system\"]\n",
            "hook_services[0].url",
        ),
        (
            "[[hook_services]]\nname = \"p\"\nurl = \"http://h:1/path\"\npolicy = \"fail_open\"\ntransforms = [\"system\"]\n",
            "hook_services[0].url",
        ),
        (
            "[[hook_services]]\nname = \"p\"\nurl = \"http://h:1\"\npolicy = \"fail_open\"\ntransforms = []\n",
            "hook_services[0].transforms",
        ),
        (
            "[[hook_services]]\nname = \"p\"\nurl = \"http://h:1\"\npolicy = \"fail_open\"\ntimeout_ms = 0\ntransforms = [\"params\"]\n",
            "hook_services[0].timeout_ms",
        ),
        (
            "[[hook_services]]\nname = \"p\"\nurl = \"http://h:1\"\npolicy = \"fail_open\"\ntransforms = [\"params\"]\n[[hook_services]]\nname = \"p\"\nurl = \"http://h:2\"\npolicy = \"fail_closed\"\ntransforms = [\"params\"]\n",
            "hook_services[1].name",
        ),
    ] {
        assert_eq!(hooks(text).unwrap_err().key, key, "{text}");
    }
    let unknown = hooks("[[hooks]]\nsystem_prefx = \"x\"\n").unwrap_err();
    assert!(unknown.message.contains("system_prefx"), "{unknown}");
    let (_, svc) = hooks(
            "[[hook_services]]\nname = \"policy\"\nurl = \"http://127.0.0.1:7000/\"\npolicy = \"fail_closed\"\ntransforms = [\"system\", \"headers\"]\n",
        )
        .unwrap();
    assert_eq!(svc[0].url, "http://127.0.0.1:7000");
    assert_eq!(svc[0].timeout, Duration::from_millis(1000));
    assert_eq!(svc[0].pattern, "*");
}

#[tokio::test]
async fn an_unreachable_service_follows_its_policy() {
    // Port 1 on loopback refuses connections at once.
    let open = HookService {
        name: "audit".into(),
        url: "http://127.0.0.1:1".into(),
        pattern: "*".into(),
        timeout: Duration::from_millis(500),
        policy: HookPolicy::FailOpen,
        transforms: vec![Transform::System],
    };
    let closed = HookService {
        policy: HookPolicy::FailClosed,
        ..open.clone()
    };
    let metrics = Metrics::new();
    let mut g = pb::Generation {
        system: vec!["caller".into()],
        ..Default::default()
    };
    HookRunner::new(&[], &[open])
        .apply(&model("openai/gpt-4o"), &mut g, &metrics)
        .await
        .unwrap();
    assert_eq!(g.system, ["caller"]);
    let e = HookRunner::new(&[], &[closed])
        .apply(&model("openai/gpt-4o"), &mut g, &metrics)
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(e.hook(), "audit");
    let text = metrics.encode();
    assert!(
            text.contains(
                "llm_gateway_hook_failures_total{hook=\"audit\",transform=\"system\",policy=\"fail_open\"} 1"
            ),
            "{text}"
        );
}
