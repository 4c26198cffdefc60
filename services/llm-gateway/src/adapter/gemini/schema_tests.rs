//! Schema lowering tests: each rewrite and each dropped keyword, on whole schemas.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::schema::{MAX_DEPTH, lower, parameters};

const FIELD: &str = "generation.tools[0].input_schema_json";

fn params(schema: Value) -> Option<Value> {
    parameters(&schema.to_string(), FIELD).unwrap()
}

fn lowered(schema: Value) -> Value {
    lower(&schema, FIELD).unwrap()
}

fn error(schema: Value) -> String {
    let e = parameters(&schema.to_string(), FIELD).unwrap_err();
    assert_eq!(e.field, FIELD);
    e.message
}

#[test]
fn rejected_keywords_are_dropped_everywhere() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/args",
        "$comment": "generated",
        "type": "object",
        "additionalProperties": false,
        "propertyNames": {"pattern": "^[a-z]+$"},
        "examples": [{"path": "a"}],
        "default": {},
        "properties": {
            "path": {
                "type": "string",
                "description": "File path",
                "default": "README.md",
                "examples": ["a.txt"],
                "minLength": 1,
                "format": "uri",
                "contentMediaType": "text/plain"
            },
            "limit": {"type": "integer", "exclusiveMinimum": 0, "minimum": 1, "multipleOf": 1, "format": "int32"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 5},
            "options": {
                "type": "object",
                "properties": {"deep": {"type": "boolean", "deprecated": true}},
                "patternProperties": {"^x-": {"type": "string"}},
                "additionalProperties": {"type": "string"}
            },
            "when": {"type": "string", "format": "date-time"}
        },
        "required": ["path"]
    });
    assert_eq!(
        params(schema),
        Some(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path", "minLength": 1},
                "limit": {"type": "integer", "format": "int32", "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
                "options": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
                "when": {"type": "string", "format": "date-time"}
            },
            "required": ["path"]
        }))
    );
}

#[test]
fn const_and_non_string_enums_become_string_enums() {
    assert_eq!(
        lowered(json!({"const": "circle", "description": "kind"})),
        json!({"type": "string", "description": "kind", "enum": ["circle"]})
    );
    assert_eq!(
        lowered(json!({"type": "integer", "enum": [1, 2, 3]})),
        json!({"type": "string", "enum": ["1", "2", "3"]})
    );
    assert_eq!(
        lowered(json!({"enum": ["a", null, true]})),
        json!({"type": "string", "enum": ["a", "true"], "nullable": true})
    );
}

#[test]
fn refs_are_inlined_from_defs_and_definitions_with_siblings_winning() {
    let schema = json!({
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "description": "A point",
                "properties": {"x": {"type": "number"}, "y": {"$ref": "#/definitions/Coord"}},
                "required": ["x", "y"]
            }
        },
        "definitions": {"Coord": {"type": "number", "format": "double"}},
        "properties": {
            "from": {"$ref": "#/$defs/Point"},
            "to": {"$ref": "#/$defs/Point", "description": "Where to go"}
        }
    });
    let point = |description: &str| {
        json!({
            "type": "object",
            "description": description,
            "properties": {"x": {"type": "number"}, "y": {"type": "number", "format": "double"}},
            "required": ["x", "y"]
        })
    };
    assert_eq!(
        params(schema),
        Some(json!({
            "type": "object",
            "properties": {"from": point("A point"), "to": point("Where to go")}
        }))
    );
}

#[test]
fn type_arrays_become_nullable_or_any_of() {
    assert_eq!(
        lowered(json!({"type": ["string", "null"], "description": "maybe", "maxLength": 9})),
        json!({"type": "string", "description": "maybe", "maxLength": 9, "nullable": true})
    );
    assert_eq!(
        lowered(json!({
            "type": ["string", "integer", "null"],
            "description": "an id",
            "minLength": 1,
            "minimum": 0
        })),
        json!({
            "description": "an id",
            "nullable": true,
            "anyOf": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0}]
        })
    );
    assert_eq!(lowered(json!({"type": "null"})), json!({"nullable": true}));
}

