//! Session events through both services: deltas reach a stream on the loop's replica at once while the event log
//! in Redis gets them coalesced (few commands), and a Subscribe after any event id, on the same replica or on
//! another one, live or after the loop finished, gets exactly the remaining events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::Bearer;
use e2e_tests::processor::{PROCESSOR_TOKEN, Product, SessionsClient, prompt};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use session_processor::engine::{Engine, gateway_client};
use session_processor::store::Store;
use spb::session_event::Event as SE;

/// A paced reply streaming `n` text deltas `"<i> "`.
fn many_deltas(n: usize, gap: Duration) -> (Reply, String) {
    let pieces: Vec<String> = (0..n).map(|i| format!("{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let body = ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-ev")
        .text(&refs)
        .finish("stop", Some((10, n as u64)));
    (Reply::sse(body).pace(gap), pieces.concat())
}

async fn new_session(c: &mut SessionsClient) -> spb::Session {
    c.create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
}

/// Reads a stream's session events up to and including `done` (30 s at most).
async fn read_until_done<T>(
    stream: &mut tonic::Streaming<T>,
    event: impl Fn(T) -> Option<spb::SessionEvent>,
) -> Vec<spb::SessionEvent> {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(r) = stream.message().await.unwrap() {
            let ev = event(r).unwrap();
            let done = matches!(ev.event, Some(SE::Done(_)));
            out.push(ev);
            if done {
                return;
            }
        }
        panic!("the stream ended before done");
    })
    .await
    .expect("done within 30 s");
    out
}

async fn subscribe(
    c: &mut SessionsClient,
    session_id: &str,
    after: &str,
) -> Vec<spb::SessionEvent> {
    let mut s = c
        .subscribe(spb::SubscribeRequest {
            session_id: session_id.into(),
            after_event_id: after.into(),
        })
        .await
        .unwrap()
        .into_inner();
    read_until_done(&mut s, |r| r.event).await
}

fn text_of(events: &[spb::SessionEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(SE::PartDelta(d)) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

/// A second processor replica on the same Redis prefix (no loop runs there: its streams read the event log).
async fn second_replica(p: &Product) -> (SessionsClient, tokio::task::JoinHandle<()>) {
    let config = p.engine.config().clone();
    let store = Store::connect(&config.redis_url, &config.redis_prefix)
        .await
        .unwrap();
    let engine = Engine::new(
        store,
        gateway_client(&config.gateway_url, &config.gateway_token).unwrap(),
        config,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        session_processor::server::run(engine, listener, std::future::pending())
            .await
            .unwrap();
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client =
        SessionServiceClient::with_interceptor(channel, Bearer(Some(PROCESSOR_TOKEN.into())));
    (client, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_deltas_cost_few_event_log_commands_with_a_local_subscriber() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    let (reply, expected) = many_deltas(1000, Duration::from_millis(1));
    p.gateway.openai.push(reply);
    let before = p.engine.store().event_log().commands();
    let started = std::time::Instant::now();
    let mut stream = c.prompt(prompt(&s.id, "count")).await.unwrap().into_inner();
    let events = read_until_done(&mut stream, |r| r.event).await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e.event, Some(SE::PartDelta(_))))
        .count();
    assert_eq!(deltas, 1000);
    assert_eq!(text_of(&events), expected);
    // Everything the loop published is in the log once the lease is released; wait for that (the loop ends
    // right after `done`) so the count includes the last write.
    tokio::time::timeout(Duration::from_secs(10), async {
        while p
            .engine
            .store()
            .leases()
            .lease_holder(&s.id)
            .await
            .unwrap()
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the loop releases its lease");
    let commands = p.engine.store().event_log().commands() - before;
    eprintln!(
        "1 000 deltas in {:?}: {commands} event-log commands",
        started.elapsed()
    );
    assert!(
        commands <= 50,
        "{commands} event-log commands for 1 000 deltas (at most 50 allowed)"
    );
    // And the log holds every event the local stream saw, with the same ids.
    let logged = subscribe(&mut c, &s.id, "0").await;
    let tail = &logged[logged.len() - events.len()..];
    assert_eq!(tail, events.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_after_any_event_id_gets_exactly_the_rest_live_and_after_the_loop() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    let (mut remote, _server) = second_replica(&p).await;
    let (reply, expected) = many_deltas(120, Duration::from_millis(5));
    p.gateway.openai.push(reply);
    let mut stream = c.prompt(prompt(&s.id, "count")).await.unwrap().into_inner();

    // While the loop runs: after reading k events of the prompt stream, a second connection (same replica) and
    // the other replica each subscribe after the k-th event's id.
    let mut seen: Vec<spb::SessionEvent> = Vec::new();
    let mut live = Vec::new();
    for k in [1usize, 4, 9, 30, 77] {
        while seen.len() < k {
            seen.push(stream.message().await.unwrap().unwrap().event.unwrap());
        }
        let after = seen[k - 1].event_id.clone();
        let sid = s.id.clone();
        let mut local = p.client().await;
        live.push((
            k,
            "same replica",
            tokio::spawn({
                let (sid, after) = (sid.clone(), after.clone());
                async move { subscribe(&mut local, &sid, &after).await }
            }),
        ));
        let mut far = remote.clone();
        live.push((
            k,
            "other replica",
            tokio::spawn(async move { subscribe(&mut far, &sid, &after).await }),
        ));
    }
    let mut rest = read_until_done(&mut stream, |r| r.event).await;
    seen.append(&mut rest);
    assert_eq!(text_of(&seen), expected);
    for (k, replica, task) in live {
        let got = task.await.unwrap();
        assert_eq!(
            got.as_slice(),
            &seen[k..],
            "live subscribe on the {replica} after event #{k}"
        );
    }

    // After the loop: after every event id, on both replicas.
    for k in 1..seen.len() {
        let after = &seen[k - 1].event_id;
        let same = subscribe(&mut c, &s.id, after).await;
        assert_eq!(same.as_slice(), &seen[k..], "same replica after #{k}");
        if k % 7 == 1 || k + 3 >= seen.len() {
            let far = subscribe(&mut remote, &s.id, after).await;
            assert_eq!(far.as_slice(), &seen[k..], "other replica after #{k}");
        }
    }
    // The whole prompt stream is the log's tail.
    let all = subscribe(&mut c, &s.id, "0").await;
    assert_eq!(&all[all.len() - seen.len()..], seen.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_after_event_id_names_the_field() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    let err = c
        .subscribe(spb::SubscribeRequest {
            session_id: s.id.clone(),
            after_event_id: "$".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("after_event_id"), "{err:?}");
}
