use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::cache::{Next, decide, usable};
use super::caller::identify;
use super::file::{KeyFile, table};
use super::table::Clash;
use super::*;
use crate::settings::Secret;

fn key(tenant: &str, name: &str, role: Role, models: Option<&[&str]>) -> Key {
    Key {
        name: name.into(),
        tenant: tenant.into(),
        role,
        models: models.map(|m| m.iter().map(|s| (*s).to_owned()).collect()),
        source: Source::Api,
        created_ms: 0,
        rotated_ms: 0,
    }
}

fn one(token: &str, k: Key) -> KeyTable {
    KeyTable::build([(digest(token), k)]).unwrap()
}

#[test]
fn digests_round_trip_through_hex_and_tokens_are_long_and_fresh() {
    let d = digest("a-token-of-some-length");
    assert_eq!(from_hex(&to_hex(&d)), Some(d));
    assert_eq!(from_hex(&to_hex(&d).to_uppercase()), Some(d));
    assert_eq!(from_hex("abc"), None);
    assert_eq!(from_hex(&"zz".repeat(32)), None);
    let (a, b) = (mint_token(), mint_token());
    assert_ne!(a, b);
    assert!(a.starts_with("gk_") && a.len() == 67, "{a}");
}

#[test]
fn a_table_refuses_a_name_or_token_twice() {
    let a = (
        digest("t1-0123456789abcdef"),
        key("acme", "ci", Role::Caller, None),
    );
    let same_name = (
        digest("t2-0123456789abcdef"),
        key("acme", "ci", Role::Caller, None),
    );
    let same_token = (
        digest("t1-0123456789abcdef"),
        key("acme", "ops", Role::Caller, None),
    );
    let other_tenant = (
        digest("t3-0123456789abcdef"),
        key("globex", "ci", Role::Caller, None),
    );
    assert_eq!(
        KeyTable::build([a.clone(), same_name.clone()]).unwrap_err(),
        Clash::Name("acme".into(), "ci".into())
    );
    assert_eq!(
        KeyTable::build([a.clone(), same_token.clone()]).unwrap_err(),
        Clash::Token("acme".into(), "ops".into())
    );
    let t = KeyTable::build([a.clone(), other_tenant]).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t.find("globex", "ci").unwrap().tenant, "globex");
    // Read from Redis, a clash leaves the later key out rather than every key.
    assert_eq!(KeyTable::build_lenient([a, same_name, same_token]).len(), 1);
    // No digest in what a table prints.
    let printed = format!("{t:?}");
    assert!(
        !printed.contains(&to_hex(&digest("t1-0123456789abcdef"))),
        "{printed}"
    );
}

#[test]
fn a_token_names_its_key_in_the_first_table_that_has_it() {
    let config = one("config-token-0123456789", key("", "ops", Role::Admin, None));
    let runtime = one(
        "runtime-token-0123456789",
        key("acme", "ci", Role::Caller, None),
    );
    let tables = [&config, &runtime];
    let c = identify(Some("runtime-token-0123456789"), None, &tables, false).unwrap();
    assert_eq!((&*c.tenant, c.key.name.as_str()), ("acme", "ci"));
    let c = identify(Some("config-token-0123456789"), None, &tables, false).unwrap();
    assert_eq!((&*c.tenant, c.key.role), ("", Role::Admin));
    assert_eq!(
        identify(None, None, &tables, false).unwrap_err(),
        Refusal::Missing
    );
    assert_eq!(
        identify(Some("nobody-0123456789"), None, &tables, false).unwrap_err(),
        Refusal::Unknown
    );
    // Unauthenticated mode: no token, or an unknown one, is the anonymous caller of the unnamed tenant.
    let anon = identify(Some("nobody-0123456789"), None, &tables, true).unwrap();
    assert_eq!((&*anon.tenant, anon.key.name.as_str()), ("", "anonymous"));
}

