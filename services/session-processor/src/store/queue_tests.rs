use std::time::{Duration, Instant};

use llm_proto::sessions as pb;
use prost::Message as _;

use super::{Delivery, MAX_QUEUED_PROMPTS, Queued};
use crate::store::test_support::{
    cleanup, leased_session, new_session, prompt, prompt_text, queued_texts, store,
};
use crate::store::{Store, StoreError};

/// The user message a queued prompt becomes (a fresh id).
fn user_message(session_id: &str, q: &Queued) -> pb::Message {
    pb::Message {
        id: crate::ids::new("msg"),
        session_id: session_id.to_string(),
        role: pb::Role::User as i32,
        parts: vec![pb::Part {
            id: crate::ids::new("prt"),
            kind: Some(pb::part::Kind::Text(pb::TextPart {
                text: prompt_text(&q.request).to_string(),
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}

async fn raw_queue(store: &Store, session_id: &str) -> Vec<Vec<u8>> {
    redis::cmd("LRANGE")
        .arg(store.db.keys(session_id).unwrap().queue())
        .arg(0)
        .arg(-1)
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_queued_prompt_leaves_the_queue_only_in_the_write_that_stores_its_message() {
    let (store, prefix) = store().await;
    let (sid, fence) = leased_session(&store, "replica-a").await;
    let mut tags = Vec::new();
    for text in ["one", "two", "three"] {
        tags.push(
            store
                .queue()
                .enqueue_prompt(&sid, &prompt(&sid, text))
                .await
                .unwrap(),
        );
    }
    assert_eq!(queued_texts(&store, &sid).await, ["one", "two", "three"]);
    let queued = store.queue().queued_prompts(&sid).await.unwrap();
    assert_eq!(
        queued.iter().map(|q| q.tag.clone()).collect::<Vec<_>>(),
        tags
    );
    // Reading takes nothing out, and an entry is still a plain `PromptRequest` to any reader (an older replica).
    let raw = raw_queue(&store, &sid).await;
    assert_eq!(raw.len(), 3);
    // The tag comes first, as field 1000, the number `PromptRequest` reserves (length-delimited: its key is one
    // varint).
    let key = prost::encoding::decode_varint(&mut raw[0].as_slice()).unwrap();
    assert_eq!((key >> 3, key & 7), (1000, 2));
    assert_eq!(
        pb::PromptRequest::decode(raw[0].as_slice()).unwrap(),
        queued[0].request
    );

    // A stale fence writes nothing and leaves the prompt queued.
    let first = user_message(&sid, &queued[0]);
    let stale = crate::store::Fence {
        token: fence.token + 1,
        ..fence.clone()
    };
    let err = store
        .messages()
        .deliver_prompt_message(&first, Some(&stale), &queued[0])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    assert_eq!(
        store.queue().prompt_delivery(&sid, &tags[0]).await.unwrap(),
        Delivery::Queued
    );
    assert!(
        store
            .messages()
            .get_message(&sid, &first.id)
            .await
            .unwrap()
            .is_none()
    );

    // Delivered: the message stored, the prompt gone from the head, the tag recorded as the message.
    assert!(
        store
            .messages()
            .deliver_prompt_message(&first, Some(&fence), &queued[0])
            .await
            .unwrap()
    );
    assert_eq!(
        store.queue().prompt_delivery(&sid, &tags[0]).await.unwrap(),
        Delivery::Delivered(first.id.clone())
    );
    assert!(
        store
            .messages()
            .get_message(&sid, &first.id)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store.queue().queued_prompts(&sid).await.unwrap()[..],
        queued[1..]
    );
    // Delivering it again (a retry, another taker) finds it gone and writes nothing.
    let again = user_message(&sid, &queued[0]);
    assert!(
        !store
            .messages()
            .deliver_prompt_message(&again, Some(&fence), &queued[0])
            .await
            .unwrap()
    );
    assert!(
        store
            .messages()
            .get_message(&sid, &again.id)
            .await
            .unwrap()
            .is_none()
    );
    // Only the head can be delivered: the third waits for the second.
    let third = user_message(&sid, &queued[2]);
    assert!(
        !store
            .messages()
            .deliver_prompt_message(&third, Some(&fence), &queued[2])
            .await
            .unwrap()
    );
    assert_eq!(
        store.queue().prompt_delivery(&sid, &tags[2]).await.unwrap(),
        Delivery::Queued
    );

    assert_eq!(
        store
            .queue()
            .prompt_delivery(&sid, "qp_never")
            .await
            .unwrap(),
        Delivery::Unknown
    );
    store.sessions().delete_session(&sid).await.unwrap();
    assert_eq!(
        store.queue().prompt_delivery(&sid, &tags[1]).await.unwrap(),
        Delivery::Unknown
    );
    assert_eq!(
        store.queue().prompt_delivery(&sid, &tags[0]).await.unwrap(),
        Delivery::Unknown
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_prompt_an_older_replica_queued_is_delivered_by_its_bytes() {
    let (store, prefix) = store().await;
    let (sid, fence) = leased_session(&store, "replica-a").await;
    let _: () = redis::cmd("RPUSH")
        .arg(store.db.keys(&sid).unwrap().queue())
        .arg(prompt(&sid, "untagged").encode_to_vec())
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    let queued = store.queue().queued_prompts(&sid).await.unwrap();
    assert_eq!((queued.len(), queued[0].tag.as_str()), (1, ""));
    assert_eq!(prompt_text(&queued[0].request), "untagged");
    let m = user_message(&sid, &queued[0]);
    assert!(
        store
            .messages()
            .deliver_prompt_message(&m, Some(&fence), &queued[0])
            .await
            .unwrap()
    );
    assert!(!store.queue().has_queued_prompts(&sid).await.unwrap());
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_session_queues_at_most_its_limit() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    for i in 0..MAX_QUEUED_PROMPTS {
        store
            .queue()
            .enqueue_prompt(&sid, &prompt(&sid, &i.to_string()))
            .await
            .unwrap();
    }
    let err = store
        .queue()
        .enqueue_prompt(&sid, &prompt(&sid, "over"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::QueueFull(MAX_QUEUED_PROMPTS)),
        "{err}"
    );
    assert_eq!(raw_queue(&store, &sid).await.len(), MAX_QUEUED_PROMPTS);
    // Refusals are outcomes, not Redis failures.
    assert_eq!(store.write_failures(), 0);
    let err = store
        .queue()
        .enqueue_prompt("ses_missing", &prompt("ses_missing", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_deliveries_deliver_every_prompt_exactly_once_in_queue_order() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    const N: usize = 200;
    let producer = {
        let (store, sid) = (store.clone(), sid.clone());
        tokio::spawn(async move {
            for i in 0..N {
                // Below the limit: the producer waits while the queue is full.
                while let Err(StoreError::QueueFull(_)) = store
                    .queue()
                    .enqueue_prompt(&sid, &prompt(&sid, &i.to_string()))
                    .await
                {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    // Two deliverers racing each other and the producer, each reading the queue and delivering what it read.
    let deliverer = |store: Store, sid: String| {
        tokio::spawn(async move {
            let mut delivered = Vec::new();
            loop {
                let queued = match store.queue().queued_prompts(&sid).await {
                    Ok(q) => q,
                    Err(_) => break delivered,
                };
                for q in &queued {
                    match store
                        .messages()
                        .deliver_prompt_message(&user_message(&sid, q), None, q)
                        .await
                    {
                        Ok(true) => {
                            delivered.push(prompt_text(&q.request).parse::<usize>().unwrap())
                        }
                        Ok(false) => break,
                        Err(StoreError::NotFound(_)) => return delivered,
                        Err(e) => panic!("{e}"),
                    }
                }
                if store.sessions().get_session(&sid).await.unwrap().is_none() {
                    break delivered;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let d1 = deliverer(store.clone(), sid.clone());
    let d2 = deliverer(store.clone(), sid.clone());
    producer.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.queue().has_queued_prompts(&sid).await.unwrap() {
        assert!(Instant::now() < deadline, "queue never emptied");
        tokio::task::yield_now().await;
    }
    store.sessions().delete_session(&sid).await.unwrap();
    let mut all = Vec::new();
    for delivered in [d1.await.unwrap(), d2.await.unwrap()] {
        assert!(
            delivered.windows(2).all(|w| w[0] < w[1]),
            "each deliverer keeps queue order: {delivered:?}"
        );
        all.extend(delivered);
    }
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "every prompt exactly once");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_delivery_reads_a_bounded_batch_oldest_first() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    for i in 0..super::DELIVERY_BATCH + 3 {
        store
            .queue()
            .enqueue_prompt(&sid, &prompt(&sid, &i.to_string()))
            .await
            .unwrap();
    }
    let batch = store.queue().queued_prompts(&sid).await.unwrap();
    assert_eq!(
        batch
            .iter()
            .map(|q| prompt_text(&q.request).to_string())
            .collect::<Vec<_>>(),
        (0..super::DELIVERY_BATCH)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
    );
    for q in &batch {
        assert!(
            store
                .messages()
                .deliver_prompt_message(&user_message(&sid, q), None, q)
                .await
                .unwrap()
        );
    }
    assert_eq!(queued_texts(&store, &sid).await.len(), 3, "the rest waits");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn waiting_prompts_are_the_queue_left_in_place_and_none_on_an_empty_one() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let queue = store.queue();
    assert!(queue.waiting(&sid).await.unwrap().is_empty());
    for text in ["first", "second"] {
        queue
            .enqueue_prompt(&sid, &prompt(&sid, text))
            .await
            .unwrap();
    }
    let waiting = queue.waiting(&sid).await.unwrap();
    let texts: Vec<&str> = waiting.iter().map(|q| prompt_text(&q.request)).collect();
    assert_eq!(texts, ["first", "second"]);
    // Read, not taken: they leave the queue only when delivered.
    assert_eq!(queued_texts(&store, &sid).await, ["first", "second"]);
    cleanup(&store, &prefix).await;
}
