use futures::StreamExt;
use serde_json::json;

use super::*;

#[test]
fn frames_are_one_data_line_each() {
    let mut out = BytesMut::new();
    data(&mut out, &json!({"a": "line\nbreak"}));
    event(&mut out, "ping", &json!({"type": "ping"}));
    done(&mut out);
    assert_eq!(
            &out[..],
            b"data: {\"a\":\"line\\nbreak\"}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\ndata: [DONE]\n\n"
        );
}

#[tokio::test]
async fn silence_gets_a_keep_alive_and_frames_pass_at_once() {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let frames = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
    let mut s = KeepAlive {
        inner: Box::pin(frames),
        keep_alive: Bytes::from_static(b": ping\n\n"),
        idle: Duration::from_millis(10),
        timer: Box::pin(tokio::time::sleep(Duration::from_millis(10))),
    };
    tx.send(Bytes::from_static(b"data: 1\n\n")).unwrap();
    assert_eq!(s.next().await.unwrap(), &b"data: 1\n\n"[..]);
    // Nothing more is sent, so the only thing that can come next is the keep-alive, once the timer fires.
    assert_eq!(s.next().await.unwrap(), &b": ping\n\n"[..]);
    drop(tx);
    assert_eq!(s.next().await, None);
}
