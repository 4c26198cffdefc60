use super::super::test_support::{cleanup, redis_url, session_at, store, ts};
use super::*;
use crate::ids;
use crate::store::Store;

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
    let (page, next) = store
        .index()
        .list_sessions(scope, 1000, None)
        .await
        .unwrap();
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
        .query_async(&mut store.db.conn.clone())
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
        store.sessions().create_session(s).await.unwrap();
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
    // A foreign entry in a tenant's index (never written by the store) is not listed there, and the listing prunes
    // it (it is old).
    let _: i64 = redis::cmd("ZADD")
        .arg(keys::tenant_sessions(&prefix, "acme"))
        .arg(5_000_000)
        .arg(&evil.id)
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    assert_eq!(
        ids(&store, Scope::Tenant("acme")).await,
        std::slice::from_ref(&acme.id)
    );

    assert!(store.sessions().delete_session(&acme.id).await.unwrap());
    let left: i64 = redis::cmd("ZCARD")
        .arg(keys::tenant_sessions(&prefix, "acme"))
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    assert_eq!(
        left, 0,
        "deletion removes the session's own entry, the listing the foreign one"
    );
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
    assert_eq!(store.index().index_tenants().await.unwrap(), old.len());
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
    assert_eq!(store.index().index_tenants().await.unwrap(), old.len() + 1);
    let later = session("", 0);
    create_old_style(&store, &prefix, &later, 2_000_000).await;
    assert_eq!(
        store.index().index_tenants().await.unwrap(),
        2,
        "the mark bounds the work"
    );
    assert!(ids(&store, Scope::Tenant("acme")).await.contains(&late.id));
    assert!(ids(&store, Scope::Tenant("")).await.contains(&later.id));
    cleanup(&store, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_holds_at_most_its_quota_even_when_creating_concurrently() {
    let (store, prefix) = store().await;
    // Two connections (two replicas), so the creations' commands interleave in Redis.
    let other = Store::connect(&redis_url(), &prefix).await.unwrap();
    let tenant = ids::new("quota");
    let creates: Vec<_> = (0..12)
        .map(|i| {
            let store = if i % 2 == 0 {
                store.clone()
            } else {
                other.clone()
            };
            let s = session(&tenant, 1_700_000_000_000 + i);
            tokio::spawn(async move { store.sessions().create_session_within(&s, Some(3)).await })
        })
        .collect();
    let mut created = 0;
    for c in creates {
        match c.await.unwrap() {
            Ok(()) => created += 1,
            Err(StoreError::TooManySessions(3)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(created <= 3, "{created} created");
    // Refused ones took themselves back out; one at a time, the tenant fills up to exactly its quota.
    while created < 3 {
        store
            .sessions()
            .create_session_within(&session(&tenant, 1), Some(3))
            .await
            .unwrap();
        created += 1;
    }
    let listed = ids(&store, Scope::Tenant(&tenant)).await;
    assert_eq!(listed.len(), 3);
    assert!(matches!(
        store
            .sessions()
            .create_session_within(&session(&tenant, 2), Some(3))
            .await,
        Err(StoreError::TooManySessions(3))
    ));
    assert_eq!(ids(&store, Scope::Tenant(&tenant)).await.len(), 3);
    // Another tenant's quota is its own; a deleted session frees its place.
    store
        .sessions()
        .create_session_within(&session(&ids::new("other"), 1), Some(3))
        .await
        .unwrap();
    store.sessions().delete_session(&listed[0]).await.unwrap();
    store
        .sessions()
        .create_session_within(&session(&tenant, 2), Some(3))
        .await
        .unwrap();
    assert!(matches!(
        store
            .sessions()
            .create_session_within(&session(&tenant, 3), Some(3))
            .await,
        Err(StoreError::TooManySessions(3))
    ));
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_listing_prunes_the_index_entries_a_failed_creation_left_once_they_are_old() {
    let (store, prefix) = store().await;
    let tenant = ids::new("stale");
    let index = keys::tenant_sessions(&prefix, &tenant);
    let now = super::super::now_millis();
    // A creation that died between its index entry and its record, two minutes ago, and one in progress now.
    let (dead, in_progress) = (ids::new("ses"), ids::new("ses"));
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(&index)
        .arg(now - 120_000)
        .arg(&dead)
        .cmd("ZADD")
        .arg(&index)
        .arg(now)
        .arg(&in_progress)
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    let live = session(&tenant, now);
    store
        .sessions()
        .create_session_within(&live, Some(3))
        .await
        .unwrap();
    // At the quota: the dead entry counts until a listing sees it.
    assert!(matches!(
        store
            .sessions()
            .create_session_within(&session(&tenant, now), Some(3))
            .await,
        Err(StoreError::TooManySessions(3))
    ));
    assert_eq!(
        ids(&store, Scope::Tenant(&tenant)).await,
        std::slice::from_ref(&live.id)
    );
    let score = |id: String| {
        let (store, index) = (store.clone(), index.clone());
        async move {
            let s: Option<f64> = redis::cmd("ZSCORE")
                .arg(&index)
                .arg(id)
                .query_async(&mut store.db.conn.clone())
                .await
                .unwrap();
            s
        }
    };
    assert!(score(dead).await.is_none(), "the old entry is pruned");
    assert!(
        score(in_progress).await.is_some(),
        "a young one may be a creation in progress"
    );
    store
        .sessions()
        .create_session_within(&session(&tenant, now), Some(3))
        .await
        .unwrap();
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn session_crud_and_paging_newest_first() {
    let (store, prefix) = store().await;
    // Ascending ids; s3 and s4 share a millisecond so paging must break the tie by id.
    let ids: Vec<String> = (0..5).map(|_| ids::new("ses")).collect();
    let created = [1_000, 2_000, 3_000, 3_000, 4_000];
    for (id, ms) in ids.iter().zip(created) {
        store
            .sessions()
            .create_session(&session_at(id, ms))
            .await
            .unwrap();
    }
    let err = store
        .sessions()
        .create_session(&session_at(&ids[0], 9_000))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Exists(_)), "{err}");

    // Status is live data: never stored, even when the caller passes one.
    let mut s = store
        .sessions()
        .get_session(&ids[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.created_at, Some(ts(1_000)));
    s.title = "Renamed".into();
    s.status = Some(pb::SessionStatus {
        kind: pb::session_status::Kind::Busy as i32,
        ..Default::default()
    });
    store.sessions().put_session(&s, None).await.unwrap();
    let got = store
        .sessions()
        .get_session(&ids[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.title, "Renamed");
    assert_eq!(got.status, None);
    assert_eq!(
        store.sessions().get_session("ses_missing").await.unwrap(),
        None
    );
    let err = store
        .sessions()
        .put_session(&session_at("ses_missing", 1), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");

    // An index entry without a session (a creation cut short) is skipped, not listed.
    let _: i64 = redis::cmd("ZADD")
        .arg(keys::index(&prefix))
        .arg(3_500)
        .arg("ses_dangling")
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();

    let newest_first: Vec<&String> = vec![&ids[4], &ids[3], &ids[2], &ids[1], &ids[0]];
    for page_size in [1, 2, 3, 5, 10] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let (page, next) = store
                .index()
                .list_sessions(Scope::All, page_size, after.as_deref())
                .await
                .unwrap();
            assert!(!page.is_empty(), "no empty pages");
            assert!(page.len() <= page_size);
            seen.extend(page.into_iter().map(|l| l.session.id));
            pages += 1;
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(
            seen.iter().collect::<Vec<_>>(),
            newest_first,
            "page size {page_size}"
        );
        assert_eq!(pages, 5usize.div_ceil(page_size), "page size {page_size}");
    }
    let (page, next) = store
        .index()
        .list_sessions(Scope::All, usize::MAX, None)
        .await
        .unwrap();
    assert_eq!((page.len(), next), (5, None));
    // Each session's own cursor resumes right after it.
    for (i, listed) in page.iter().enumerate() {
        let (rest, _) = store
            .index()
            .list_sessions(Scope::All, 1, Some(&listed.cursor))
            .await
            .unwrap();
        assert_eq!(
            rest.first().map(|l| &l.session.id),
            newest_first.get(i + 1).copied()
        );
    }
    let err = store
        .index()
        .list_sessions(Scope::All, 2, Some("garbage"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");

    assert!(store.sessions().delete_session(&ids[2]).await.unwrap());
    assert!(!store.sessions().delete_session(&ids[2]).await.unwrap());
    assert_eq!(store.sessions().get_session(&ids[2]).await.unwrap(), None);
    let (page, next) = store
        .index()
        .list_sessions(Scope::Tenant(""), 10, None)
        .await
        .unwrap();
    assert_eq!(page.len(), 4);
    assert_eq!(next, None);
    assert_eq!(store.write_failures(), 0);
    cleanup(&store, &prefix).await;
}

#[test]
fn session_cursors_parse() {
    assert_eq!(
        parse_session_cursor("123:ses_a:b").unwrap(),
        (123, "ses_a:b".to_string())
    );
    assert!(parse_session_cursor("123:").is_err());
    assert!(parse_session_cursor("x:ses").is_err());
}
