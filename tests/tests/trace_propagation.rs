//! The caller's W3C trace context follows a prompt through the processor and the gateway to the provider's HTTP
//! request, so one trace id joins all three hops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{Product, prompt, text_reply, until_done};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_traceparent_reaches_the_provider_request() {
    let p = Product::start("").await;
    p.gateway.openai.push(text_reply("c1", &["hi"], (5, 1)));
    let s = p.session_on("").await;
    let mut req = tonic::Request::new(prompt(&s.id, "hello"));
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-00f067aa0ba902b7-01")
            .parse()
            .unwrap(),
    );
    req.metadata_mut()
        .insert("tracestate", "vendor=value".parse().unwrap());
    let mut stream = p.client().await.prompt(req).await.unwrap().into_inner();
    until_done(&mut stream, |r| r.event).await;
    let sent = &p.gateway.openai.requests()[0];
    let parent = sent
        .header("traceparent")
        .expect("traceparent on the provider request");
    assert_eq!(parent.split('-').nth(1), Some(TRACE_ID), "{parent}");
    assert_eq!(sent.header("tracestate"), Some("vendor=value"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_traceparent_is_not_forwarded() {
    let p = Product::start("").await;
    p.gateway.openai.push(text_reply("c1", &["hi"], (5, 1)));
    let s = p.session_on("").await;
    let mut req = tonic::Request::new(prompt(&s.id, "hello"));
    req.metadata_mut()
        .insert("traceparent", "not-a-trace".parse().unwrap());
    let mut stream = p.client().await.prompt(req).await.unwrap().into_inner();
    until_done(&mut stream, |r| r.event).await;
    assert_eq!(p.gateway.openai.requests()[0].header("traceparent"), None);
}
