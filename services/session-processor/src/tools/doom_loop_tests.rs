use super::*;

const A: (&str, &str) = ("read", r#"{"path":"a.txt"}"#);
const B: (&str, &str) = ("grep", r#"{"pattern":"x"}"#);
const C: (&str, &str) = ("list", r#"{}"#);
const D: (&str, &str) = ("read", r#"{"path":"d.txt"}"#);

fn feed(detector: &mut DoomLoopDetector, calls: &[(&str, &str)]) -> Vec<Option<DoomLoop>> {
    calls
        .iter()
        .map(|(tool, input)| detector.record(tool, input))
        .collect()
}

fn first_hit(calls: &[(&str, &str)]) -> Option<(usize, DoomLoop)> {
    let mut detector = DoomLoopDetector::new();
    feed(&mut detector, calls)
        .into_iter()
        .enumerate()
        .find_map(|(index, hit)| hit.map(|hit| (index, hit)))
}

#[test]
fn three_identical_calls_are_a_repeat() {
    let mut detector = DoomLoopDetector::new();
    let hits = feed(&mut detector, &[A, A, A]);
    assert!(hits[0].is_none() && hits[1].is_none());
    let hit = hits[2].clone().unwrap();
    assert_eq!(hit.kind, DoomLoopKind::Repeat);
    assert_eq!(hit.tools, ["read"]);
    assert!(hit.to_string().contains("3 times in a row"), "{hit}");
    // Continuing the repeat keeps reporting it.
    assert!(detector.record(A.0, A.1).is_some());
}

#[test]
fn two_identical_calls_are_not() {
    assert!(first_hit(&[A, A]).is_none());
    assert!(first_hit(&[A, A, B, A, A]).is_none());
}

#[test]
fn key_order_and_whitespace_do_not_matter() {
    let mut detector = DoomLoopDetector::new();
    detector.record("grep", r#"{"pattern":"x","path":"src"}"#);
    detector.record("grep", r#"{ "path": "src", "pattern": "x" }"#);
    let hit = detector.record("grep", "{\n  \"path\" : \"src\",\"pattern\":\"x\"}");
    assert_eq!(hit.unwrap().kind, DoomLoopKind::Repeat);
    // Nested objects too.
    let mut detector = DoomLoopDetector::new();
    detector.record("t", r#"{"a":{"x":1,"y":[{"p":1,"q":2}]}}"#);
    detector.record("t", r#"{"a":{"y":[{"q":2,"p":1}],"x":1}}"#);
    assert!(
        detector
            .record("t", r#"{"a":{"x":1,"y":[{"p":1,"q":2}]}}"#)
            .is_some()
    );
}

#[test]
fn different_tool_or_input_is_not_identical() {
    assert!(first_hit(&[("read", "{}"), ("list", "{}"), ("read", "{}")]).is_none());
    assert!(first_hit(&[A, D, A]).is_none());
}

#[test]
fn interleaving_breaks_a_repeat() {
    assert!(first_hit(&[A, A, B, A, C, A, D, A]).is_none());
}

#[test]
fn abab_is_a_cycle() {
    let (index, hit) = first_hit(&[A, B, A, B]).unwrap();
    assert_eq!(index, 3);
    assert_eq!(hit.kind, DoomLoopKind::Cycle { period: 2 });
    assert_eq!(hit.tools, ["read", "grep"]);
    assert!(first_hit(&[A, B, A]).is_none());
}

#[test]
fn abcabc_is_a_cycle() {
    let (index, hit) = first_hit(&[A, B, C, A, B, C]).unwrap();
    assert_eq!(index, 5);
    assert_eq!(hit.kind, DoomLoopKind::Cycle { period: 3 });
    assert_eq!(hit.tools, ["read", "grep", "list"]);
    assert!(
        hit.to_string().contains("`read` → `grep` → `list`"),
        "{hit}"
    );
}

#[test]
fn period_four_and_non_primitive_rounds() {
    let (index, hit) = first_hit(&[A, B, C, D, A, B, C, D]).unwrap();
    assert_eq!((index, hit.kind), (7, DoomLoopKind::Cycle { period: 4 }));
    // A A B A A B: period 3 with a repeated call inside the round.
    let (_, hit) = first_hit(&[A, A, B, A, A, B]).unwrap();
    assert_eq!(hit.kind, DoomLoopKind::Cycle { period: 3 });
    // A B A B A B A B is period 2, never 4.
    let mut detector = DoomLoopDetector::new();
    for hit in feed(&mut detector, &[A, B, A, B, A, B, A, B])
        .into_iter()
        .flatten()
    {
        assert_eq!(hit.kind, DoomLoopKind::Cycle { period: 2 });
    }
    // Period 5 is out of range.
    assert!(first_hit(&[A, B, C, D, ("x", "{}"), A, B, C, D, ("x", "{}")]).is_none());
}

#[test]
fn allow_pattern_silences_that_pattern_only() {
    let mut detector = DoomLoopDetector::new();
    let hit = feed(&mut detector, &[A, A, A]).pop().flatten().unwrap();
    detector.allow_pattern(&hit);
    assert!(detector.record(A.0, A.1).is_none());
    assert!(detector.record(A.0, A.1).is_none());
    // A different loop is still reported.
    let mut detector2 = detector.clone();
    let hits = feed(&mut detector2, &[B, A, B]);
    assert_eq!(
        hits[2].as_ref().unwrap().kind,
        DoomLoopKind::Cycle { period: 2 }
    );
    // Leaving the pattern ends the allowance: falling back in is reported again.
    let hits = feed(&mut detector, &[C, A, A, A]);
    assert!(hits[..3].iter().all(Option::is_none));
    assert_eq!(hits[3].as_ref().unwrap().kind, DoomLoopKind::Repeat);
}

#[test]
fn an_allowed_cycle_stays_allowed_through_its_rotations() {
    let mut detector = DoomLoopDetector::new();
    let hit = feed(&mut detector, &[A, B, A, B]).pop().flatten().unwrap();
    detector.allow_pattern(&hit);
    assert!(
        feed(&mut detector, &[A, B, A, B, A])
            .iter()
            .all(Option::is_none)
    );
}

#[test]
fn detection_spans_a_round_trip_through_serde() {
    let mut detector = DoomLoopDetector::new();
    feed(&mut detector, &[A, B, A]);
    let stored = serde_json::to_string(&detector).unwrap();
    let mut restored: DoomLoopDetector = serde_json::from_str(&stored).unwrap();
    assert_eq!(restored, detector);
    assert!(restored.record(B.0, B.1).is_some());

    let hit = feed(&mut restored, &[C, C, C]).pop().flatten().unwrap();
    restored.allow_pattern(&hit);
    let again: DoomLoopDetector =
        serde_json::from_str(&serde_json::to_string(&restored).unwrap()).unwrap();
    let mut again = again;
    assert!(again.record(C.0, C.1).is_none());
    // An empty document is an empty detector (fields default).
    assert_eq!(
        serde_json::from_str::<DoomLoopDetector>("{}").unwrap(),
        DoomLoopDetector::new()
    );
}

#[test]
fn history_is_bounded() {
    let mut detector = DoomLoopDetector::new();
    for index in 0..100 {
        detector.record("read", &format!(r#"{{"n":{index}}}"#));
    }
    assert_eq!(detector.history.len(), HISTORY);
}

#[test]
fn reset_forgets() {
    let mut detector = DoomLoopDetector::new();
    feed(&mut detector, &[A, A]);
    detector.reset();
    assert!(detector.record(A.0, A.1).is_none());
}

#[test]
fn non_json_and_empty_input() {
    assert_eq!(canonical_input(""), "{}");
    assert_eq!(canonical_input(" {} "), "{}");
    assert_eq!(canonical_input("not json "), "not json");
    assert!(first_hit(&[("t", ""), ("t", "{}"), ("t", " { } ")]).is_some());
}

#[test]
fn policy_maps_to_a_decision() {
    assert_eq!(DoomPolicy::default(), DoomPolicy::Ask);
    assert_eq!(DoomPolicy::Deny.decision(), Decision::Deny);
    let policy: DoomPolicy = serde_json::from_str("\"allow\"").unwrap();
    assert_eq!(policy, DoomPolicy::Allow);
}
