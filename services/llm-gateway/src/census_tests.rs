use llm_proto::gateway as pb;
use proptest::prelude::*;
use prost::Message as _;

use super::*;

fn text(t: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Text(pb::TextPart { text: t.into() })),
    }
}

fn tool(name: &str, schema: &str) -> pb::Tool {
    pb::Tool {
        name: name.into(),
        description: "d".into(),
        input_schema_json: schema.into(),
        ..Default::default()
    }
}

fn generation(messages: &[usize], schemas: &[&str]) -> pb::Generation {
    pb::Generation {
        model: "openai/gpt-4o".into(),
        system: vec!["be brief".into()],
        messages: messages
            .iter()
            .map(|&parts| pb::Message {
                role: pb::Role::User as i32,
                parts: (0..parts).map(|i| text(&format!("part {i}"))).collect(),
            })
            .collect(),
        tools: schemas
            .iter()
            .enumerate()
            .map(|(i, s)| tool(&format!("t{i}"), s))
            .collect(),
        ..Default::default()
    }
}

fn encoded(g: &pb::Generation) -> Vec<u8> {
    pb::StreamRequest {
        generation: Some(g.clone()),
    }
    .encode_to_vec()
}

/// The census of the bytes, and of what prost decodes from them, when prost decodes them.
fn both(bytes: &[u8]) -> (Result<Census, WireError>, Option<Census>) {
    let decoded = pb::StreamRequest::decode(bytes)
        .ok()
        .map(|r| r.generation.as_ref().map(Census::of).unwrap_or_default());
    (of_request(bytes), decoded)
}

#[test]
fn counts_messages_parts_tools_and_schema_bytes() {
    let g = generation(&[2, 0, 3], &["{}", r#"{"type":"object"}"#]);
    let census = of_request(&encoded(&g)).unwrap();
    assert_eq!(
        census,
        Census {
            messages: 3,
            parts: 5,
            tools: 2,
            schema_bytes: 2 + 17
        }
    );
    assert_eq!(census, Census::of(&g));
}

#[test]
fn an_empty_request_counts_nothing() {
    assert_eq!(of_request(&[]).unwrap(), Census::default());
}

#[test]
fn a_generation_sent_twice_is_merged_as_prost_merges_it() {
    let mut bytes = encoded(&generation(&[1], &["{}"]));
    bytes.extend(encoded(&generation(&[2, 2], &["{\"a\":1}"])));
    let (census, decoded) = both(&bytes);
    assert_eq!(census.unwrap(), decoded.unwrap());
    assert_eq!(census.unwrap().messages, 3);
    assert_eq!(census.unwrap().tools, 2);
}

#[test]
fn a_schema_written_twice_in_one_tool_counts_its_last_value() {
    let mut tool_bytes = tool("t", "a long schema value").encode_to_vec();
    tool_bytes.extend(tool("t", "{}").encode_to_vec());
    // Generation { tools (field 4, length-delimited): the two encodings as one tool }
    let mut g = vec![(4 << 3) | 2, tool_bytes.len() as u8];
    g.extend(&tool_bytes);
    let mut request = vec![(1 << 3) | 2, g.len() as u8];
    request.extend(&g);
    let (census, decoded) = both(&request);
    assert_eq!(decoded.unwrap().schema_bytes, 2);
    assert_eq!(census.unwrap(), decoded.unwrap());
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped() {
    let mut bytes = vec![
        (9 << 3),
        0x96,
        0x01, // field 9, varint 150
        (10 << 3) | 1,
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8, // field 10, fixed64
        (11 << 3) | 5,
        1,
        2,
        3,
        4, // field 11, fixed32
        (12 << 3) | 3,
        (1 << 3),
        1,
        (12 << 3) | 4, // field 12, a group holding a varint
    ];
    bytes.extend(encoded(&generation(&[1], &["{}"])));
    let (census, decoded) = both(&bytes);
    assert_eq!(census.unwrap(), decoded.unwrap());
    assert_eq!(census.unwrap().tools, 1);
}

#[test]
fn malformed_bytes_are_refused() {
    let good = encoded(&generation(&[1, 1], &["{}"]));
    assert_eq!(
        of_request(&good[..good.len() - 1]),
        Err(WireError::Truncated)
    );
    assert_eq!(of_request(&[0x00, 0x01]), Err(WireError::BadTag)); // field 0
    assert_eq!(of_request(&[(1 << 3) | 7]), Err(WireError::BadTag)); // wire type 7
    assert_eq!(of_request(&[0xff; 11]), Err(WireError::Varint));
    assert_eq!(of_request(&[(5 << 3) | 4]), Err(WireError::Group)); // end without start
    assert_eq!(
        of_request(&[(5 << 3) | 3, (6 << 3) | 4]),
        Err(WireError::Group)
    ); // mismatched end
    assert_eq!(of_request(&[(5 << 3) | 3]), Err(WireError::Truncated));
    let deep: Vec<u8> = std::iter::repeat_n((5 << 3) | 3, 200).collect();
    assert_eq!(of_request(&deep), Err(WireError::Group));
}

#[test]
fn a_length_past_the_end_is_truncated_not_a_panic() {
    // generation, length 2^63: far past the end.
    let bytes = [
        (1 << 3) | 2,
        0x80,
        0x80,
        0x80,
        0x80,
        0x80,
        0x80,
        0x80,
        0x80,
        0x80,
        0x01,
    ];
    assert_eq!(of_request(&bytes), Err(WireError::Truncated));
}

proptest! {
    #[test]
    fn the_census_of_any_request_equals_that_of_its_decoded_form(
        messages in prop::collection::vec(0usize..5, 0..6),
        schemas in prop::collection::vec("[a-z{}\":]{0,12}", 0..6),
        split in 0usize..3,
    ) {
        let schemas: Vec<&str> = schemas.iter().map(String::as_str).collect();
        let g = generation(&messages, &schemas);
        let mut bytes = encoded(&g);
        // Also as two requests' bytes one after the other (protobuf merges them).
        if split > 0 {
            bytes.extend(encoded(&generation(&messages[..messages.len() / 2], &schemas[..split.min(schemas.len())])));
        }
        let (census, decoded) = both(&bytes);
        prop_assert_eq!(census.unwrap(), decoded.unwrap());
    }

    #[test]
    fn any_bytes_prost_accepts_the_census_counts_alike(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let (census, decoded) = both(&bytes);
        if let Some(decoded) = decoded {
            prop_assert_eq!(census, Ok(decoded));
        }
    }
}
