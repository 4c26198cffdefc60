use super::super::test_support::{cleanup, store};
use super::*;
use crate::ids;
use prost::Message as _;

fn session(tenant: &str, ms: i64) -> pb::Session {
    pb::Session {
        id: ids::new("ses"),
        tenant: tenant.into(),
        created_at: Some(prost_types::Timestamp {
            seconds: ms / 1000,
            nanos: 0,
        }),
        ..Default::default()
    }
}

async fn ids(store: &Store, scope: Scope<'_>) -> Vec<String> {
    let (page, next) = store.list_sessions(scope, 1000, None).await.unwrap();
    assert_eq!(next, None);
    page.into_iter().map(|l| l.session.id).collect()
}

/// What a version without tenant indexes wrote: the global index entry and the session.
async fn create_old_style(store: &Store, prefix: &str, s: &pb::Session, score: i64) {
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(keys::index(prefix))
        .arg(score)
        .arg(&s.id)
        .ignore()
        .cmd("SET")
        .arg(keys::SessionKeys::new(prefix, &s.id).unwrap().session())
        .arg(s.encode_to_vec())
        .ignore()
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
}

#[tokio::test]
async fn each_tenant_lists_its_own_sessions_and_an_operator_all() {
    let (store, prefix) = store().await;
    let acme = session("acme", 1_000_000);
    let evil = session("evil", 2_000_000);
    let plain = session("", 3_000_000);
    for s in [&acme, &evil, &plain] {
        store.create_session(s).await.unwrap();
    }
    assert_eq!(
        ids(&store, Scope::Tenant("acme")).await,
        std::slice::from_ref(&acme.id)
    );
    assert_eq!(
        ids(&store, Scope::Tenant("evil")).await,
        std::slice::from_ref(&evil.id)
    );
    assert_eq!(
        ids(&store, Scope::Tenant("")).await,
        std::slice::from_ref(&plain.id)
    );
    assert!(ids(&store, Scope::Tenant("nobody")).await.is_empty());
    assert_eq!(
        ids(&store, Scope::All).await,
        [plain.id.clone(), evil.id.clone(), acme.id.clone()]
    );
    // A foreign entry in a tenant's index (never written by the store) is still not listed there.
    let _: i64 = redis::cmd("ZADD")
        .arg(keys::tenant_sessions(&prefix, "acme"))
        .arg(5_000_000)
        .arg(&evil.id)
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    assert_eq!(
        ids(&store, Scope::Tenant("acme")).await,
        std::slice::from_ref(&acme.id)
    );

    assert!(store.delete_session(&acme.id).await.unwrap());
    let left: i64 = redis::cmd("ZCARD")
        .arg(keys::tenant_sessions(&prefix, "acme"))
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    assert_eq!(left, 1, "deletion removes the session's own entry");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn sessions_from_before_the_tenant_indexes_are_copied_into_them_once() {
    let (store, prefix) = store().await;
    // More than one batch, every entry with the same score (a tie across the batch boundary).
    let mut old = Vec::new();
    for i in 0..(INDEX_BATCH + 40) {
        let tenant = if i % 2 == 0 { "" } else { "acme" };
        let s = session(tenant, 0);
        create_old_style(&store, &prefix, &s, 1_000).await;
        old.push(s);
    }
    assert!(ids(&store, Scope::Tenant("acme")).await.is_empty());
    assert_eq!(store.index_tenants().await.unwrap(), old.len());
    let mut acme = ids(&store, Scope::Tenant("acme")).await;
    let mut plain = ids(&store, Scope::Tenant("")).await;
    acme.sort();
    plain.sort();
    let want = |t: &str| {
        let mut v: Vec<String> = old
            .iter()
            .filter(|s| s.tenant == t)
            .map(|s| s.id.clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(acme, want("acme"));
    assert_eq!(plain, want(""));

    // The mark moved: later starts look again only at entries within the margin of it.
    let late = session("acme", 0);
    create_old_style(&store, &prefix, &late, 1_000_000).await;
    assert_eq!(store.index_tenants().await.unwrap(), old.len() + 1);
    let later = session("", 0);
    create_old_style(&store, &prefix, &later, 2_000_000).await;
    assert_eq!(
        store.index_tenants().await.unwrap(),
        2,
        "the mark bounds the work"
    );
    assert!(ids(&store, Scope::Tenant("acme")).await.contains(&late.id));
    assert!(ids(&store, Scope::Tenant("")).await.contains(&later.id));
    cleanup(&store, &prefix).await;
}
