//! Caller keys end to end: real sockets, real Redis, the fake providers. Two gateway replicas share one Redis: a key
//! created on one works on the other, a revoked or rotated token is refused on both within a second (polled with a
//! deadline), a tenant's admin sees and manages only its tenant's keys, a key limited to some models sees and
//! reaches only those through both doors, and the processor's calls are attributed to the session's tenant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::time::{Duration, Instant};

use e2e_tests::front_door::{request, send};
use e2e_tests::processor::{
    Product, create_session, prompt, prompt_until_done, redis_url, text_reply,
};
use e2e_tests::{Bearer, Harness, generation};
use llm_gateway::keys::{digest, to_hex};
use llm_proto::gateway as pb;
use llm_proto::gateway::keys_service_client::KeysServiceClient;
use prost::Message;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// The configuration's admin key of the unnamed tenant: it manages every tenant's keys.
const ROOT: &str = "root-admin-token-0123456789";
/// How long a revoke may take to hold on every replica.
const PROPAGATION: Duration = Duration::from_secs(1);

type Keys = KeysServiceClient<InterceptedService<Channel, Bearer>>;

/// A key prefix no other test run shares.
fn unique_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("e2e-keys-{}-{nanos}:", std::process::id())
}

/// `[redis]` at the tests' Redis under `prefix`, and the root admin key (by its SHA-256: no secret in the file).
fn keys_config(prefix: &str) -> String {
    format!(
        "[redis]\nurl = \"{}\"\nprefix = \"{prefix}\"\n[keys.root]\nrole = \"admin\"\ntoken_sha256 = \"{}\"\n",
        redis_url(),
        to_hex(&digest(ROOT))
    )
}

