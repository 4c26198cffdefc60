//! Compaction through both services, the fake provider and real Redis, on a model whose catalog context is tiny
//! (4 000 tokens, 500 of output: 3 500 usable).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{
    Product, SessionsClient, messages, prompt, prompt_until_done, until_done,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

const TINY_MODEL: &str = "[models.\"openai/tiny\"]\ncontext_window = 4000\nmax_output_tokens = 500\npricing = { input = 2.50, output = 10.00 }\n";
const TINY_AGENT: &str = "[agents.tiny]\nmodel = \"openai/tiny\"\ntools = [\"read\"]\ndoom_loop = \"allow\"\nprune_protect_tokens = 10\nprune_minimum_tokens = 1\n";
const SUMMARY: &str = "## Goal\nRead the two files.\n## Accomplished\nBoth read.";

async fn start(extra: &str) -> Product {
    Product::start_with(TINY_MODEL, &format!("{TINY_AGENT}{extra}")).await
}

async fn session(c: &mut SessionsClient, agent: &str) -> spb::Session {
    c.create_session(spb::CreateSessionRequest {
        agent: agent.into(),
        workspace: "w".into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .session
    .unwrap()
}

fn text(id: &str, words: &[&str], usage: (u64, u64)) -> Reply {
    Reply::sse(
        ChatStream::new("tiny", id)
            .text(words)
            .finish("stop", Some(usage)),
    )
}

fn read(id: &str, path: &str, usage: (u64, u64)) -> Reply {
    Reply::sse(
        ChatStream::new("tiny", id)
            .tool_call(
                &format!("call_{id}"),
                "read",
                &[&format!("{{\"path\":\"{path}\"}}")],
            )
            .finish("tool_calls", Some(usage)),
    )
}

fn overflow_400() -> Reply {
    Reply::json_fixture(400, "openai_chat/errors/context_length_exceeded.json")
}

fn compaction_part(m: &spb::Message) -> Option<spb::CompactionPart> {
    m.parts.iter().find_map(|p| match &p.kind {
        Some(spb::part::Kind::Compaction(c)) => Some(*c),
        _ => None,
    })
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

/// The request's messages as `(role, text)` pairs.
fn conversation(body: &serde_json::Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap().to_string(), content)
        })
        .collect()
}

