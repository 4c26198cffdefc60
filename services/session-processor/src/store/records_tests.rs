use super::*;

fn known(b: &[u8]) -> Known {
    Known {
        bytes: b.to_vec(),
        model: None,
    }
}

#[test]
fn writes_update_only_what_is_remembered_and_the_bound_holds() {
    let r = Records::with_capacity(2);
    r.record_written("a", b"x");
    r.model_written("a", "m");
    assert_eq!(
        r.len(),
        0,
        "a write of an unknown session remembers nothing"
    );
    r.put("a", known(b"1"));
    r.record_written("a", b"2");
    r.model_written("a", "openai/gpt-4o");
    assert_eq!(
        r.get("a"),
        Some(Known {
            bytes: b"2".to_vec(),
            model: Some("openai/gpt-4o".into())
        })
    );
    r.put("b", known(b"1"));
    r.put("c", known(b"1"));
    assert_eq!(r.len(), 2, "one entry dropped for the one added");
    assert!(r.get("c").is_some());
    r.put("c", known(b"3"));
    assert_eq!(r.len(), 2, "replacing an entry drops none");
    r.forget("c");
    assert!(r.get("c").is_none());
}
