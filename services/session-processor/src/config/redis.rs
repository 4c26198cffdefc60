//! `[redis]`'s deployment mode: which Redis the store talks to and how it finds it.
//!
//! - `mode = "standalone"` (the default): `url` is the one node.
//! - `mode = "cluster"`: `url` is a comma-separated list of cluster nodes (seeds; one reachable node is enough, the
//!   client learns the rest of the cluster from it).
//! - `mode = "sentinel"`: `url` is a comma-separated list of the sentinels (their own credentials, if any, in
//!   these URLs) and `sentinel_master` the name they monitor the primary under; `username` / `password_env`
//!   authenticate to the data nodes.
//!
//! `REDIS_MODE`, `REDIS_URL` and `REDIS_SENTINEL_MASTER` override the file.

use super::{ConfigError, Env, RedisFile, err, transport};
use crate::store::{RedisAccess, RedisTarget};

/// Most addresses in `redis.url`; seeds and sentinels are a handful, so more is a mistake.
const MAX_ADDRESSES: usize = 64;

/// The target and the credentials and TLS that go with it.
pub(super) fn redis_target(
    file: &RedisFile,
    env: &dyn Env,
) -> Result<(RedisTarget, RedisAccess), ConfigError> {
    let mode = env.var("REDIS_MODE").unwrap_or(file.mode.clone());
    let url = env.var("REDIS_URL").unwrap_or(file.url.clone());
    let master = env
        .var("REDIS_SENTINEL_MASTER")
        .or(file.sentinel_master.clone());
    let urls: Vec<String> = url
        .split(',')
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(err("redis.url", "must name at least one Redis URL"));
    }
    if urls.len() > MAX_ADDRESSES {
        return Err(err(
            "redis.url",
            format!("names {} addresses; at most {MAX_ADDRESSES}", urls.len()),
        ));
    }
    let target = match mode.as_str() {
        "standalone" if urls.len() > 1 => {
            return Err(err(
                "redis.url",
                "names several addresses, but redis.mode is \"standalone\" (use \"cluster\" or \"sentinel\")",
            ));
        }
        "standalone" => RedisTarget::Standalone {
            url: urls[0].clone(),
        },
        "cluster" => RedisTarget::Cluster { seeds: urls },
        "sentinel" => match master.clone() {
            Some(m) if valid_master(&m) => RedisTarget::Sentinel {
                sentinels: urls,
                master: m,
            },
            Some(_) => {
                return Err(err(
                    "redis.sentinel_master",
                    "must be 1..=128 characters of [A-Za-z0-9._-]",
                ));
            }
            None => {
                return Err(err(
                    "redis.sentinel_master",
                    "required when redis.mode is \"sentinel\" (the name the sentinels monitor the primary under)",
                ));
            }
        },
        other => {
            return Err(err(
                "redis.mode",
                format!("must be \"standalone\", \"cluster\" or \"sentinel\", not {other:?}"),
            ));
        }
    };
    if master.is_some() && !matches!(target, RedisTarget::Sentinel { .. }) {
        return Err(err(
            "redis.sentinel_master",
            "set, but redis.mode is not \"sentinel\"",
        ));
    }
    let sentinel = matches!(target, RedisTarget::Sentinel { .. });
    let access = transport::redis_access(file, target.urls(), sentinel, env)?;
    Ok((target, access))
}

fn valid_master(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
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
}
