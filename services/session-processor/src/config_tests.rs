use super::*;

pub(super) fn load(extra: &str) -> Result<Config, ConfigError> {
    let file = Config::parse(&format!(
        "[server]\nauth_tokens = [\"operator-token-0123456789\"]\n{extra}"
    ))?;
    Config::from_file(file, Path::new("."), &[("X", "")])
}

#[test]
fn tenants_map_tokens_to_budgets() {
    let c = load(
        "[tenants.acme]\ntokens = [\"acme-token-0123456789\"]\nbudget_usd = 2.5\nagents = [\"default\"]\n[tenants.free]\ntokens = [\"free-token-0123456789\"]\n",
    )
    .unwrap();
    let acme = &c.tenants["acme"];
    assert_eq!(acme.budget_nano_usd, 2_500_000_000);
    assert_eq!(
        c.caller("acme-token-0123456789"),
        Some(&Caller::Tenant("acme".into()))
    );
    assert_eq!(c.tenants["free"].budget_nano_usd, 0);
    assert_eq!(
        c.caller("operator-token-0123456789"),
        Some(&Caller::Tenant(String::new())),
        "server.auth_tokens are the unnamed tenant's"
    );
    assert!(c.agent_allowed(&Caller::Tenant("acme".into()), "default"));
}

#[test]
fn operator_tokens_come_from_the_file_and_the_environment() {
    let file =
        Config::parse("[server]\noperator_tokens = [\"file-operator-0123456789\"]\n").unwrap();
    let env = [(
        "PROCESSOR_OPERATOR_TOKENS",
        "env-operator-0123456789, other-operator-0123456789",
    )];
    let c = Config::from_file(file, Path::new("."), &env).unwrap();
    for t in [
        "file-operator-0123456789",
        "env-operator-0123456789",
        "other-operator-0123456789",
    ] {
        assert_eq!(c.caller(t), Some(&Caller::Operator), "{t}");
    }
    let env = [("PROCESSOR_OPERATOR_TOKENS", "short")];
    let e = Config::from_file(FileConfig::default(), Path::new("."), &env).unwrap_err();
    assert_eq!(e.key, "server.operator_tokens");
}

#[test]
fn bad_tenants_name_the_key() {
    for (extra, key) in [
        ("[tenants.a]\ntokens = []\n", "tenants.a.tokens"),
        ("[tenants.a]\ntokens = [\"short\"]\n", "tenants.a.tokens"),
        (
            "[tenants.a]\ntokens = [\"acme-token-0123456789\"]\nbudget_usd = -1.0\n",
            "tenants.a.budget_usd",
        ),
        (
            "[tenants.a]\ntokens = [\"operator-token-0123456789\"]\n",
            "tenants.a.tokens",
        ),
        (
            "[tenants.a]\ntokens = [\"acme-token-0123456789\"]\n[tenants.b]\ntokens = [\"acme-token-0123456789\"]\n",
            "tenants.b.tokens",
        ),
        (
            "[tenants.a]\ntokens = [\"acme-token-0123456789\"]\nagents = [\"nobody\"]\n",
            "tenants.a.agents",
        ),
        (
            "[tenants.\"..\"]\ntokens = [\"acme-token-0123456789\"]\n",
            "tenants...",
        ),
    ] {
        assert_eq!(load(extra).unwrap_err().key, key, "{extra}");
    }
}

#[test]
fn agents_get_the_new_defaults() {
    let c = load("[titles]\nenabled = false\n[agents.small]\nsmall_model = \"openai/gpt-4o-mini\"\nauto_compact = false\n").unwrap();
    assert!(!c.titles);
    let a = &c.agents["small"];
    assert_eq!(a.small_model, "openai/gpt-4o-mini");
    assert!(!a.auto_compact);
    assert_eq!(a.retry.max_retries, 3);
    assert_eq!(a.retry.base_delay, Duration::from_millis(500));
    assert!(c.agents["default"].auto_compact);
    assert_eq!(
        load("[agents.x]\nsmall_model = \"nope\"\n")
            .unwrap_err()
            .key,
        "agents.x.small_model"
    );
}

#[test]
fn the_example_config_names_only_known_keys() {
    let file = Config::parse(include_str!("../../../deploy/processor.example.toml")).unwrap();
    assert!(file.titles.enabled);
    assert!(file.agents["default"].auto_compact);
}

#[test]
fn snapshots_default_under_the_workspace_root_and_never_inside_a_workspace() {
    let c = load("[workspaces]\nroot = \"/srv/ws\"\n").unwrap();
    assert!(c.snapshots.enabled);
    assert_eq!(c.snapshots.root, Path::new("/srv/ws/@snapshots"));
    assert_eq!(c.snapshots.max_file_bytes, 2 * 1024 * 1024);
    let c = load(
        "[workspaces]\nroot = \"/srv/ws\"\n[snapshots]\nroot = \"/srv/snap\"\ntimeout_ms = 5000\n",
    )
    .unwrap();
    assert_eq!(
        (c.snapshots.root.as_path(), c.snapshots.timeout),
        (Path::new("/srv/snap"), Duration::from_secs(5))
    );
    for root in [
        "/srv/ws",
        "/srv/ws/demo",
        "/srv/ws/demo/.snap",
        "/srv",
        "/srv/ws/./x/..",
        "/srv/ws/@tenants",
        "/srv/ws/@tenants/acme/proj/.snap",
    ] {
        let extra = format!("[workspaces]\nroot = \"/srv/ws\"\n[snapshots]\nroot = \"{root}\"\n");
        assert_eq!(load(&extra).unwrap_err().key, "snapshots.root", "{root}");
    }
    let env = [
        ("PROCESSOR_SNAPSHOT_ROOT", "/var/snap"),
        ("PROCESSOR_AUTH_TOKENS", "operator-token-0123456789"),
    ];
    let c = Config::from_file(FileConfig::default(), Path::new("."), &env).unwrap();
    assert_eq!(c.snapshots.root, Path::new("/var/snap"));
}