fn errors(events: &[SE]) -> Vec<spb::MessageError> {
    events
        .iter()
        .filter_map(|e| match e {
            SE::Error(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_its_context_limit_compacts_and_continues_from_the_summary() {
    let p = start("").await;
    let mut c = p.client().await;
    let s = session(&mut c, "tiny").await;
    std::fs::write(p.workspaces.path().join("w/a.txt"), "alpha ".repeat(60)).unwrap();
    std::fs::write(p.workspaces.path().join("w/b.txt"), "beta ".repeat(60)).unwrap();
    let fake = &p.gateway.openai;
    fake.push(read("s1", "a.txt", (500, 10)));
    // The second step reports 3 600 prompt tokens: at the usable limit, so the loop compacts after it.
    fake.push(read("s2", "b.txt", (3_600, 10)));
    fake.push(text("sum", &[SUMMARY], (3_000, 40)));
    fake.push(text("s3", &["Both files ", "were read."], (300, 10)));

    let events = prompt_until_done(&mut c, prompt(&s.id, "Read a.txt and b.txt")).await;
    assert!(errors(&events).is_empty(), "{events:?}");
    let Some(SE::Done(done)) = events.last() else {
        panic!()
    };
    assert_eq!(done.finish, "stop");

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    // The summary step: no tools, the continuation-summary prompt, tools rendered as text, old output pruned.
    let summary_req = reqs[2].json();
    assert!(summary_req.get("tools").is_none(), "{summary_req}");
    let turns = conversation(&summary_req);
    assert!(
        turns[0].1.contains("continuation summary"),
        "{:?}",
        turns[0]
    );
    let all = summary_req.to_string();
    assert!(all.contains("[called tool `read`"), "{all}");
    assert!(
        all.contains("[output pruned]") && !all.contains("alpha alpha"),
        "a.txt's output is beyond the protected window: {all}"
    );
    assert!(
        all.contains("beta beta"),
        "b.txt's output is the latest: kept"
    );
    assert!(
        turns
            .last()
            .unwrap()
            .1
            .contains("Summarise the conversation above")
    );
    // The step after it starts from the summary, then the synthetic "continue".
    let next = conversation(&reqs[3].json());
    let roles: Vec<&str> = next.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "user"], "{next:?}");
    assert!(next[1].1.contains("summarised") && next[1].1.contains("Both read."));
    assert!(next[2].1.contains("Continue the task"));
    assert!(
        !reqs[3].json().to_string().contains("Read a.txt and b.txt"),
        "nothing before the summary is sent again"
    );

    let ms = messages(&mut c, &s.id).await;
    let shape: Vec<(spb::Role, &str)> = ms.iter().map(|m| (m.role(), m.finish.as_str())).collect();
    assert_eq!(
        shape,
        [
            (spb::Role::User, ""),
            (spb::Role::Assistant, "tool_calls"),
            (spb::Role::Assistant, "tool_calls"),
            (spb::Role::Assistant, "stop"),
            (spb::Role::User, ""),
            (spb::Role::Assistant, "stop"),
        ]
    );
    let compaction = &ms[3];
    assert_eq!(
        compaction_part(compaction),
        Some(spb::CompactionPart {
            auto: true,
            overflow: false
        })
    );
    assert_eq!(texts(compaction), SUMMARY);
    assert!(compaction.completed_at.is_some() && compaction.cost_nano_usd > 0);
    let cont = &ms[4];
    assert!(matches!(&cont.parts[0].kind, Some(spb::part::Kind::Text(t)) if t.synthetic));
    // Storage keeps every tool output; pruning is for requests only.
    assert!(
        ms[1]
            .parts
            .iter()
            .any(|p| matches!(&p.kind, Some(spb::part::Kind::Tool(t)) if t.state.as_ref().unwrap().output.contains("alpha")))
    );
    // The summary step is paid for like any other.
    let session = c
        .get_session(spb::GetSessionRequest {
            session_id: s.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let sum: i64 = ms.iter().map(|m| m.cost_nano_usd).sum();
    assert_eq!(session.cost_nano_usd, sum);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_mid_stream_compacts_and_replays_the_cut_message() {
    let p = start("").await;
    let mut c = p.client().await;
    let s = session(&mut c, "tiny").await;
    let fake = &p.gateway.openai;
    fake.push(text("a1", &["First answer."], (100, 5)));
    prompt_until_done(&mut c, prompt(&s.id, "first question")).await;

    // The provider starts answering, then says the context is too long.
    let mut body = ChatStream::new("tiny", "a2")
        .text(&["Partial"])
        .finish("stop", None);
    body.truncate(body.rfind("data: {").unwrap());
    body.push_str("data: {\"error\":{\"message\":\"This model's maximum context length is 4000 tokens. However, your messages resulted in 4100 tokens.\",\"type\":\"invalid_request_error\",\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}\n\n");
    fake.push(Reply::sse(body));
    fake.push(text(
        "sum",
        &["## Goal\nAnswer questions. The first was answered."],
        (150, 20),
    ));
    fake.push(text("a3", &["Second answer."], (120, 5)));
    let events = prompt_until_done(&mut c, prompt(&s.id, "second question")).await;
    assert!(errors(&events).is_empty(), "{events:?}");

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    let summary = reqs[2].json().to_string();
    assert!(summary.contains("first question") && summary.contains("First answer."));
    assert!(
        !summary.contains("second question") && !summary.contains("Partial"),
        "the cut message is replayed, not summarised"
    );
    let last = conversation(&reqs[3].json());
    let roles: Vec<&str> = last.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "user"]);
    assert!(last[1].1.contains("The first was answered."));
    assert_eq!(last[2].1, "second question");

    let ms = messages(&mut c, &s.id).await;
    let overflowed = &ms[3];
    assert_eq!(overflowed.finish, "overflow");
    assert!(
        overflowed.error.is_none(),
        "an overflow that compacts is not a failure"
    );
    assert_eq!(texts(overflowed), "Partial");
    assert_eq!(
        compaction_part(&ms[4]),
        Some(spb::CompactionPart {
            auto: true,
            overflow: true
        })
    );
    let replay = &ms[5];
    assert_eq!(replay.role(), spb::Role::User);
    assert!(
        matches!(&replay.parts[0].kind, Some(spb::part::Kind::Text(t)) if t.synthetic && t.text == "second question")
    );
    assert_eq!(texts(&ms[6]), "Second answer.");
    assert_eq!(ms.len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_that_does_not_shrink_the_context_stops_with_a_clear_error() {
    let p = start("").await;
    let mut c = p.client().await;
    let s = session(&mut c, "tiny").await;
    let fake = &p.gateway.openai;
    fake.push(text("a1", &["First answer."], (100, 5)));
    prompt_until_done(&mut c, prompt(&s.id, "first question")).await;
    // Overflow, compaction, the replayed message overflows again: the guard stops instead of compacting forever.
    fake.push(overflow_400());
    fake.push(text("sum", &["## Goal\nAnswer questions."], (150, 20)));
    fake.push(overflow_400());
    fake.push(text("never", &["not requested"], (1, 1)));
    let events = prompt_until_done(&mut c, prompt(&s.id, "second question")).await;
    let errs = errors(&events);
    assert_eq!(errs.len(), 1, "{events:?}");
    assert_eq!(errs[0].kind(), spb::message_error::Kind::ContextOverflow);
    assert!(
        errs[0].message.contains("did not shrink"),
        "{}",
        errs[0].message
    );
    assert_eq!(fake.requests().len(), 4, "no second compaction");
    let ms = messages(&mut c, &s.id).await;
    let last = ms.last().unwrap();
    assert_eq!(
        last.error.as_ref().unwrap().kind(),
        spb::message_error::Kind::ContextOverflow
    );
    assert_eq!(
        ms.iter().filter(|m| compaction_part(m).is_some()).count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_too_big_for_the_context_even_after_compaction_is_refused_before_any_call() {
    let p = start("").await;
    let mut c = p.client().await;
    let s = session(&mut c, "tiny").await;
    let fake = &p.gateway.openai;
    fake.push(text("a1", &["First answer."], (100, 5)));
    prompt_until_done(&mut c, prompt(&s.id, "first question")).await;
    fake.push(text("sum", &["## Goal\nAnswer questions."], (150, 20)));
    // ~4 000 estimated tokens: over the 3 500 usable before the call, and still after compacting what came before.
    let big = "word ".repeat(3_200);
    let events = prompt_until_done(&mut c, prompt(&s.id, &big)).await;
    let errs = errors(&events);
    assert_eq!(errs.len(), 1, "{events:?}");
    assert_eq!(errs[0].kind(), spb::message_error::Kind::ContextOverflow);
    assert!(
        errs[0].message.contains("still does not fit"),
        "{}",
        errs[0].message
    );
    assert_eq!(
        fake.requests().len(),
        2,
        "the first answer and the summary: the big message itself was never sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_that_itself_overflows_stops_with_a_clear_error() {
    let p = start("").await;
    let mut c = p.client().await;
    let s = session(&mut c, "tiny").await;
    let fake = &p.gateway.openai;
    fake.push(text("a1", &["First answer."], (100, 5)));
    prompt_until_done(&mut c, prompt(&s.id, "first question")).await;
    fake.push(overflow_400());
    fake.push(overflow_400());
    let events = prompt_until_done(&mut c, prompt(&s.id, "second question")).await;
    let errs = errors(&events);
    assert_eq!(errs.len(), 1, "{events:?}");
    assert_eq!(errs[0].kind(), spb::message_error::Kind::ContextOverflow);
    assert!(errs[0].message.contains("too long"), "{}", errs[0].message);
    assert_eq!(fake.requests().len(), 3);
    let ms = messages(&mut c, &s.id).await;
    let failed = ms.last().unwrap();
    assert!(compaction_part(failed).is_some());
    assert!(failed.error.is_some() && failed.completed_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auto_compaction_off_an_overflow_is_a_context_overflow_error() {
    let p = start("[agents.fixed]\nmodel = \"openai/tiny\"\nauto_compact = false\n").await;
    let mut c = p.client().await;
    let s = session(&mut c, "fixed").await;
    p.gateway.openai.push(overflow_400());
    let events = prompt_until_done(&mut c, prompt(&s.id, "hello")).await;
    let errs = errors(&events);
    assert_eq!(errs.len(), 1, "{events:?}");
    assert_eq!(errs[0].kind(), spb::message_error::Kind::ContextOverflow);
    assert!(errs[0].message.contains("automatic compaction is off"));
    assert_eq!(p.gateway.openai.requests().len(), 1, "no summary step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_compaction_summarises_an_idle_session() {
    let p = start("").await;
    let mut c = p.client().await;
    let s = session(&mut c, "tiny").await;
    let empty = c
        .compact(spb::CompactRequest {
            session_id: s.id.clone(),
            model: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        empty.code(),
        tonic::Code::FailedPrecondition,
        "nothing to compact yet"
    );

    let fake = &p.gateway.openai;
    fake.push(text("a1", &["First answer."], (100, 5)));
    prompt_until_done(&mut c, prompt(&s.id, "first question")).await;
    fake.push(text(
        "sum",
        &["## Goal\nThe first question was answered."],
        (120, 15),
    ));
    let mut stream = c
        .compact(spb::CompactRequest {
            session_id: s.id.clone(),
            model: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let events = until_done(&mut stream, |r| r.event).await;
    assert!(errors(&events).is_empty(), "{events:?}");
    let ms = messages(&mut c, &s.id).await;
    let compaction = ms.last().unwrap();
    assert_eq!(
        compaction_part(compaction),
        Some(spb::CompactionPart {
            auto: false,
            overflow: false
        })
    );
    let Some(SE::Done(done)) = events.last() else {
        panic!()
    };
    assert_eq!(done.message_id, compaction.id);
    assert_eq!(fake.requests().len(), 2);

    // The next prompt continues from the summary.
    fake.push(text("a2", &["Second answer."], (90, 5)));
    prompt_until_done(&mut c, prompt(&s.id, "second question")).await;
    let turns = conversation(&fake.requests()[2].json());
    let roles: Vec<&str> = turns.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "user"]);
    assert!(turns[1].1.contains("The first question was answered."));
    assert!(
        !fake.requests()[2]
            .json()
            .to_string()
            .contains("first question\"")
    );
}