#[test]
fn only_a_processor_key_may_name_another_tenant() {
    let caller = one(
        "caller-token-0123456789",
        key("acme", "ci", Role::Caller, None),
    );
    let admin = one(
        "admin-token-01234567890",
        key("acme", "ops", Role::Admin, None),
    );
    let processor = one(
        "proc-token-012345678901",
        key("", "processor", Role::Processor, None),
    );
    let tables = [&caller, &admin, &processor];
    let id = |token, tenant| identify(Some(token), tenant, &tables, false);
    // Naming its own tenant is fine for anyone.
    assert_eq!(
        &*id("caller-token-0123456789", Some("acme")).unwrap().tenant,
        "acme"
    );
    for token in ["caller-token-0123456789", "admin-token-01234567890"] {
        assert_eq!(
            id(token, Some("globex")).unwrap_err(),
            Refusal::ForeignTenant
        );
        assert_eq!(id(token, Some("")).unwrap_err(), Refusal::ForeignTenant);
    }
    let p = id("proc-token-012345678901", Some("globex")).unwrap();
    assert_eq!((&*p.tenant, p.key.name.as_str()), ("globex", "processor"));
    assert_eq!(&*id("proc-token-012345678901", None).unwrap().tenant, "");
    assert_eq!(
        id("proc-token-012345678901", Some("../etc")).unwrap_err(),
        Refusal::BadTenant
    );
    assert_eq!(
        Refusal::ForeignTenant.status().code(),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        Refusal::Unknown.status().code(),
        tonic::Code::Unauthenticated
    );
}

#[test]
fn a_model_list_allows_its_names_and_the_aliases_of_its_ids() {
    let t = one(
        "limited-token-0123456789",
        key("acme", "ci", Role::Caller, Some(&["openai/gpt-4o", "fast"])),
    );
    let c = identify(Some("limited-token-0123456789"), None, &[&t], false).unwrap();
    assert!(c.may_use("openai/gpt-4o", "openai/gpt-4o"));
    // An alias of a listed id, and a listed alias.
    assert!(c.may_use("gpt4", "openai/gpt-4o"));
    assert!(c.may_use("fast", "openai/gpt-4o-mini"));
    // The model a listed alias names is not listed by that.
    assert!(!c.may_use("openai/gpt-4o-mini", "openai/gpt-4o-mini"));
    assert!(!c.may_use("anthropic/claude-haiku-4-5", "anthropic/claude-haiku-4-5"));
    let all = one(
        "all-token-0123456789ab",
        key("acme", "all", Role::Caller, None),
    );
    let c = identify(Some("all-token-0123456789ab"), None, &[&all], false).unwrap();
    assert!(c.may_use("anything/at-all", "anything/at-all"));
}

#[test]
fn an_admin_manages_its_tenant_and_the_unnamed_tenants_admin_every_tenant() {
    let admins = KeyTable::build([
        (
            digest("global-admin-0123456789"),
            key("", "root", Role::Admin, None),
        ),
        (
            digest("acme-admin-0123456789a"),
            key("acme", "ops", Role::Admin, None),
        ),
        (
            digest("acme-caller-0123456789"),
            key("acme", "ci", Role::Caller, None),
        ),
    ])
    .unwrap();
    let who = |t| identify(Some(t), None, &[&admins], false).unwrap();
    let root = who("global-admin-0123456789");
    assert!(root.manages("acme") && root.manages("globex") && root.manages(""));
    let ops = who("acme-admin-0123456789a");
    assert!(ops.manages("acme") && !ops.manages("globex") && !ops.manages(""));
    assert!(!who("acme-caller-0123456789").manages("acme"));
}

struct Vars(Vec<(&'static str, &'static str)>);

