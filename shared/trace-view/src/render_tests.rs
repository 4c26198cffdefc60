use super::*;

fn span(id: &str, parent: &str, name: &str, start_ms: u64, end_ms: u64) -> SpanRecord {
    SpanRecord {
        service: if name.starts_with("chat") {
            "llm-gateway"
        } else {
            "session-processor"
        }
        .into(),
        trace_id: "abc".into(),
        span_id: id.into(),
        parent_id: parent.into(),
        name: name.into(),
        start_ns: start_ms * 1_000_000,
        end_ns: end_ms * 1_000_000,
        error: false,
        attributes: Vec::new(),
    }
}

#[test]
fn a_trace_prints_as_a_tree_children_in_start_order() {
    let mut chat = span("c", "s2", "chat gpt-4o", 12, 30);
    chat.attributes = vec![
        ("gen_ai.request.model".into(), "openai/gpt-4o".into()),
        ("gen_ai.usage.output_tokens".into(), "7".into()),
        ("ignored.attribute".into(), "x".into()),
    ];
    let mut failed = span("f", "p", "tool read", 31, 32);
    failed.error = true;
    // Arrival order is not start order; a span whose parent never arrived is a root of its own.
    let spans = vec![
        chat,
        span("s2", "p", "step 1", 10, 31),
        span("p", "", "prompt", 0, 40),
        failed,
        span("o", "missing", "orphan", 50, 51),
    ];
    assert_eq!(
        tree(&spans),
        "trace abc\n\
         prompt  [session-processor] 40.000 ms\n\
         \x20 step 1  [session-processor] 21.000 ms\n\
         \x20   chat gpt-4o  [llm-gateway] 18.000 ms  request.model=openai/gpt-4o  usage.output_tokens=7\n\
         \x20 tool read  [session-processor] 1.000 ms  ERROR\n\
         orphan  [session-processor] 1.000 ms\n"
    );
}

#[test]
fn the_list_names_each_traces_root_session_and_services() {
    let mut chat = span("c", "p", "chat gpt-4o", 1, 2);
    chat.attributes = vec![("gen_ai.conversation.id".into(), "ses_9".into())];
    let spans = vec![span("p", "", "prompt", 0, 3), chat];
    assert_eq!(
        list(&[&spans]),
        "abc  prompt  2 spans  3.000 ms  session ses_9  (llm-gateway, session-processor)\n"
    );
    assert!(list(&[]).starts_with("no traces yet"));
}
