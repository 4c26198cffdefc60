use super::*;
use proptest::prelude::*;

#[test]
fn short_values_are_echoed_whole_and_long_ones_cut() {
    assert_eq!(echo("openai/gpt-4o"), "openai/gpt-4o");
    let long = "é".repeat(50_000);
    let cut = echo(&long);
    assert!(cut.len() < MAX_ECHO_BYTES + 32, "{}", cut.len());
    assert!(cut.ends_with("…(100000 bytes)"));
}

#[test]
fn zero_limits_are_refused_by_key() {
    let file = LimitsFile {
        max_tools: 0,
        ..LimitsFile::default()
    };
    assert_eq!(file.validate().unwrap_err().key, "limits.max_tools");
    assert_eq!(LimitsFile::default().validate().unwrap(), Limits::default());
}

#[test]
fn large_deltas_become_several_of_the_same_block() {
    let mut got = Vec::new();
    let delta = "ab".repeat(100);
    split_event(
        Event::TextDelta {
            id: "t0".into(),
            delta: delta.clone(),
        },
        64,
        |e| got.push(e),
    );
    assert_eq!(got.len(), 4);
    let mut joined = String::new();
    for e in &got {
        let Event::TextDelta { id, delta } = e else {
            panic!("{e:?}")
        };
        assert_eq!(id, "t0");
        assert!(delta.len() <= 64);
        joined.push_str(delta);
    }
    assert_eq!(joined, delta);
    let small = Event::ToolInputDelta {
        call_id: "c".into(),
        delta: "{}".into(),
    };
    let mut passed = Vec::new();
    split_event(small.clone(), 64, |e| passed.push(e));
    assert_eq!(passed, vec![small]);
}

proptest! {
    #[test]
    fn split_pieces_are_bounded_and_join_to_the_input(s in "\\PC{0,300}", max in 1usize..40) {
        let pieces = split_delta(&s, max);
        prop_assert_eq!(pieces.concat(), s.clone());
        for p in &pieces {
            prop_assert!(p.len() <= max.max(4));
        }
        prop_assert!(!pieces.is_empty());
    }
}