#[test]
fn gateway_balance_modes() {
    use crate::gateway_pool::Balance;
    assert_eq!(
        load("").unwrap().gateway_balance,
        Balance::Connection { connections: 1 }
    );
    assert_eq!(
        load("[gateway]\nconnections = 4\n")
            .unwrap()
            .gateway_balance,
        Balance::Connection { connections: 4 }
    );
    let c = load("[gateway]\nurl = \"http://gw-headless:50051,http://gw2:50051\"\nbalance = \"dns\"\nresolve_interval_ms = 2000\n").unwrap();
    assert_eq!(
        c.gateway_balance,
        Balance::Dns {
            interval: Duration::from_millis(2000)
        }
    );
    for (extra, key) in [
        ("[gateway]\nbalance = \"round_robin\"\n", "gateway.balance"),
        (
            "[gateway]\nbalance = \"dns\"\nurl = \"gw:1\"\n",
            "gateway.url",
        ),
        (
            "[gateway]\nbalance = \"dns\"\nresolve_interval_ms = 5\n",
            "gateway.resolve_interval_ms",
        ),
        (
            "[gateway]\nurl = \"http://a:1,http://b:1\"\n",
            "gateway.url",
        ),
        ("[gateway]\nconnections = 0\n", "gateway.connections"),
        ("[gateway]\nconnections = 65\n", "gateway.connections"),
        (
            "[gateway]\nbalance = \"dns\"\nconnections = 2\n",
            "gateway.connections",
        ),
    ] {
        assert_eq!(load(extra).unwrap_err().key, key, "{extra}");
    }
    let with = |n: &'static str| {
        let env = [
            ("GATEWAY_CONNECTIONS", n),
            ("PROCESSOR_AUTH_TOKENS", "operator-token-0123456789"),
        ];
        Config::from_file(FileConfig::default(), Path::new("."), &env)
    };
    assert_eq!(
        with("3").unwrap().gateway_balance,
        Balance::Connection { connections: 3 }
    );
    assert_eq!(with("three").unwrap_err().key, "gateway.connections");
}

#[test]
fn the_stream_and_blocking_read_bounds_are_configurable_and_at_least_one() {
    let c = load("").unwrap();
    assert_eq!(
        (c.max_streams_per_tenant, c.max_blocking_reads),
        (1_000, 256)
    );
    let c = load("max_streams_per_tenant = 5\n[redis]\nmax_blocking_reads = 7\n").unwrap();
    assert_eq!((c.max_streams_per_tenant, c.max_blocking_reads), (5, 7));
    let refused = load("max_streams_per_tenant = 0\n").unwrap_err();
    assert_eq!(refused.key, "server.max_streams_per_tenant");
    let refused = load("[redis]\nmax_blocking_reads = 0\n").unwrap_err();
    assert_eq!(refused.key, "redis.max_blocking_reads");
}

#[test]
fn one_calls_receive_window_is_configurable_and_bounded() {
    let window = |c: Config| c.receive_window.stream_bytes();
    assert_eq!(window(load("").unwrap()), 65_535);
    assert_eq!(
        window(load("stream_window_bytes = 1048576\n").unwrap()),
        1_048_576
    );
    for bad in [
        "stream_window_bytes = 100\n",
        "stream_window_bytes = 16777217\n",
    ] {
        assert_eq!(load(bad).unwrap_err().key, "server.stream_window_bytes");
    }
}

#[test]
fn the_event_flush_window_is_configurable_and_bounded() {
    assert_eq!(
        load("").unwrap().events.flush_interval,
        crate::events::DEFAULT_FLUSH_INTERVAL
    );
    assert_eq!(
        load("[events]\nflush_interval_ms = 50\n")
            .unwrap()
            .events
            .flush_interval,
        Duration::from_millis(50)
    );
    for bad in ["0", "10001"] {
        assert_eq!(
            load(&format!("[events]\nflush_interval_ms = {bad}\n"))
                .unwrap_err()
                .key,
            "events.flush_interval_ms"
        );
    }
}

#[test]
fn the_unwatched_flush_window_is_configurable_bounded_and_never_shorter() {
    let events = load("").unwrap().events;
    assert_eq!(
        events.unwatched_flush_interval,
        crate::events::DEFAULT_UNWATCHED_FLUSH_INTERVAL
    );
    assert_eq!(
        load("[events]\nunwatched_flush_interval_ms = 3000\n")
            .unwrap()
            .events
            .unwatched_flush_interval,
        Duration::from_millis(3000)
    );
    // Shorter than the watched window: the watched window it is.
    assert_eq!(
        load("[events]\nflush_interval_ms = 2000\n")
            .unwrap()
            .events
            .unwatched_flush_interval,
        Duration::from_millis(2000)
    );
    for bad in ["0", "10001"] {
        assert_eq!(
            load(&format!("[events]\nunwatched_flush_interval_ms = {bad}\n"))
                .unwrap_err()
                .key,
            "events.unwatched_flush_interval_ms"
        );
    }
}

#[test]
fn usd_amounts_become_nano_usd() {
    assert_eq!(usd_to_nano(0.25), Some(250_000_000));
    assert_eq!(usd_to_nano(0.0), Some(0));
    assert_eq!(usd_to_nano(-1.0), None);
    assert_eq!(usd_to_nano(f64::NAN), None);
    assert_eq!(usd_to_nano(1e12), None);
}
