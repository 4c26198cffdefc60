use super::*;

fn writes(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| match s {
            Step::Write(b) => String::from_utf8_lossy(b).into_owned(),
            Step::Sleep(d) => format!("<sleep {}ms>", d.as_millis()),
            Step::Stall => "<stall>".to_owned(),
            Step::Reset => "<reset>".to_owned(),
        })
        .collect()
}

#[test]
fn sse_plan_chunks_each_event_and_terminates() {
    let plan = Reply::sse("data: a\n\ndata: b\n\n")
        .pace(Duration::from_millis(5))
        .plan();
    let w = writes(&plan);
    assert!(w[0].starts_with("HTTP/1.1 200 OK\r\n"));
    assert_eq!(
        &w[1..],
        &[
            "9\r\ndata: a\n\n\r\n",
            "<sleep 5ms>",
            "9\r\ndata: b\n\n\r\n",
            "0\r\n\r\n"
        ]
    );
}

#[test]
fn burst_head_sends_first_events_together() {
    let plan = Reply::sse("data: a\n\ndata: b\n\ndata: c\n\n")
        .pace(Duration::from_millis(5))
        .burst_head(2)
        .plan();
    let w = writes(&plan);
    assert_eq!(
        &w[1..],
        &[
            "9\r\ndata: a\n\n\r\n",
            "9\r\ndata: b\n\n\r\n",
            "<sleep 5ms>",
            "9\r\ndata: c\n\n\r\n",
            "0\r\n\r\n"
        ]
    );
}

#[test]
fn fault_beyond_end_drops_terminator() {
    let plan = Reply::sse("data: a\n\n").stall_after(5).plan();
    let w = writes(&plan);
    assert_eq!(&w[1..], &["9\r\ndata: a\n\n\r\n", "<stall>"]);
}

#[test]
fn json_reset_zero_sends_nothing() {
    let plan = Reply::json(200, "{}").reset_after(0).plan();
    assert_eq!(writes(&plan), vec!["<reset>"]);
}

#[test]
fn user_header_replaces_default() {
    let plan = Reply::json(200, "[]")
        .header("Content-Type", "text/plain")
        .plan();
    let w = writes(&plan).concat();
    assert!(!w.contains("application/json"));
    assert!(w.contains("Content-Type: text/plain\r\n"));
}
