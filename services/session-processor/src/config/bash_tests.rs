use super::super::tests::load;
use super::super::*;
use super::*;

#[test]
fn defaults_are_namespaces_and_the_documented_limits() {
    let c = load("").unwrap();
    assert_eq!(c.sandbox.settings(), &SandboxSettings::default());
    assert_eq!(c.agents["default"].tool_limits.bash, BashLimits::default());
}

#[test]
fn agents_override_the_global_limits_key_by_key() {
    let c = load(
        "[tools.bash]\nconfinement = \"weak\"\nuid = 1234\ntimeout_ms = 5000\nmax_processes = 32\n\
         [agents.net]\nbash = { network = true, max_processes = 64 }\n",
    )
    .unwrap();
    assert_eq!(c.sandbox.settings().confinement, Confinement::Weak);
    assert_eq!(
        (c.sandbox.settings().uid, c.sandbox.settings().gid),
        (1234, 64000)
    );
    let net = &c.agents["net"].tool_limits.bash;
    assert_eq!(
        (net.timeout, net.max_processes, net.network),
        (Duration::from_secs(5), 64, true)
    );
    let default = &c.agents["default"].tool_limits.bash;
    assert_eq!((default.max_processes, default.network), (32, false));
    assert!(
        Arc::ptr_eq(&c.agents["net"].tool_limits.sandbox, &c.sandbox),
        "one sandbox per processor"
    );
}

#[test]
fn bad_values_name_their_key() {
    for (extra, key) in [
        (
            "[tools.bash]\nconfinement = \"none\"\n",
            "tools.bash.confinement",
        ),
        ("[tools.bash]\nuid = 0\n", "tools.bash.uid"),
        (
            "[tools.bash]\nro_paths = [\"opt\"]\n",
            "tools.bash.ro_paths",
        ),
        ("[tools.bash]\ntimeout_ms = 5\n", "tools.bash.timeout_ms"),
        ("[tools.bash]\nmemorybytes = 5\n", "tools.bash.memorybytes"),
        (
            "[agents.a]\nbash = { max_processes = 1 }\n",
            "agents.a.bash.max_processes",
        ),
        (
            "[agents.a]\nbash = { tmp_bytes = 10 }\n",
            "agents.a.bash.tmp_bytes",
        ),
    ] {
        assert_eq!(load(extra).unwrap_err().key, key, "{extra}");
    }
    assert!(
        load("[agents.a]\nbash = { confinement = \"weak\" }\n").is_err(),
        "sandbox keys are global"
    );
}

#[test]
fn disabling_bash_takes_it_from_every_agent() {
    let mut c = load("[agents.b]\ntools = [\"read\", \"bash\"]\n").unwrap();
    assert_eq!(c.bash_agents(), ["b"]);
    c.disable_bash();
    assert!(c.bash_agents().is_empty());
    assert_eq!(c.agents["b"].tools, ["read"]);
}