#[test]
fn any_of_with_null_is_nullable_and_one_of_is_any_of() {
    assert_eq!(
        lowered(
            json!({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "description": "due"})
        ),
        json!({"description": "due", "type": "string", "format": "date-time", "nullable": true})
    );
    assert_eq!(
        lowered(json!({"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]})),
        json!({"anyOf": [{"type": "string"}, {"type": "number"}], "nullable": true})
    );
}

#[test]
fn all_of_is_merged_into_its_parent() {
    assert_eq!(
        lowered(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"],
            "allOf": [
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                {"description": "merged"}
            ]
        })),
        json!({
            "type": "object",
            "description": "merged",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        })
    );
}

#[test]
fn required_names_must_exist_and_empty_nested_properties_are_dropped_and_types_are_implied() {
    assert_eq!(
        lowered(json!({
            "properties": {
                "a": {"type": "string"},
                "free": {"type": "object", "properties": {}},
                "list": {"items": {"type": "string"}}
            },
            "required": ["a", "ghost", 7]
        })),
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "free": {"type": "object"},
                "list": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["a"]
        })
    );
}

#[test]
fn tuples_become_an_any_of_item() {
    assert_eq!(
        lowered(json!({"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}]})),
        json!({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "string"}]}})
    );
    assert_eq!(
        lowered(json!({"type": "array", "items": [{"type": "number"}]})),
        json!({"type": "array", "items": {"type": "number"}})
    );
}

#[test]
fn recursive_refs_are_an_error_naming_the_field_and_the_place() {
    let message = error(json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}
            }
        }
    }));
    assert!(
        message.starts_with(
            "at /properties/root/properties/children/items: `$ref` \"#/$defs/Node\" is recursive"
        ),
        "{message}"
    );
    assert!(
        error(json!({"type": "object", "properties": {"me": {"$ref": "#"}}}))
            .contains("is recursive")
    );
}

#[test]
fn depth_and_unresolvable_refs_are_errors() {
    let mut deep = json!({"type": "string"});
    for _ in 0..=MAX_DEPTH {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    assert!(error(deep).contains(&format!("deeper than {MAX_DEPTH} levels")));
    assert!(
        error(
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}})
        )
        .contains("does not point into this schema")
    );
    assert!(
        error(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}))
            .contains("does not point into this schema")
    );
    // Shared (not recursive) references fanning out are bounded too.
    let mut defs = serde_json::Map::new();
    defs.insert("D0".into(), json!({"type": "string"}));
    for i in 1..9 {
        let prev = format!("#/$defs/D{}", i - 1);
        let props: serde_json::Map<String, Value> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|k| (k.to_string(), json!({"$ref": prev})))
            .collect();
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": props}),
        );
    }
    let fan =
        json!({"type": "object", "$defs": defs, "properties": {"top": {"$ref": "#/$defs/D8"}}});
    assert!(error(fan).contains("more than"));
}

#[test]
fn roots_without_properties_send_no_parameters_and_non_object_roots_are_refused() {
    assert_eq!(parameters("", FIELD).unwrap(), None);
    assert_eq!(parameters("  ", FIELD).unwrap(), None);
    assert_eq!(params(json!({})), None);
    assert_eq!(params(json!({"type": "object", "properties": {}})), None);
    assert_eq!(
        params(json!({"type": "object", "additionalProperties": false})),
        None
    );
    assert!(error(json!({"type": "string"})).contains("type \"object\""));
    assert!(
        parameters("[1]", FIELD)
            .unwrap_err()
            .message
            .contains("JSON object")
    );
    assert!(
        parameters("{", FIELD)
            .unwrap_err()
            .message
            .starts_with("not valid JSON")
    );
}
