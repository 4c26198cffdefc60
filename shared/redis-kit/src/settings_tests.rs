use super::*;

struct Vars(Vec<(&'static str, &'static str)>);

impl Env for Vars {
    fn var(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

fn keys<'a>(mode: &'a str, url: &'a str, master: Option<&'a str>) -> ConnectionKeys<'a> {
    ConnectionKeys {
        mode,
        url,
        sentinel_master: master,
        username: None,
        password_env: "REDIS_PASSWORD",
        tls: None,
    }
}

fn target(k: &ConnectionKeys<'_>) -> Result<RedisTarget, SettingError> {
    resolve(k, "", &Vars(vec![])).map(|(t, _)| t)
}

#[test]
fn each_mode_reads_its_addresses() {
    assert_eq!(
        target(&keys("standalone", "redis://127.0.0.1:6379", None)).unwrap(),
        RedisTarget::standalone("redis://127.0.0.1:6379")
    );
    assert_eq!(
        target(&keys("cluster", "redis://a:7000, redis://b:7001", None)).unwrap(),
        RedisTarget::Cluster {
            seeds: vec!["redis://a:7000".into(), "redis://b:7001".into()]
        }
    );
    assert_eq!(
        target(&keys(
            "sentinel",
            "redis://s1:26379,redis://s2:26379",
            Some("main")
        ))
        .unwrap(),
        RedisTarget::Sentinel {
            sentinels: vec!["redis://s1:26379".into(), "redis://s2:26379".into()],
            master: "main".into()
        }
    );
}

#[test]
fn the_environment_overrides_the_file_under_the_services_prefix() {
    let vars = Vars(vec![
        ("REDIS_MODE", "sentinel"),
        ("REDIS_URL", "redis://s:26379"),
        ("REDIS_SENTINEL_MASTER", "m"),
    ]);
    let file = keys("standalone", "redis://127.0.0.1:6379", None);
    let (t, _) = resolve(&file, "", &vars).unwrap();
    assert_eq!(t.mode(), "sentinel");
    // Another service's prefix reads other variables: these are not its own.
    let (t, _) = resolve(&file, "GATEWAY_", &vars).unwrap();
    assert_eq!(t.mode(), "standalone");
    let vars = Vars(vec![("GATEWAY_REDIS_URL", "redis://g:6379")]);
    let (t, _) = resolve(&file, "GATEWAY_", &vars).unwrap();
    assert_eq!(t, RedisTarget::standalone("redis://g:6379"));
}

#[test]
fn mistakes_name_the_key() {
    let cases = [
        (keys("replicated", "redis://a:1", None), "redis.mode"),
        (
            keys("standalone", "redis://a:1,redis://b:2", None),
            "redis.url",
        ),
        (keys("cluster", " , ", None), "redis.url"),
        (
            keys("cluster", "redis://a:1,rediss://b:2", None),
            "redis.url",
        ),
        (keys("cluster", "http://a:1", None), "redis.url"),
        (
            keys("sentinel", "redis://s:26379", None),
            "redis.sentinel_master",
        ),
        (
            keys("sentinel", "redis://s:26379", Some("a b")),
            "redis.sentinel_master",
        ),
        (
            keys("cluster", "redis://a:1", Some("m")),
            "redis.sentinel_master",
        ),
    ];
    for (k, key) in cases {
        let e = target(&k).unwrap_err();
        assert_eq!(e.key, key, "{k:?}: {e}");
    }
}

#[test]
fn sentinel_url_credentials_are_the_sentinels_and_do_not_conflict() {
    let vars = Vars(vec![("REDIS_PASSWORD", "data-secret")]);
    let mut k = keys("sentinel", "redis://:s-secret@s:26379", Some("m"));
    k.username = Some("processor");
    assert!(resolve(&k, "", &vars).is_ok());
    let mut k = keys("cluster", "redis://:s-secret@a:7000", None);
    k.username = Some("processor");
    assert_eq!(resolve(&k, "", &vars).unwrap_err().key, "redis.username");
}

#[test]
fn transport_mistakes_name_their_key() {
    let ca = ClientTlsFiles {
        ca_file: Some("/ca".into()),
        ..Default::default()
    };
    let named = ClientTlsFiles {
        server_name: Some("x".into()),
        ..Default::default()
    };
    let password = Vars(vec![("REDIS_PASSWORD", "p")]);
    let mut with_url_user = keys("standalone", "redis://u:p@r:1", None);
    with_url_user.username = Some("u");
    let mut user_only = keys("standalone", "redis://r:1", None);
    user_only.username = Some("u");
    let cases: [(ConnectionKeys<'_>, &Vars, &str); 4] = [
        (
            ConnectionKeys {
                tls: Some(&ca),
                ..keys("standalone", "redis://r:1", None)
            },
            &Vars(vec![]),
            "redis.tls",
        ),
        (
            ConnectionKeys {
                tls: Some(&named),
                ..keys("standalone", "rediss://r:1", None)
            },
            &Vars(vec![]),
            "redis.tls.server_name",
        ),
        (with_url_user, &password, "redis.username"),
        (user_only, &Vars(vec![]), "redis.password_env"),
    ];
    for (k, env, key) in cases {
        assert_eq!(resolve(&k, "", env).unwrap_err().key, key, "{k:?}");
    }
}

#[test]
fn credentials_and_tls_reach_the_access() {
    let dir = tempfile::tempdir().unwrap();
    let pki = service_kit::test_certs::generate(dir.path());
    let files = ClientTlsFiles {
        ca_file: Some(pki.ca.clone()),
        ..Default::default()
    };
    let mut k = keys("standalone", "rediss://r:6380", None);
    k.username = Some("gateway");
    k.tls = Some(&files);
    let (_, access) = resolve(&k, "", &Vars(vec![("REDIS_PASSWORD", "pw")])).unwrap();
    assert_eq!(access.username.as_deref(), Some("gateway"));
    assert_eq!(access.password.as_deref(), Some("pw"));
    assert!(access.tls.unwrap().ca_pem().is_some());
    assert!(!format!("{k:?}").contains("pw"));
}
