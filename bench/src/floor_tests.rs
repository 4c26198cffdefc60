use super::*;

#[test]
fn body_carries_model_and_text() {
    let generation = pb::Generation {
        model: "bench/paced".into(),
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart { text: "hi".into() })),
            }],
        }],
        ..Default::default()
    };
    let body: serde_json::Value = serde_json::from_slice(&request_body(&generation)).unwrap();
    assert_eq!(body["model"], "bench/paced");
    assert_eq!(body["messages"][0]["content"], "hi");
    assert_eq!(body["stream"], true);
}
