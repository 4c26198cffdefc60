//! Lists page by bytes as well as by count: through the real server, with a client's default 4 MiB receive limit,
//! every page of sessions and messages arrives, and a message larger than one response comes in pieces.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use e2e_tests::processor::{Product, create_session};
use llm_proto::sessions as spb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_with_large_metadata_page_under_the_response_limit() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let mut created = HashSet::new();
    for i in 0..300 {
        let metadata = (0..4)
            .map(|k| (format!("k{k}"), format!("{i}-{}", "v".repeat(4000))))
            .collect();
        let s = create_session(
            &mut c,
            spb::CreateSessionRequest {
                metadata,
                ..Default::default()
            },
        )
        .await;
        created.insert(s.id);
    }
    let mut seen = HashSet::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        // The client's default receive limit (4 MiB) would refuse a larger page.
        let page = c
            .list_sessions(spb::ListSessionsRequest {
                page_size: 500,
                page_token: token.clone(),
            })
            .await
            .expect("every page fits the default 4 MiB")
            .into_inner();
        pages += 1;
        for s in page.sessions {
            assert!(seen.insert(s.id), "listed twice");
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, created);
    assert!(
        pages >= 2,
        "300 sessions of 16 KB are more than one 4 MiB page"
    );
}

fn text_part(session_id: &str, message_id: &str, id: &str, bytes: usize) -> spb::Part {
    spb::Part {
        id: id.into(),
        message_id: message_id.into(),
        session_id: session_id.into(),
        kind: Some(spb::part::Kind::Text(spb::TextPart {
            text: format!("{id}:{}", "x".repeat(bytes)),
            ..Default::default()
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_a_response_comes_in_pieces() {
    let mut p = Product::start("").await;
    // The large message is written straight to the store, shaped only as paging needs (no loop ran it).
    p.check_on_drop = false;
    let mut c = p.client().await;
    let s = create_session(&mut c, spb::CreateSessionRequest::default()).await;
    // Ten parts of 1 MiB in one assistant message (ten client tool results could make one), then a small one.
    let ids = ["msg_000000000001", "msg_000000000002"];
    let big = spb::Message {
        id: ids[0].into(),
        session_id: s.id.clone(),
        role: spb::Role::Assistant as i32,
        parts: (0..10)
            .map(|i| text_part(&s.id, ids[0], &format!("prt_{i:04}"), 1024 * 1024))
            .collect(),
        ..Default::default()
    };
    let small = spb::Message {
        id: ids[1].into(),
        session_id: s.id.clone(),
        role: spb::Role::User as i32,
        parts: vec![text_part(&s.id, ids[1], "prt_0000", 10)],
        ..Default::default()
    };
    p.engine
        .store()
        .messages()
        .put_message(&big, None)
        .await
        .unwrap();
    p.engine
        .store()
        .messages()
        .put_message(&small, None)
        .await
        .unwrap();

    let mut parts: Vec<(String, String)> = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = c
            .list_messages(spb::ListMessagesRequest {
                session_id: s.id.clone(),
                page_size: 100,
                page_token: token.clone(),
            })
            .await
            .expect("every page fits the default 4 MiB")
            .into_inner();
        pages += 1;
        for m in page.messages {
            parts.extend(m.parts.into_iter().map(|p| (m.id.clone(), p.id)));
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    let mut want: Vec<(String, String)> = (0..10)
        .map(|i| (ids[0].to_string(), format!("prt_{i:04}")))
        .collect();
    want.push((ids[1].into(), "prt_0000".into()));
    assert_eq!(parts, want, "every part once, in order");
    assert!(pages >= 3, "10 MiB over 4 MiB pages: {pages}");
}
