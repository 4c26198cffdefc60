//! What the fault tests share: reading a stream to its terminal event, and waiting until a session has settled
//! with its prompt answered and Diagnose healthy.

use std::time::Duration;

use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

use crate::processor::{SessionsClient, assert_healthy, messages};

/// Reads a stream until its first `done` (within `bound`), returning every event.
pub async fn until_done<T>(
    stream: &mut tonic::Streaming<T>,
    event: impl Fn(T) -> Option<spb::SessionEvent>,
    bound: Duration,
) -> Vec<SE> {
    let mut events = Vec::new();
    let ended = tokio::time::timeout(bound, async {
        loop {
            let Some(response) = stream.message().await.expect("stream stays readable") else {
                panic!("the stream ended without a done: {events:?}");
            };
            let Some(ev) = event(response).and_then(|e| e.event) else {
                continue;
            };
            let done = matches!(ev, SE::Done(_));
            events.push(ev);
            if done {
                return;
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream ends with a terminal event within {bound:?}; it had: {events:?}"
    );
    events
}

/// Waits (30 s at most) until the session is idle with no lease and its latest prompt has a completed answer, then
/// checks that answer and Diagnose.
pub async fn assert_settled(c: &mut SessionsClient, session_id: &str) {
    let settled = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(r) = c
                .diagnose(spb::DiagnoseRequest {
                    session_id: session_id.into(),
                })
                .await
            {
                let r = r.into_inner();
                let ms = messages(c, session_id).await;
                let answered = ms.last().is_some_and(|m| {
                    m.role() == spb::Role::Assistant
                        && m.completed_at.is_some()
                        && m.finish == "stop"
                });
                if !r.lease_held && r.healthy && answered {
                    return ms;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the prompt is answered (resumed or closed) and the session settles");
    let answer = settled.last().unwrap();
    assert!(answer.error.is_none(), "{:?}", answer.error);
    assert_eq!(answer.stopped_by(), spb::StopReason::Completed);
    for m in &settled {
        assert!(
            m.role() != spb::Role::Assistant || m.completed_at.is_some(),
            "no message left open: {m:?}"
        );
    }
    let s = c
        .get_session(spb::GetSessionRequest {
            session_id: session_id.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(
        s.status.map(|st| st.kind()),
        Some(spb::session_status::Kind::Idle)
    );
    assert_healthy(c, session_id).await;
}
