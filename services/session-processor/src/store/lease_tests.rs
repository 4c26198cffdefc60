//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use crate::ids;
use llm_proto::sessions as pb;
use std::time::Duration;

use super::super::test_support::{
    cleanup, message, new_session, session_at, store, text_part, until_lease_free,
};
use super::*;

#[tokio::test]
async fn lease_acquire_renew_release_and_fencing() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(30);

    let a = store
        .leases()
        .acquire_lease(&sid, "replica-a", ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.owner, "replica-a");
    assert!(
        store
            .leases()
            .acquire_lease(&sid, "replica-b", ttl)
            .await
            .unwrap()
            .is_none()
    );
    // The holder itself is refused too: a second prompt on the same replica must queue, not take over.
    assert!(
        store
            .leases()
            .acquire_lease(&sid, "replica-a", ttl)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.leases().lease_holder(&sid).await.unwrap(),
        Some(("replica-a".to_string(), a.token))
    );
    assert!(store.leases().renew_lease(&sid, &a, ttl).await.unwrap());
    let forged = Fence {
        owner: "replica-a".into(),
        token: a.token + 1,
    };
    assert!(
        !store
            .leases()
            .renew_lease(&sid, &forged, ttl)
            .await
            .unwrap()
    );
    store.leases().release_lease(&sid, &forged).await.unwrap();
    assert!(
        store.leases().lease_holder(&sid).await.unwrap().is_some(),
        "a wrong fence must not release"
    );
    store
        .sessions()
        .put_session(&session_at(&sid, 1), Some(&a))
        .await
        .unwrap();
    store.leases().release_lease(&sid, &a).await.unwrap();
    assert_eq!(store.leases().lease_holder(&sid).await.unwrap(), None);

    // Tokens grow with every acquisition.
    let b = store
        .leases()
        .acquire_lease(&sid, "host:with:colons", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(b.token > a.token);
    assert_eq!(
        store.leases().lease_holder(&sid).await.unwrap(),
        Some(("host:with:colons".to_string(), b.token))
    );
    store.leases().release_lease(&sid, &b).await.unwrap();

    // A holder whose lease expires is fenced out once someone else takes over.
    let stale = store
        .leases()
        .acquire_lease(&sid, "replica-a", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    assert!(stale.token > b.token);
    let m = ids::new("msg");
    store
        .messages()
        .put_message(&message(&sid, &m, pb::Role::Assistant), Some(&stale))
        .await
        .unwrap();
    until_lease_free(&store, &sid).await;
    // Expired but not yet taken: the stale fence no longer matches either.
    let err = store
        .messages()
        .put_part(&text_part(&sid, &m, &ids::new("prt"), "late"), Some(&stale))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    let fresh = store
        .leases()
        .acquire_lease(&sid, "replica-b", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(fresh.token > stale.token);
    assert!(!store.leases().renew_lease(&sid, &stale, ttl).await.unwrap());

    let mut overwritten = session_at(&sid, 1);
    overwritten.title = "stale".into();
    for result in [
        store
            .sessions()
            .put_session(&overwritten, Some(&stale))
            .await,
        store
            .messages()
            .put_message(&message(&sid, &m, pb::Role::User), Some(&stale))
            .await,
        store
            .messages()
            .put_part(&text_part(&sid, &m, &ids::new("prt"), "late"), Some(&stale))
            .await,
        store
            .messages()
            .put_parts(
                &[text_part(&sid, &m, &ids::new("prt"), "late")],
                Some(&stale),
            )
            .await,
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, StoreError::Fenced { owner, token, .. } if owner == "replica-a" && *token == stale.token),
            "{err}"
        );
    }
    assert_ne!(
        store
            .sessions()
            .get_session(&sid)
            .await
            .unwrap()
            .unwrap()
            .title,
        "stale"
    );
    assert_eq!(
        store
            .messages()
            .get_message(&sid, &m)
            .await
            .unwrap()
            .unwrap()
            .role,
        pb::Role::Assistant as i32
    );
    assert!(
        store
            .messages()
            .get_message(&sid, &m)
            .await
            .unwrap()
            .unwrap()
            .parts
            .is_empty()
    );
    // The new holder writes fine; the stale holder's release leaves the new lease alone.
    store
        .messages()
        .put_part(&text_part(&sid, &m, &ids::new("prt"), "ok"), Some(&fresh))
        .await
        .unwrap();
    store.leases().release_lease(&sid, &stale).await.unwrap();
    assert_eq!(
        store.leases().lease_holder(&sid).await.unwrap(),
        Some(("replica-b".to_string(), fresh.token))
    );

    let err = store
        .leases()
        .acquire_lease("ses_missing", "replica-a", ttl)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // Refusals are outcomes, not Redis failures.
    assert_eq!(store.write_failures(), 0);
    cleanup(&store, &prefix).await;
}
