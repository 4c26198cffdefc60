//! Session flows beyond the single prompt: a prompt sent while busy, Subscribe resuming after a disconnect, the
//! doom-loop policies that involve the caller, idempotent prompts, and the max-steps limit. A prompt queued as the
//! running loop ends, and the queue's limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{
    ProcessorSetup, Product, SessionsClient, assert_stream_invariants, done_of, prompt, text_reply,
    until_end,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use session_processor::store::ActiveMark;
use spb::session_event::Event as SE;

fn text(id: &str, words: &[&str]) -> Reply {
    text_reply(id, words, (10, 3))
}

fn read_call(id: &str, call: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", id)
            .tool_call(call, "read", &["{\"path\":\"a.txt\"}"])
            .finish("tool_calls", Some((10, 3))),
    )
}

async fn until_done(stream: &mut tonic::Streaming<spb::PromptResponse>) -> Vec<SE> {
    let mut events = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .unwrap()
        .unwrap()
    {
        let ev = ev.event.unwrap().event.unwrap();
        let done = matches!(ev, SE::Done(_));
        events.push(ev);
        if done {
            break;
        }
    }
    events
}

async fn messages(c: &mut SessionsClient, session_id: &str) -> Vec<spb::Message> {
    c.list_messages(spb::ListMessagesRequest {
        session_id: session_id.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .messages
}

fn texts(m: &spb::Message) -> String {
    m.parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Text(t)) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// Prompts "first" and, once its answer streams (the loop busy), `then` from another client: the two streams.
async fn busy_then_queued(
    p: &Product,
    session_id: &str,
    then: &str,
) -> (
    tonic::Streaming<spb::PromptResponse>,
    tonic::Streaming<spb::PromptResponse>,
) {
    let mut c = p.client().await;
    let mut first = c
        .prompt(prompt(session_id, "first"))
        .await
        .unwrap()
        .into_inner();
    loop {
        let ev = first
            .message()
            .await
            .unwrap()
            .unwrap()
            .event
            .unwrap()
            .event
            .unwrap();
        if matches!(ev, SE::PartDelta(_)) {
            break;
        }
    }
    let queued = p
        .client()
        .await
        .prompt(prompt(session_id, then))
        .await
        .unwrap()
        .into_inner();
    (first, queued)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_while_busy_is_queued_and_answered_by_the_run_that_follows() {
    let p = Product::start("").await;
    let s = p.session_on("").await;
    // The first answer is slow, so the second prompt arrives while the loop is busy.
    p.gateway.openai.push(
        text("c1", &["first ", "answer ", "streams ", "slowly."]).pace(Duration::from_millis(60)),
    );
    p.gateway.openai.push(text("c2", &["second answer."]));
    let mut c = p.client().await;
    let (mut first, mut second) = busy_then_queued(&p, &s.id, "second").await;
    let first = until_end(&mut first, Duration::from_secs(20)).await;
    let second = until_end(&mut second, Duration::from_secs(20)).await;
    assert_stream_invariants(&first);
    let ms = messages(&mut c, &s.id).await;
    // The first run ends at its answer (the run's last write finds the queued prompt and keeps the lease), and the
    // run that follows at once answers the second prompt: each stream ends at the `done` of the run that answered
    // its prompt, the second one after passing the first run's.
    assert_eq!(done_of(&first).message_id, ms[1].id);
    assert!(
        !first
            .iter()
            .any(|e| matches!(e, SE::PartDelta(d) if d.message_id == ms[3].id)),
        "the first stream ended at its own answer: {first:?}"
    );
    assert!(matches!(second.last(), Some(SE::Done(d)) if d.message_id == ms[3].id));
    assert!(
        second
            .iter()
            .any(|e| matches!(e, SE::PartDelta(d) if d.message_id == ms[3].id)),
        "the second stream carried its answer: {second:?}"
    );
    let summary: Vec<(spb::Role, String)> = ms.iter().map(|m| (m.role(), texts(m))).collect();
    assert_eq!(
        summary,
        [
            (spb::Role::User, "first".to_string()),
            (
                spb::Role::Assistant,
                "first answer streams slowly.".to_string()
            ),
            (spb::Role::User, "second".to_string()),
            (spb::Role::Assistant, "second answer.".to_string()),
        ]
    );
    // The second step saw both user messages.
    let body = p.gateway.openai.requests()[1].json();
    let users = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_queued_as_the_running_loop_ends_streams_until_the_run_that_answers_it() {
    let p = Product::start("").await;
    let s = p.session_on("").await;
    let store = &p.engine.store();
    // A loop (another replica's) holds the session, past its last step boundary: the prompt is queued behind it.
    let fence = store
        .leases()
        .acquire_lease(&s.id, "replica-x", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let mut c = p.client().await;
    let mut queued = c
        .prompt(prompt(&s.id, "queued"))
        .await
        .unwrap()
        .into_inner();
    // That loop ends without seeing it: its `done` is logged, its lease released.
    p.engine
        .events()
        .publisher()
        .publish(
            &s.id,
            SE::Done(spb::Done {
                stopped_by: spb::StopReason::Completed as i32,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    store.leases().release_lease(&s.id, &fence).await.unwrap();
    // The next run delivers the queued prompt (here: the run of a prompt arriving now, at its first step boundary).
    p.gateway.openai.push(text("c1", &["next answer."]));
    p.gateway.openai.push(text("c2", &["queued answer."]));
    let mut next = c.prompt(prompt(&s.id, "next")).await.unwrap().into_inner();
    let queued = until_end(&mut queued, Duration::from_secs(20)).await;
    let next = until_end(&mut next, Duration::from_secs(20)).await;
    let ms = messages(&mut c, &s.id).await;
    let summary: Vec<(spb::Role, String)> = ms.iter().map(|m| (m.role(), texts(m))).collect();
    assert_eq!(
        summary,
        [
            (spb::Role::User, "next".to_string()),
            (spb::Role::Assistant, "next answer.".to_string()),
            (spb::Role::User, "queued".to_string()),
            (spb::Role::Assistant, "queued answer.".to_string()),
        ]
    );
    // The queued prompt's stream went past the first loop's `done` and ended at the `done` of the run that answered
    // it, having carried its own message and its answer.
    let dones: Vec<&spb::Done> = queued
        .iter()
        .filter_map(|e| match e {
            SE::Done(d) => Some(d),
            _ => None,
        })
        .collect();
    // The other loop's, the next prompt's run's, and its own.
    assert_eq!(dones.len(), 3, "{queued:?}");
    assert!(matches!(queued.last(), Some(SE::Done(d)) if d.message_id == ms[3].id));
    assert!(
        queued
            .iter()
            .any(|e| matches!(e, SE::MessageUpdated(m) if m.id == ms[2].id)),
        "the stream carried its own user message"
    );
    assert!(
        queued
            .iter()
            .any(|e| matches!(e, SE::PartDelta(d) if d.message_id == ms[3].id)),
        "the stream carried its answer"
    );
    // The prompt that started the run ends at its own run's `done`.
    assert_stream_invariants(&next);
    assert_eq!(done_of(&next).message_id, ms[1].id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_stops_the_running_prompt_and_the_one_queued_behind_it_is_still_answered() {
    let p = Product::start("").await;
    let s = p.session_on("").await;
    p.gateway.openai.push(
        text("c1", &["a ", "long ", "answer ", "that ", "is ", "cut."])
            .pace(Duration::from_millis(200)),
    );
    p.gateway.openai.push(text("c2", &["queued answer."]));
    let mut c = p.client().await;
    let (mut first, mut queued) = busy_then_queued(&p, &s.id, "queued").await;
    assert!(
        c.abort(spb::AbortRequest {
            session_id: s.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .aborted
    );
    let first = until_end(&mut first, Duration::from_secs(20)).await;
    assert!(
        matches!(first.last(), Some(SE::Done(d)) if d.stopped_by() == spb::StopReason::Aborted),
        "{first:?}"
    );
    // The queued prompt's caller still gets its answer: the run that follows the aborted one answers it.
    let queued = until_end(&mut queued, Duration::from_secs(20)).await;
    let ms = messages(&mut c, &s.id).await;
    let last = ms.last().unwrap();
    assert_eq!(texts(last), "queued answer.");
    assert!(
        matches!(queued.last(), Some(SE::Done(d)) if d.message_id == last.id
            && d.stopped_by() == spb::StopReason::Completed),
        "{queued:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_queues_at_most_64_prompts_and_refuses_more_with_resource_exhausted() {
    let p = Product::start("").await;
    let s = p.session_on("").await;
    let fence = p
        .engine
        .store()
        .leases()
        .acquire_lease(&s.id, "replica-x", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let mut c = p.client().await;
    let mut streams = Vec::new();
    for i in 0..session_processor::store::MAX_QUEUED_PROMPTS {
        streams.push(c.prompt(prompt(&s.id, &i.to_string())).await.unwrap());
    }
    let refused = c.prompt(prompt(&s.id, "one too many")).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.message().starts_with("session_id: "), "{refused:?}");
    let reason = tonic_types::StatusExt::get_details_error_info(&refused).unwrap();
    assert_eq!(reason.reason, "QUEUE_FULL");
    // Nothing was written for it, and the session is left as it was: the test's loop gives it back, and the
    // queued prompts stay queued for the next run (dropped here with the session).
    drop(streams);
    p.engine
        .store()
        .leases()
        .release_lease(&s.id, &fence)
        .await
        .unwrap();
    c.delete_session(spb::DeleteSessionRequest {
        session_id: s.id.clone(),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_of_a_deleted_session_end_with_not_found_on_every_replica() {
    let p = Product::start("").await;
    let other = e2e_tests::processor::start_processor(ProcessorSetup {
        gateway: p.gateway.addr.to_string(),
        prefix: p.engine.config().redis_prefix.clone(),
        ..Default::default()
    })
    .await;
    let s = p.session_on("").await;
    let subscribe = || spb::SubscribeRequest {
        session_id: s.id.clone(),
        ..Default::default()
    };
    // Idle: nothing runs, so both streams wait on the log in Redis.
    let mut streams = Vec::new();
    for mut c in [p.client().await, other.client().await] {
        streams.push(c.subscribe(subscribe()).await.unwrap().into_inner());
    }
    let [mut here, mut there]: [_; 2] = streams.try_into().unwrap();
    p.client()
        .await
        .delete_session(spb::DeleteSessionRequest {
            session_id: s.id.clone(),
        })
        .await
        .unwrap();
    // The deleting replica's stream ends at once; the other's at its next look (its blocking read is 5 s).
    for (stream, bound) in [(&mut here, 2), (&mut there, 15)] {
        let ended = tokio::time::timeout(Duration::from_secs(bound), stream.message())
            .await
            .expect("the stream ends");
        let status = ended.unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
        assert_eq!(status.message(), "session not found");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_resumes_after_a_disconnect_without_loss_or_duplicates() {
    let p = Product::start("").await;
    let s = p.session_on("").await;
    p.gateway
        .openai
        .push(text("c1", &["a", "b", "c", "d", "e", "f"]).pace(Duration::from_millis(20)));
    let mut c = p.client().await;
    let mut sub = c
        .subscribe(spb::SubscribeRequest {
            session_id: s.id.clone(),
            after_event_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut prompt_stream = c.prompt(prompt(&s.id, "go")).await.unwrap().into_inner();
    // Read a few events, then disconnect.
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let ev = sub.message().await.unwrap().unwrap().event.unwrap();
        seen.push(ev);
    }
    drop(sub);
    until_done(&mut prompt_stream).await;
    let mut resumed = c
        .subscribe(spb::SubscribeRequest {
            session_id: s.id.clone(),
            after_event_id: seen.last().unwrap().event_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        let ev = resumed.message().await.unwrap().unwrap().event.unwrap();
        let done = matches!(ev.event, Some(SE::Done(_)));
        seen.push(ev);
        if done {
            break;
        }
    }
    let ids: Vec<&str> = seen.iter().map(|e| e.event_id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_by_key(|id| {
        let (ms, seq) = id.split_once('-').unwrap();
        (ms.parse::<u64>().unwrap(), seq.parse::<u64>().unwrap())
    });
    sorted.dedup();
    assert_eq!(ids, sorted, "in order, no duplicates");
    let streamed: String = seen
        .iter()
        .filter_map(|e| match &e.event {
            Some(SE::PartDelta(d)) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "abcdef", "no delta lost across the reconnect");
}

async fn doom_loop_with(policy: &str, answer: Option<bool>) -> (Vec<spb::Message>, Vec<SE>, usize) {
    let p = Product::start(&format!("[agents.asker]\nmodel = \"openai/gpt-4o\"\ntools = [\"read\"]\ndoom_loop = \"{policy}\"\npermission_timeout_ms = 1500\n")).await;
    let mut c = p.client().await;
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            agent: "asker".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    std::fs::write(p.workspaces.path().join("w/a.txt"), "a").unwrap();
    for i in 0..3 {
        p.gateway
            .openai
            .push(read_call(&format!("c{i}"), &format!("call_{i}")));
    }
    p.gateway.openai.push(text("c9", &["ok."]));
    let mut stream = c.prompt(prompt(&s.id, "loop")).await.unwrap().into_inner();
    let mut events = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .unwrap()
        .unwrap()
    {
        let ev = ev.event.unwrap().event.unwrap();
        if let (SE::PermissionAsked(a), Some(allow)) = (&ev, answer) {
            assert_eq!(a.reason, "doom_loop");
            p.client()
                .await
                .reply_permission(spb::ReplyPermissionRequest {
                    session_id: s.id.clone(),
                    permission_id: a.permission_id.clone(),
                    allow,
                })
                .await
                .unwrap();
        }
        let done = matches!(ev, SE::Done(_));
        events.push(ev);
        if done {
            break;
        }
    }
    let ms = messages(&mut c, &s.id).await;
    (ms, events, p.gateway.openai.requests().len())
}

fn last_tool_state(ms: &[spb::Message]) -> spb::ToolState {
    ms.iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Tool(t)) => t.state.clone(),
            _ => None,
        })
        .next_back()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doom_loop_is_allowed_under_the_allow_policy() {
    let (ms, events, requests) = doom_loop_with("allow", None).await;
    assert!(!events.iter().any(|e| matches!(e, SE::PermissionAsked(_))));
    assert_eq!(
        last_tool_state(&ms).status(),
        spb::tool_state::Status::Completed
    );
    assert_eq!(requests, 4, "the loop went on to the final answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doom_loop_under_ask_proceeds_when_the_caller_allows() {
    let (ms, events, requests) = doom_loop_with("ask", Some(true)).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, SE::PermissionAsked(_)))
            .count(),
        1
    );
    assert_eq!(
        last_tool_state(&ms).status(),
        spb::tool_state::Status::Completed
    );
    assert_eq!(requests, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doom_loop_under_ask_is_denied_when_the_caller_denies_or_never_answers() {
    for answer in [Some(false), None] {
        let (ms, events, requests) = doom_loop_with("ask", answer).await;
        assert!(events.iter().any(|e| matches!(e, SE::PermissionAsked(_))));
        let state = last_tool_state(&ms);
        assert_eq!(state.status(), spb::tool_state::Status::Error, "{answer:?}");
        assert!(state.error.contains("doom loop"));
        assert_eq!(requests, 3, "{answer:?}: the loop stopped");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_prompt_with_the_same_idempotency_key_runs_once() {
    let p = Product::start("").await;
    let s = p.session_on("").await;
    p.gateway.openai.push(text("c1", &["once."]));
    let mut c = p.client().await;
    let mut req = prompt(&s.id, "hello");
    req.idempotency_key = "key-123".into();
    let mut first = c.prompt(req.clone()).await.unwrap().into_inner();
    let a = until_done(&mut first).await;
    let mut again = c.prompt(req).await.unwrap().into_inner();
    let b = until_done(&mut again).await;
    assert_eq!(p.gateway.openai.requests().len(), 1, "the model ran once");
    assert_eq!(
        messages(&mut c, &s.id).await.len(),
        2,
        "one user message, one answer"
    );
    let deltas = |evs: &[SE]| evs.iter().filter(|e| matches!(e, SE::PartDelta(_))).count();
    assert_eq!(
        deltas(&a),
        deltas(&b),
        "the retry streams the first call's events"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_allowed_step_is_text_only() {
    let p = Product::start("[agents.short]\nmodel = \"openai/gpt-4o\"\ntools = [\"read\"]\nmax_steps = 2\ndoom_loop = \"allow\"\n").await;
    let mut c = p.client().await;
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            agent: "short".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    std::fs::write(p.workspaces.path().join("w/a.txt"), "a").unwrap();
    p.gateway.openai.push(read_call("c1", "call_1"));
    p.gateway.openai.push(text("c2", &["final."]));
    let mut stream = c.prompt(prompt(&s.id, "go")).await.unwrap().into_inner();
    until_done(&mut stream).await;
    let reqs = p.gateway.openai.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].json().get("tools").is_some());
    // The tools stay defined (the conversation holds earlier calls, which some providers refuse without tool
    // definitions) but may not be called.
    assert!(reqs[1].json().get("tools").is_some(), "{}", reqs[1].json());
    assert_eq!(
        reqs[1].json()["tool_choice"],
        serde_json::json!("none"),
        "no tool calls on the last step"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_the_moment_the_last_one_finished_is_never_lost() {
    // The second prompt of each session arrives while the first loop is finishing: it may find the lease still
    // held, queue itself, and race the loop's release. Whichever way the race goes, someone must run it. Many
    // sessions at once make every interleaving likely; each prompt must finish within the deadline.
    let p = Product::start("").await;
    p.gateway
        .openai
        .set_fallback(text("chatcmpl-any", &["Quick ", "answer."]));
    let mut tasks = Vec::new();
    for i in 0..24 {
        let s = p.session_on("").await;
        let mut c = p.client().await;
        tasks.push(tokio::spawn(async move {
            for n in 0..3 {
                let mut stream = c
                    .prompt(prompt(&s.id, &format!("session {i} prompt {n}")))
                    .await
                    .unwrap()
                    .into_inner();
                let events = until_done(&mut stream).await;
                assert!(
                    matches!(events.last(), Some(SE::Done(_))),
                    "session {i} prompt {n} finished: {events:?}"
                );
            }
            let all = messages(&mut c, &s.id).await;
            let users = all
                .iter()
                .filter(|m| m.role == spb::Role::User as i32)
                .count();
            assert_eq!(users, 3, "session {i}: every prompt stored");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// A run's mark outlives its lease for a moment: the run's last write releases the lease, then the run removes its
/// mark. The recovery sweep must leave such a run alone, and a mark whose run died in that moment must be cleared
/// without the prompt being answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recovery_sweep_leaves_an_ended_run_alone_and_clears_a_mark_it_left() {
    let p = Product::start_setup(
        "",
        ProcessorSetup {
            recovery: true,
            ..Default::default()
        },
    )
    .await;
    let s = p.session_on("").await;
    let mut c = p.client().await;
    p.gateway.openai.push(text("c1", &["answered."]));
    let mut stream = c.prompt(prompt(&s.id, "hi")).await.unwrap().into_inner();
    until_done(&mut stream).await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while p.engine.is_running(&s.id) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the loop ends");
    let store = &p.engine.store();
    assert!(
        !store.active().is_active(&s.id).await.unwrap(),
        "the run removed its mark"
    );
    let before = store.event_log().last_event_id(&s.id).await.unwrap();
    // A sweep that saw the mark of the run that just ended: the mark is gone by the time it holds the lease.
    assert!(
        !p.engine
            .resume(&[ActiveMark::of(&s.id, "run_ended")])
            .await
            .unwrap(),
        "nothing to resume"
    );
    assert!(
        store.leases().lease_holder(&s.id).await.unwrap().is_none(),
        "the lease is given back"
    );
    assert_eq!(
        store.event_log().last_event_id(&s.id).await.unwrap(),
        before,
        "nothing published"
    );
    // The run's replica died after the release, before removing its mark: the sweep clears it (a lease ttl of
    // 1.5 s, a sweep every 750 ms), and the answered prompt is not answered again.
    store.active().mark_active(&s.id, "run_left").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while store.active().is_active(&s.id).await.unwrap() || p.engine.is_running(&s.id) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the sweep clears the mark");
    let roles: Vec<spb::Role> = messages(&mut c, &s.id)
        .await
        .iter()
        .map(|m| m.role())
        .collect();
    assert_eq!(
        roles,
        [spb::Role::User, spb::Role::Assistant],
        "no second answer"
    );
}
