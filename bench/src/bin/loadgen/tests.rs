use super::*;

#[test]
fn plan_parses() {
    assert_eq!(parse_plan("1x30, 100x3,5"), vec![(1, 30), (100, 3), (5, 1)]);
}

#[test]
fn content_frames_are_told_from_role_and_finish() {
    assert!(is_content(
        br#"data: {"choices":[{"index":0,"delta":{"content":"tok1"}}]}"#
    ));
    assert!(!is_content(
        br#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#
    ));
    assert!(!is_content(
        br#"data: {"choices":[{"index":0,"delta":{}}]}"#
    ));
}

#[test]
fn peers_role_chunks_are_not_content() {
    // LiteLLM writes the role chunk with `content` first; Portkey adds `refusal` and re-orders the envelope.
    assert!(!is_content(
        br#"data: {"id":"x","choices":[{"index":0,"delta":{"content":"","role":"assistant"}}]}"#
    ));
    assert!(!is_content(
        br#"data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null}],"usage":null}"#
    ));
    assert!(is_content(
        br#"data: {"id":"x","choices":[{"index":0,"delta":{"content":" tok1"},"logprobs":null,"finish_reason":null}],"usage":null}"#
    ));
    // A usage chunk after the finish carries no delta text.
    assert!(!is_content(
        br#"data: {"choices":[],"usage":{"prompt_tokens":28,"completion_tokens":64}}"#
    ));
    assert!(is_error(
        br#"data: {"error":{"message":"upstream failed"}}"#
    ));
    assert!(!is_error(
        br#"data: {"choices":[{"delta":{"content":"x"}}]}"#
    ));
}

#[test]
fn frames_end_at_a_blank_line_with_lf_or_crlf() {
    assert_eq!(frame_len(b"data: a\n\ndata: b\n\n"), Some(9));
    assert_eq!(frame_len(b"data: a\r\n\r\ndata: b"), Some(11));
    assert_eq!(frame_len(b"data: a\n"), None);
}

#[test]
fn descendants_follow_the_parent_table() {
    // 10 → 11 → 13, 10 → 12; 20 is unrelated.
    let parents = [(11, 10), (12, 10), (13, 11), (20, 1), (10, 1)];
    let mut tree = descendants(10, &parents);
    tree.sort_unstable();
    assert_eq!(tree, vec![10, 11, 12, 13]);
    assert_eq!(descendants(20, &parents), vec![20]);
    // This process appears in the real table, under its real parent.
    let table = parent_table();
    let me = std::process::id();
    assert!(table.iter().any(|(pid, _)| *pid == me));
}

fn sums(route: Route, p50_ms: u64, p99_ms: u64, errors: usize) -> PathSums {
    PathSums {
        route,
        ttft: Summary {
            n: 10,
            p50: p50_ms * 1_000_000,
            p99: p99_ms * 1_000_000,
            max: p99_ms * 1_000_000,
        },
        gap: Summary::default(),
        streams: 10,
        completed: 10 - errors,
        errors,
    }
}

#[test]
fn peer_ratio_takes_the_best_peer_per_percentile() {
    let all = [
        sums(Route::Direct, 1, 5, 0),
        sums(Route::Gateway, 2, 7, 0),
        // litellm adds 40 / 100 ms, portkey 10 / 200 ms: the best is 10 at p50 and 100 at p99.
        sums(Route::Litellm, 41, 105, 0),
        sums(Route::Portkey, 11, 205, 2),
    ];
    let (p50, p99, notes) = peer_ratio(&all, Route::Gateway).unwrap();
    assert_eq!(p50, Some(10.0));
    assert_eq!(p99, Some(50.0));
    assert_eq!(notes, vec!["portkey failed 2 of 10 streams".to_owned()]);
    // Without peers there is no ratio; with a gateway that adds nothing it is not a number.
    assert!(peer_ratio(&all[..2], Route::Gateway).is_none());
    // Nor for a route that did not run.
    assert!(peer_ratio(&all, Route::GatewayHttp).is_none());
    let flat = [all[0], sums(Route::Gateway, 1, 5, 0), all[2]];
    assert_eq!(peer_ratio(&flat, Route::Gateway).unwrap().0, None);
}

#[test]
fn clock_records_ttft_and_gaps() {
    let mut clock = Clock::new(3);
    let t0 = clock.sent;
    clock.delta(t0 + Duration::from_millis(1));
    clock.delta(t0 + Duration::from_millis(3));
    clock.delta(t0 + Duration::from_millis(6));
    let rec = clock.finish(true, 3).unwrap();
    assert_eq!(rec.ttft, 1_000_000);
    assert_eq!(rec.gaps, vec![2_000_000, 3_000_000]);
    assert!(Clock::new(3).finish(true, 3).is_err());
}

#[test]
fn responses_dialect_counts_text_events_and_ends_on_completed() {
    let d = Dialect::Responses;
    let text = b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n";
    let added =
        b"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\"}\n\n";
    let done = b"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n";
    let failed = b"event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n";
    assert!(d.is_content(text) && !d.is_content(added) && !d.is_content(done));
    assert!(d.is_done(done) && !d.is_done(failed) && !d.is_done(text));
    // A Chat Completions end marker does not end a Responses stream, nor the other way round.
    assert!(!d.is_done(b"data: [DONE]\n\n"));
    assert!(!Dialect::Chat.is_done(done) && Dialect::Chat.is_done(b"data: [DONE]\n\n"));
}