impl service_kit::env::Env for Vars {
    fn var(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

fn keys_file(toml: &str) -> BTreeMap<String, KeyFile> {
    #[derive(serde::Deserialize)]
    struct F {
        keys: BTreeMap<String, KeyFile>,
    }
    toml::from_str::<F>(toml).unwrap().keys
}

#[test]
fn configured_keys_are_read_by_hash_or_from_the_environment() {
    let sha = to_hex(&digest("hashed-token-0123456789"));
    let files = keys_file(&format!(
        "[keys.ci]\ntenant = \"acme\"\ntoken_sha256 = \"{sha}\"\nmodels = [\"openai/gpt-4o\"]\n\
         [keys.processor]\ntoken_env = \"PROC_TOKEN\"\nrole = \"processor\"\n"
    ));
    let env = Vars(vec![("PROC_TOKEN", "processor-token-0123456789")]);
    let legacy = [Secret::new("legacy-token-0123456789")];
    let t = table(&files, &legacy, &env).unwrap();
    assert_eq!(t.len(), 3);
    let ci = t.lookup(&digest("hashed-token-0123456789")).unwrap();
    assert_eq!((ci.tenant.as_str(), ci.role), ("acme", Role::Caller));
    assert_eq!(ci.models.as_ref().unwrap().len(), 1);
    let p = t.lookup(&digest("processor-token-0123456789")).unwrap();
    assert_eq!((p.tenant.as_str(), p.role), ("", Role::Processor));
    let l = t.lookup(&digest("legacy-token-0123456789")).unwrap();
    assert_eq!(
        l.name,
        format!("token-{}", &to_hex(&digest("legacy-token-0123456789"))[..8])
    );
    assert_eq!(
        (l.tenant.as_str(), l.role, l.source),
        ("", Role::Processor, Source::Config)
    );
}

#[test]
fn configured_key_mistakes_name_their_key() {
    let sha = to_hex(&digest("hashed-token-0123456789"));
    let env = Vars(vec![
        ("SHORT", "short"),
        ("GOOD", "hashed-token-0123456789"),
    ]);
    let cases = [
        (
            "[keys.ci]\ntoken_sha256 = \"abc\"\n".to_owned(),
            "keys.ci.token_sha256",
        ),
        (
            "[keys.ci]\ntoken_env = \"MISSING\"\n".to_owned(),
            "keys.ci.token_env",
        ),
        (
            "[keys.ci]\ntoken_env = \"SHORT\"\n".to_owned(),
            "keys.ci.token_env",
        ),
        ("[keys.ci]\ntenant = \"acme\"\n".to_owned(), "keys.ci"),
        (
            format!("[keys.ci]\ntoken_sha256 = \"{sha}\"\ntoken_env = \"GOOD\"\n"),
            "keys.ci",
        ),
        (
            format!("[keys.ci]\ntenant = \"a b\"\ntoken_sha256 = \"{sha}\"\n"),
            "keys.ci.tenant",
        ),
        (
            format!("[keys.ci]\ntoken_sha256 = \"{sha}\"\nmodels = []\n"),
            "keys.ci.models",
        ),
        (
            format!("[keys.\"a b\"]\ntoken_sha256 = \"{sha}\"\n"),
            "keys.a b",
        ),
        (
            format!("[keys.a]\ntoken_sha256 = \"{sha}\"\n[keys.b]\ntoken_env = \"GOOD\"\n"),
            "keys.b",
        ),
    ];
    for (toml, key) in cases {
        let e = table(&keys_file(&toml), &[], &env).unwrap_err();
        assert_eq!(e.key, key, "{toml}: {e}");
        assert!(!e.to_string().contains("hashed-token"), "{e}");
    }
}

#[test]
fn the_poll_reloads_only_when_the_epoch_moved() {
    assert_eq!(decide(None, 0), Next::Reload);
    assert_eq!(decide(Some(3), 3), Next::Keep);
    assert_eq!(decide(Some(3), 4), Next::Reload);
    // A Redis restarted empty counts from 0 again: different is enough.
    assert_eq!(decide(Some(3), 0), Next::Reload);
}

#[test]
fn a_stale_copy_is_used_only_within_its_bound() {
    let now = Instant::now();
    let ago = |ms| now.checked_sub(Duration::from_millis(ms));
    assert!(usable(None, now, None));
    assert!(usable(ago(60_000), now, None));
    let bound = Some(Duration::from_secs(5));
    assert!(usable(ago(1_000), now, bound));
    assert!(!usable(ago(6_000), now, bound));
    assert!(!usable(None, now, bound));
}

#[test]
fn a_stored_record_is_its_key_and_a_rotation_keeps_all_but_the_digest() {
    use super::store::{Record, field};
    let record = Record {
        name: "ci".into(),
        tenant: "acme".into(),
        role: Role::Caller,
        models: Some(vec!["openai/gpt-4o".into()]),
        sha256: to_hex(&digest("old-token-0123456789")),
        created_ms: 1_000,
        rotated_ms: 0,
    };
    let json = serde_json::to_string(&record).unwrap();
    assert!(json.contains("\"role\":\"caller\""), "{json}");
    assert!(!json.contains("old-token"), "{json}");
    assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), record);
    let (d, k) = record.key().unwrap();
    assert_eq!(d, digest("old-token-0123456789"));
    assert_eq!((k.source, k.models.unwrap().len()), (Source::Api, 1));
    let rotated = record.rotated(&digest("new-token-0123456789"), 2_000);
    assert_eq!((rotated.created_ms, rotated.rotated_ms), (1_000, 2_000));
    assert_eq!(rotated.key().unwrap().0, digest("new-token-0123456789"));
    let broken = Record {
        sha256: "not hex".into(),
        ..record
    };
    assert!(broken.key().is_none());
    // `/` is in no name, so a field names exactly one key.
    assert_eq!(field("acme", "ci"), "acme/ci");
    assert_eq!(field("", "ci"), "/ci");
}
