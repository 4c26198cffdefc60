use super::*;

fn tool(id: &str, input: &str) -> Block {
    Block::Tool {
        id: id.into(),
        name: "get_weather".into(),
        input: input.into(),
    }
}

#[test]
fn closing_all_ends_every_block_in_index_order_and_completes_tool_calls() {
    let mut blocks = OpenBlocks::new("redacted");
    blocks.insert(2, tool("toolu_1", ""));
    blocks.insert(0, Block::Text);
    blocks.insert(1, Block::Other);
    assert!(!blocks.saw_tool_call());
    let mut out = Vec::new();
    blocks.close_all(&mut out);
    assert_eq!(
        out,
        vec![
            Event::TextEnd { id: "0".into() },
            Event::ToolInputEnd {
                call_id: "toolu_1".into()
            },
            Event::ToolCall {
                call_id: "toolu_1".into(),
                tool: "get_weather".into(),
                input_json: "{}".into(),
                metadata: None,
            },
        ]
    );
    assert!(blocks.saw_tool_call());
    assert!(!blocks.contains(0) && !blocks.contains(2));
    // Closing a block that is not open says nothing.
    blocks.close(0, &mut out);
    assert_eq!(out.len(), 3);
}

#[test]
fn reasoning_metadata_carries_the_redacted_data_under_the_protocols_key_else_the_signature() {
    let end = |key: &'static str, signature: &str, redacted: &str| {
        let mut blocks = OpenBlocks::new(key);
        blocks.insert(
            0,
            Block::Reasoning {
                signature: signature.into(),
                redacted: redacted.into(),
            },
        );
        let mut out = Vec::new();
        blocks.close(0, &mut out);
        match out.as_slice() {
            [Event::ReasoningEnd { id, metadata }] if id == "0" => metadata.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        end("redacted", "sig", "").as_deref(),
        Some(r#"{"signature":"sig"}"#)
    );
    assert_eq!(
        end("redacted", "sig", "enc").as_deref(),
        Some(r#"{"redacted":"enc"}"#)
    );
    assert_eq!(
        end("redacted_data", "", "enc").as_deref(),
        Some(r#"{"redacted_data":"enc"}"#)
    );
    // Without either it cannot be replayed: no metadata.
    assert_eq!(end("redacted", "", ""), None);
}

#[test]
fn a_block_is_opened_once() {
    let mut blocks = OpenBlocks::new("redacted");
    let mut opened = 0;
    for _ in 0..2 {
        blocks.get_or_open(3, || {
            opened += 1;
            Block::reasoning()
        });
    }
    assert_eq!(opened, 1);
    assert!(matches!(blocks.get_mut(3), Some(Block::Reasoning { .. })));
}
