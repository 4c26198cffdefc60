use std::path::Path;

use super::super::*;

struct Vars(Vec<(String, String)>);

impl Env for Vars {
    fn var(&self, name: &str) -> Option<String> {
        let token =
            (name == "PROCESSOR_AUTH_TOKENS").then(|| "operator-token-0123456789".to_owned());
        token.or_else(|| {
            self.0
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }
}

fn load(toml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env = Vars(
        env.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    Config::from_file(Config::parse(toml)?, Path::new("."), &env)
}

#[test]
fn tls_files_are_checked_where_they_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let pki = service_kit::test_certs::generate(dir.path());
    let (cert, key) = (
        pki.server_cert.display().to_string(),
        pki.server_key.display().to_string(),
    );
    let c = load("", &[]).unwrap();
    assert!(c.server_tls.is_none() && c.gateway_tls.is_none() && c.redis_access.tls.is_none());
    let c = load(
        &format!(
            "[server]\ntls = {}\n[gateway]\nurl = \"https://gw:50051\"\ntls = {}\n\
             [redis]\nurl = \"rediss://redis:6380\"\nusername = \"processor\"\ntls = {}\n",
            pki.server_toml(true),
            pki.client_toml(false),
            pki.client_toml(true),
        ),
        &[("REDIS_PASSWORD", "hunter2")],
    )
    .unwrap();
    assert!(c.server_tls.unwrap().mutual());
    assert!(c.gateway_tls.unwrap().ca_pem().is_some());
    assert_eq!(c.redis_access.username.as_deref(), Some("processor"));
    assert!(c.redis_access.tls.is_some());
    assert!(
        !format!("{:?}", c.redis_access).contains("hunter2"),
        "the password is never printed"
    );
    // From the environment alone; an https gateway without [gateway.tls] trusts the system's roots.
    let c = load(
        "[gateway]\nurl = \"https://gw:50051\"\n",
        &[
            ("PROCESSOR_TLS_CERT_FILE", &cert),
            ("PROCESSOR_TLS_KEY_FILE", &key),
        ],
    )
    .unwrap();
    assert!(!c.server_tls.unwrap().mutual());
    assert!(c.gateway_tls.unwrap().ca_pem().is_none());
}

#[test]
fn transport_mistakes_name_their_key() {
    for (toml, env, key) in [
        (
            "[server.tls]\ncert_file = \"/no/cert.pem\"\nkey_file = \"/no/key.pem\"\n",
            &[][..],
            "server.tls.cert_file",
        ),
        (
            "",
            &[("PROCESSOR_TLS_KEY_FILE", "/k")][..],
            "server.tls.cert_file",
        ),
        (
            "[gateway]\ntls = { ca_file = \"/ca\" }\n",
            &[][..],
            "gateway.tls",
        ),
        (
            "[gateway]\nurl = \"https://gw:1\"\ntls = { ca_file = \"/no/ca.pem\" }\n",
            &[][..],
            "gateway.tls.ca_file",
        ),
        ("[redis]\nurl = \"http://r:1\"\n", &[][..], "redis.url"),
        (
            "[redis]\ntls = { ca_file = \"/ca\" }\n",
            &[][..],
            "redis.tls",
        ),
        (
            "[redis]\nurl = \"rediss://r:1\"\ntls = { server_name = \"x\" }\n",
            &[][..],
            "redis.tls.server_name",
        ),
        (
            "[redis]\nurl = \"redis://u:p@r:1\"\nusername = \"u\"\n",
            &[("REDIS_PASSWORD", "p")][..],
            "redis.username",
        ),
        ("[redis]\nusername = \"u\"\n", &[][..], "redis.password_env"),
    ] {
        assert_eq!(load(toml, env).unwrap_err().key, key, "{toml}");
    }
}
