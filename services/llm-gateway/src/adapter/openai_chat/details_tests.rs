use super::*;
use serde_json::json;

#[test]
fn text_pieces_and_a_signature_only_detail_merge_into_one() {
    let mut d = Details::default();
    d.push(&json!({"type":"reasoning.text","text":"Let me ","signature":null,"format":"anthropic-claude-v1","index":0}));
    d.push(
        &json!({"type":"reasoning.text","text":"think.","format":"anthropic-claude-v1","index":0}),
    );
    d.push(&json!({"type":"reasoning.text","text":"","signature":"EqQBCkgIBxAB","format":"anthropic-claude-v1","index":0}));
    let meta = d.take_metadata();
    assert_eq!(
        from_metadata(&meta).unwrap(),
        vec![
            json!({"type":"reasoning.text","text":"Let me think.","signature":"EqQBCkgIBxAB","format":"anthropic-claude-v1","index":0})
        ]
    );
    assert!(d.is_empty());
}

#[test]
fn other_indexes_and_types_stay_separate_and_junk_is_ignored() {
    let mut d = Details::default();
    d.push(&json!({"type":"reasoning.text","text":"a","index":0}));
    d.push(&json!({"type":"reasoning.encrypted","data":"ZW5j","index":1}));
    d.push(&json!("not an object"));
    d.push(&json!({"text":"no type"}));
    let list = from_metadata(&d.take_metadata()).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(from_metadata("{}"), None);
    assert_eq!(from_metadata("nope"), None);
}
