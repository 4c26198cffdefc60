use serde_json::json;

use super::*;

#[test]
fn every_object_is_closed_where_it_does_not_say() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "address": {"properties": {"city": {"type": "string"}}},
            "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "either": {"anyOf": [{"type": ["object", "null"], "properties": {}}, {"type": "string"}]},
            "ref": {"$ref": "#/$defs/point"}
        },
        "required": ["name"],
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "additionalProperties": false}}
    });
    let out = closed(schema, "f").unwrap();
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "address": {"properties": {"city": {"type": "string"}}, "additionalProperties": false},
                "tags": {"type": "array", "items": {
                    "type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": false
                }},
                "either": {"anyOf": [
                    {"type": ["object", "null"], "properties": {}, "additionalProperties": false},
                    {"type": "string"}
                ]},
                "ref": {"$ref": "#/$defs/point"}
            },
            "required": ["name"],
            "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "additionalProperties": false}},
            "additionalProperties": false
        })
    );
    // Closing is idempotent: a schema that already says it goes as written.
    assert_eq!(closed(out.clone(), "f").unwrap(), out);
}

#[test]
fn an_open_object_or_a_map_is_refused_naming_the_field() {
    for open in [json!(true), json!({}), json!({"type": "string"})] {
        let schema = json!({
            "type": "object",
            "properties": {"labels": {"type": "object", "additionalProperties": open}}
        });
        let e = closed(schema, "generation.output_format.schema_json").unwrap_err();
        assert_eq!(e.field, "generation.output_format.schema_json");
        assert!(e.message.contains("closed objects"), "{e}");
    }
}

#[test]
fn hostile_nesting_is_bounded() {
    let mut schema = json!({"type": "string"});
    for _ in 0..100 {
        schema = json!({"type": "array", "items": schema});
    }
    let e = closed(schema, "f").unwrap_err();
    assert!(e.message.contains("nested deeper"), "{e}");
}
