use super::*;

fn span(trace: &str, id: &str, parent: &str) -> SpanRecord {
    SpanRecord {
        service: "svc".into(),
        trace_id: trace.into(),
        span_id: id.into(),
        parent_id: parent.into(),
        name: format!("span {id}"),
        start_ns: 0,
        end_ns: 1,
        error: false,
        attributes: Vec::new(),
    }
}

#[test]
fn the_oldest_trace_goes_first_once_the_bound_is_reached() {
    let mut traces = Traces::new(2);
    traces.add(vec![span("t1", "a", "")]);
    traces.add(vec![span("t2", "b", ""), span("t1", "c", "a")]);
    assert_eq!(traces.trace("t1").map(<[_]>::len), Some(2));
    traces.add(vec![span("t3", "d", "")]);
    assert!(traces.trace("t1").is_none(), "t1 was the oldest");
    let recent: Vec<&str> = traces
        .recent(10)
        .iter()
        .map(|t| t[0].trace_id.as_str())
        .collect();
    assert_eq!(recent, ["t3", "t2"]);
}

#[test]
fn traces_are_found_by_an_attribute_of_any_span() {
    let mut traces = Traces::new(10);
    let mut tagged = span("t2", "b", "a");
    tagged
        .attributes
        .push(("gen_ai.conversation.id".into(), "ses_1".into()));
    traces.add(vec![span("t1", "x", ""), span("t2", "a", ""), tagged]);
    let found = traces.with_attribute("gen_ai.conversation.id", "ses_1");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0][0].trace_id, "t2");
    assert!(
        traces
            .with_attribute("gen_ai.conversation.id", "ses_2")
            .is_empty()
    );
}