/// Polls `check` until it holds or `bound` passes: how long it took, or `None`.
async fn within<F, Fut>(bound: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return Some(start.elapsed());
        }
        if start.elapsed() > bound {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `h` has loaded the keys from Redis once.
async fn ready(h: &Harness) {
    let keys = h.gateway.keys();
    let loaded = within(Duration::from_secs(10), || {
        let ok = keys.store().is_some() && keys.epoch().is_some();
        async move { ok }
    })
    .await;
    assert!(
        loaded.is_some(),
        "the replica never loaded the keys from redis"
    );
}

async fn admin(h: &Harness, token: &str) -> Keys {
    KeysServiceClient::with_interceptor(h.channel().await, Bearer(Some(token.into())))
}

async fn create(
    keys: &mut Keys,
    tenant: &str,
    name: &str,
    role: pb::KeyRole,
    models: &[&str],
) -> Result<String, tonic::Status> {
    let reply = keys
        .create_key(pb::CreateKeyRequest {
            name: name.into(),
            tenant: tenant.into(),
            role: role as i32,
            models: models.iter().map(|m| (*m).to_owned()).collect(),
        })
        .await?
        .into_inner();
    let key = reply.key.unwrap();
    assert_eq!((key.name.as_str(), key.tenant.as_str()), (name, tenant));
    assert_eq!(key.source, pb::KeySource::Api as i32);
    Ok(reply.token)
}

/// How long until `h` accepts `token` (`None`: not within [`PROPAGATION`]).
async fn works_within(h: &Harness, token: &str) -> Option<Duration> {
    within(
        PROPAGATION,
        || async move { accepted(h, token).await.is_ok() },
    )
    .await
}

/// How long until `h` refuses `token` (`None`: not within [`PROPAGATION`]).
async fn refused_within(h: &Harness, token: &str) -> Option<Duration> {
    within(PROPAGATION, || async move {
        accepted(h, token).await == Err(Code::Unauthenticated)
    })
    .await
}

/// Every key `keys`' admin manages, and their `tenant/name`s.
async fn list(keys: &mut Keys) -> (pb::ListKeysResponse, Vec<String>) {
    let listed = keys
        .list_keys(pb::ListKeysRequest::default())
        .await
        .unwrap()
        .into_inner();
    let names = listed
        .keys
        .iter()
        .map(|k| format!("{}/{}", k.tenant, k.name))
        .collect();
    (listed, names)
}

/// Whether `token` is accepted by `h` now (a catalog call: cheap, and authenticated like every other).
async fn accepted(h: &Harness, token: &str) -> Result<(), Code> {
    let mut c = h.client_with_token(Some(token)).await;
    c.list_models(pb::ListModelsRequest::default())
        .await
        .map(|_| ())
        .map_err(|s| s.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_on_one_replica_works_on_the_other_and_a_revoke_holds_on_both_within_a_second() {
    let prefix = unique_prefix();
    let a = Harness::start_with(&keys_config(&prefix)).await;
    let b = Harness::start_with(&keys_config(&prefix)).await;
    ready(&a).await;
    ready(&b).await;
    let token = create(
        &mut admin(&a, ROOT).await,
        "acme",
        "ci",
        pb::KeyRole::Caller,
        &[],
    )
    .await
    .unwrap();
    // The other replica picks it up by polling the epoch.
    let took = works_within(&b, &token).await;
    assert!(took.is_some(), "replica b never accepted the new key");
    // A generation through b, attributed to the key's tenant.
    b.openai.push(text_reply("c1", &["Hi"], (5, 1)));
    let mut on_b = b.client_with_token(Some(&token)).await;
    on_b.generate(pb::GenerateRequest {
        generation: Some(generation("openai/gpt-4o", "Hello")),
    })
    .await
    .unwrap();
    let metrics = b.scrape_metrics().await;
    let line = r#"llm_gateway_tenant_calls_total{tenant="acme",operation="chat"} 1"#;
    assert!(
        metrics.lines().any(|l| l == line),
        "missing {line}\n{metrics}"
    );

    // Revoked through b: refused on both replicas within the bound.
    admin(&b, ROOT)
        .await
        .revoke_key(pb::RevokeKeyRequest {
            name: "ci".into(),
            tenant: "acme".into(),
        })
        .await
        .unwrap();
    let (on_a, on_b) = tokio::join!(refused_within(&a, &token), refused_within(&b, &token));
    assert!(
        on_a.is_some() && on_b.is_some(),
        "revoke not effective within {PROPAGATION:?}: a {on_a:?}, b {on_b:?}"
    );
    // Revoking it again: it is gone.
    let again = admin(&a, ROOT)
        .await
        .revoke_key(pb::RevokeKeyRequest {
            name: "ci".into(),
            tenant: "acme".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_admin_sees_and_manages_only_its_own_tenants_keys() {
    let h = Harness::start_with(&keys_config(&unique_prefix())).await;
    ready(&h).await;
    let mut root = admin(&h, ROOT).await;
    let acme_admin = create(&mut root, "acme", "ops", pb::KeyRole::Admin, &[])
        .await
        .unwrap();
    let globex = create(&mut root, "globex", "ci", pb::KeyRole::Caller, &[])
        .await
        .unwrap();
    assert!(works_within(&h, &acme_admin).await.is_some());
    let mut ops = admin(&h, &acme_admin).await;
    let acme_ci = create(
        &mut ops,
        "acme",
        "ci",
        pb::KeyRole::Caller,
        &["openai/gpt-4o"],
    )
    .await
    .unwrap();
    // Its listing: acme's keys only, and no token anywhere in the reply.
    let (listed, names) = list(&mut ops).await;
    assert_eq!(names, ["acme/ci", "acme/ops"]);
    let bytes = listed.encode_to_vec();
    for token in [&acme_admin, &globex, &acme_ci] {
        assert!(!String::from_utf8_lossy(&bytes).contains(token.as_str()));
    }
    // Another tenant's keys: refused, whatever the call.
    let denied = [
        ops.list_keys(pb::ListKeysRequest {
            tenant: "globex".into(),
        })
        .await
        .map(|_| ()),
        ops.revoke_key(pb::RevokeKeyRequest {
            name: "ci".into(),
            tenant: "globex".into(),
        })
        .await
        .map(|_| ()),
        ops.rotate_key(pb::RotateKeyRequest {
            name: "ci".into(),
            tenant: "globex".into(),
        })
        .await
        .map(|_| ()),
        create(&mut ops, "globex", "mine", pb::KeyRole::Caller, &[])
            .await
            .map(|_| ()),
        // A processor key may act for any tenant: only the unnamed tenant's admin makes one.
        create(&mut ops, "acme", "proc", pb::KeyRole::Processor, &[])
            .await
            .map(|_| ()),
    ];
    for (i, r) in denied.into_iter().enumerate() {
        assert_eq!(r.unwrap_err().code(), Code::PermissionDenied, "call {i}");
    }
    // The root admin sees every tenant's keys, the configuration's among them (the harness's token is a
    // `server.auth_tokens` key, named by its digest's first 8 hex digits).
    let (all, names) = list(&mut root).await;
    let harness = format!("/token-{}", &to_hex(&digest(e2e_tests::TOKEN))[..8]);
    assert_eq!(
        names,
        ["/root", &harness, "acme/ci", "acme/ops", "globex/ci"]
    );
    assert_eq!(all.keys[0].source, pb::KeySource::Config as i32);
    // A configuration key is changed in the configuration only.
    let rotate_root = root
        .rotate_key(pb::RotateKeyRequest {
            name: "root".into(),
            tenant: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(rotate_root.code(), Code::FailedPrecondition);
    // A caller key is no admin, and may not act for another tenant.
    let mut ci = admin(&h, &acme_ci).await;
    assert_eq!(
        ci.list_keys(pb::ListKeysRequest::default())
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    let mut as_globex = h.client_with_token(Some(&acme_ci)).await;
    let mut req = tonic::Request::new(pb::ListModelsRequest::default());
    req.metadata_mut()
        .insert("x-tenant", "globex".parse().unwrap());
    assert_eq!(
        as_globex.list_models(req).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    // A rotation: the old token stops working, the new one works.
    let rotated = ops
        .rotate_key(pb::RotateKeyRequest {
            name: "ci".into(),
            tenant: "acme".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(rotated.token, acme_ci);
    assert!(rotated.key.unwrap().rotated_unix_ms > 0);
    assert!(refused_within(&h, &acme_ci).await.is_some());
    assert!(works_within(&h, &rotated.token).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_key_sees_and_reaches_only_its_models_through_both_doors() {
    const LIMITED: &str = "limited-caller-token-0123456789";
    let h = Harness::start_with(&format!(
        "[keys.limited]\ntenant = \"acme\"\ntoken_sha256 = \"{}\"\nmodels = [\"openai/gpt-4o\"]\n",
        to_hex(&digest(LIMITED))
    ))
    .await;
    let mut c = h.client_with_token(Some(LIMITED)).await;
    let listed = c
        .list_models(pb::ListModelsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = listed.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["openai/gpt-4o"]);
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("GET", "/v1/models", Some(LIMITED), ""),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["openai/gpt-4o"]);

    // Another model: refused as a model nobody serves, on gRPC and on HTTP, naming only the key's model.
    let other = c
        .generate(pb::GenerateRequest {
            generation: Some(generation("anthropic/claude-haiku-4-5", "Hi")),
        })
        .await
        .unwrap_err();
    assert_eq!(other.code(), Code::NotFound);
    assert!(
        !other.message().contains("anthropic/claude-sonnet"),
        "{}",
        other.message()
    );
    let get = c
        .get_model(pb::GetModelRequest {
            model: "anthropic/claude-haiku-4-5".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(get.code(), Code::NotFound);
    let chat = |model: &str| {
        format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"Hi"}}]}}"#)
    };
    let (forbidden, _, forbidden_body) = send(
        h.http_addr,
        false,
        request(
            "POST",
            "/v1/chat/completions",
            Some(LIMITED),
            &chat("anthropic/claude-haiku-4-5"),
        ),
    )
    .await;
    let (unknown, _, unknown_body) = send(
        h.http_addr,
        false,
        request(
            "POST",
            "/v1/chat/completions",
            Some(LIMITED),
            &chat("nobody/serves-this"),
        ),
    )
    .await;
    assert_eq!(
        (forbidden.as_u16(), unknown.as_u16()),
        (404, 404),
        "{forbidden_body}\n{unknown_body}"
    );
    let shape = |body: &str| {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        (v["error"]["type"].clone(), v["error"]["code"].clone())
    };
    assert_eq!(shape(&forbidden_body), shape(&unknown_body));
    assert!(
        !forbidden_body.contains("claude-sonnet"),
        "{forbidden_body}"
    );
    let (status, _, _) = send(
        h.http_addr,
        false,
        request(
            "GET",
            "/v1/models/anthropic%2Fclaude-haiku-4-5",
            Some(LIMITED),
            "",
        ),
    )
    .await;
    assert_eq!(status, 404);
    // Its own model works.
    h.openai.push(text_reply("c1", &["Hi"], (5, 1)));
    c.generate(pb::GenerateRequest {
        generation: Some(generation("openai/gpt-4o", "Hi")),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processors_calls_are_attributed_to_the_sessions_tenant() {
    const ACME: &str = "acme-tenant-token-0123456789";
    let p = Product::start("[tenants.acme]\ntokens = [\"acme-tenant-token-0123456789\"]\n").await;
    let mut acme = p.client_with_token(ACME).await;
    let s = create_session(&mut acme, Default::default()).await;
    assert_eq!(s.tenant, "acme");
    p.gateway.openai.push(text_reply("c1", &["Hello"], (5, 1)));
    prompt_until_done(&mut acme, prompt(&s.id, "Hi")).await;
    let metrics = p.gateway.scrape_metrics().await;
    let chat: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("llm_gateway_tenant_calls_total{") && l.contains(r#"operation="chat""#)
        })
        .collect();
    assert!(!chat.is_empty(), "{metrics}");
    assert!(
        chat.iter().all(|l| l.contains(r#"tenant="acme""#)),
        "{chat:?}"
    );
}
