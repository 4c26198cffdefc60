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

fn file(mode: &str, url: &str, master: Option<&str>) -> RedisFile {
    RedisFile {
        mode: mode.into(),
        url: url.into(),
        sentinel_master: master.map(Into::into),
        ..Default::default()
    }
}

fn target(f: &RedisFile) -> Result<RedisTarget, ConfigError> {
    redis_target(f, &Vars(vec![])).map(|(t, _)| t)
}

#[test]
fn each_mode_reads_its_addresses() {
    assert_eq!(
        target(&RedisFile::default()).unwrap(),
        RedisTarget::standalone("redis://127.0.0.1:6379")
    );
    assert_eq!(
        target(&file("cluster", "redis://a:7000, redis://b:7001", None)).unwrap(),
        RedisTarget::Cluster {
            seeds: vec!["redis://a:7000".into(), "redis://b:7001".into()]
        }
    );
    assert_eq!(
        target(&file(
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
fn the_environment_overrides_the_file() {
    let vars = Vars(vec![
        ("REDIS_MODE", "sentinel"),
        ("REDIS_URL", "redis://s:26379"),
        ("REDIS_SENTINEL_MASTER", "m"),
    ]);
    let (t, _) = redis_target(&RedisFile::default(), &vars).unwrap();
    assert_eq!(t.mode(), "sentinel");
}

#[test]
fn mistakes_name_the_key() {
    let cases = [
        (file("replicated", "redis://a:1", None), "redis.mode"),
        (
            file("standalone", "redis://a:1,redis://b:2", None),
            "redis.url",
        ),
        (file("cluster", " , ", None), "redis.url"),
        (
            file("cluster", "redis://a:1,rediss://b:2", None),
            "redis.url",
        ),
        (file("cluster", "http://a:1", None), "redis.url"),
        (
            file("sentinel", "redis://s:26379", None),
            "redis.sentinel_master",
        ),
        (
            file("sentinel", "redis://s:26379", Some("a b")),
            "redis.sentinel_master",
        ),
        (
            file("cluster", "redis://a:1", Some("m")),
            "redis.sentinel_master",
        ),
    ];
    for (f, key) in cases {
        let e = target(&f).unwrap_err();
        assert_eq!(e.key, key, "{f:?}: {e}");
    }
}

#[test]
fn sentinel_url_credentials_are_the_sentinels_and_do_not_conflict() {
    let vars = Vars(vec![("REDIS_PASSWORD", "data-secret")]);
    let mut f = file("sentinel", "redis://:s-secret@s:26379", Some("m"));
    f.username = Some("processor".into());
    assert!(redis_target(&f, &vars).is_ok());
    let mut f = file("cluster", "redis://:s-secret@a:7000", None);
    f.username = Some("processor".into());
    assert_eq!(redis_target(&f, &vars).unwrap_err().key, "redis.username");
}

#[test]
fn a_replica_wait_is_read_and_checked() {
    assert_eq!(replica_wait(&RedisFile::default()).unwrap(), None);
    let wait = |replicas, timeout_ms| RedisFile {
        wait_replicas: replicas,
        wait_timeout_ms: timeout_ms,
        ..Default::default()
    };
    assert_eq!(
        replica_wait(&wait(1, 50)).unwrap(),
        Some(ReplicaWait {
            replicas: 1,
            timeout: std::time::Duration::from_millis(50)
        })
    );
    // The timeout is ignored while nothing waits.
    assert_eq!(replica_wait(&wait(0, 0)).unwrap(), None);
    for (file, key) in [
        (wait(1, 0), "redis.wait_timeout_ms"),
        (wait(1, 1_001), "redis.wait_timeout_ms"),
        (wait(17, 100), "redis.wait_replicas"),
    ] {
        let e = replica_wait(&file).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
}
