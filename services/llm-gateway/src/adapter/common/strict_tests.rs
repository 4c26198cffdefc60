//! Strict-mode lowering and argument cleaning: whole schemas in, whole schemas out.

use serde_json::json;

use super::*;

fn lowered(schema: Value) -> Value {
    lower(&schema).unwrap_or_else(|| panic!("not lowered: {schema:#}"))
}

#[test]
fn flat_object_closes_requires_everything_and_makes_optional_properties_nullable() {
    let schema = json!({
        "type": "object",
        "description": "Weather lookup",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}
        },
        "required": ["city"]
    });
    assert_eq!(
        lowered(schema),
        json!({
            "type": "object",
            "description": "Weather lookup",
            "properties": {
                // Already required: unchanged.
                "city": {"type": "string", "description": "City name"},
                // Optional: nullable, and null joins the enum that would otherwise refuse it.
                "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
                "days": {"type": ["integer", "null"], "minimum": 1, "maximum": 14}
            },
            "required": ["city", "unit", "days"],
            "additionalProperties": false
        })
    );
}

#[test]
fn nested_objects_and_arrays_of_objects_are_lowered_at_every_level() {
    let schema = json!({
        "type": "object",
        "properties": {
            "order": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "note": {"type": "string"},
                    "lines": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "sku": {"type": "string"},
                                "qty": {"type": "integer"}
                            },
                            "required": ["sku"],
                            "additionalProperties": true
                        }
                    }
                },
                "required": ["id", "lines"]
            },
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["order"]
    });
    assert_eq!(
        lowered(schema),
        json!({
            "type": "object",
            "properties": {
                "order": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "note": {"type": ["string", "null"]},
                        "lines": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "sku": {"type": "string"},
                                    "qty": {"type": ["integer", "null"]}
                                },
                                "required": ["sku", "qty"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["id", "note", "lines"],
                    "additionalProperties": false
                },
                "tags": {"type": ["array", "null"], "items": {"type": "string"}}
            },
            "required": ["order", "tags"],
            "additionalProperties": false
        })
    );
}

#[test]
fn unions_are_lowered_branch_by_branch_and_get_a_null_branch_when_optional() {
    let schema = json!({
        "type": "object",
        "properties": {
            "target": {
                "oneOf": [
                    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
                    {"type": "object", "properties": {"url": {"type": "string"}, "timeout": {"type": "number"}}}
                ]
            },
            "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "already": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        },
        "required": ["target"]
    });
    assert_eq!(
        lowered(schema),
        json!({
            "type": "object",
            "properties": {
                "target": {"anyOf": [
                    {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                        "additionalProperties": false
                    },
                    {
                        "type": "object",
                        "properties": {
                            "url": {"type": ["string", "null"]},
                            "timeout": {"type": ["number", "null"]}
                        },
                        "required": ["url", "timeout"],
                        "additionalProperties": false
                    }
                ]},
                "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                // Optional but already nullable: nothing to add.
                "already": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["target", "mode", "already"],
            "additionalProperties": false
        })
    );
}

#[test]
fn refs_defs_const_nullable_and_single_all_of() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"]
            }
        },
        "properties": {
            "from": {"$ref": "#/$defs/point", "description": "dropped beside a $ref"},
            "to": {"$ref": "#/$defs/point"},
            "via": {"allOf": [{"$ref": "#/$defs/point"}], "description": "a described ref"},
            "kind": {"const": "route"},
            "label": {"type": "string", "nullable": true},
            "speed": {"allOf": [{"type": "number"}], "description": "km/h"}
        },
        "required": ["from", "kind", "label", "speed"]
    });
    assert_eq!(
        lowered(schema),
        json!({
            "type": "object",
            "$defs": {
                "point": {
                    "type": "object",
                    "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                    "required": ["x", "y"],
                    "additionalProperties": false
                }
            },
            "properties": {
                "from": {"$ref": "#/$defs/point"},
                "to": {"anyOf": [{"$ref": "#/$defs/point"}, {"type": "null"}]},
                "via": {"anyOf": [{"$ref": "#/$defs/point"}, {"type": "null"}]},
                "kind": {"enum": ["route"]},
                "label": {"type": ["string", "null"]},
                "speed": {"type": "number", "description": "km/h"}
            },
            "required": ["from", "to", "via", "kind", "label", "speed"],
            "additionalProperties": false
        })
    );
}

#[test]
fn keywords_strict_mode_refuses_are_dropped() {
    let schema = json!({
        "type": "object",
        "$id": "x",
        "$comment": "c",
        "examples": [{}],
        "minProperties": 1,
        "unevaluatedProperties": false,
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 9, "default": "a", "pattern": "^[a-z]+$"},
            "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "maxItems": 3},
            "when": {"type": "string", "format": "date-time", "examples": ["2025-01-01T00:00:00Z"]}
        },
        "required": ["name", "ids", "when"]
    });
    assert_eq!(
        lowered(schema),
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
                "when": {"type": "string", "format": "date-time"}
            },
            "required": ["name", "ids", "when"],
            "additionalProperties": false
        })
    );
}

#[test]
fn a_root_without_properties_is_a_tool_without_arguments() {
    for schema in [
        json!({}),
        json!({"type": "object"}),
        json!({"type": "object", "properties": {}}),
    ] {
        assert_eq!(
            lowered(schema),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
    }
}

#[test]
fn schemas_strict_mode_cannot_express_are_not_lowered() {
    let object = |props: Value| json!({"type": "object", "properties": props});
    let cases = [
        // Roots that are not a plain object.
        json!({"type": "string"}),
        json!({"anyOf": [{"type": "object"}, {"type": "null"}]}),
        json!({"$ref": "#/$defs/a", "$defs": {"a": {"type": "object"}}}),
        json!([]),
        // Free-form data below the root.
        object(json!({"meta": {"type": "object"}})),
        object(json!({"meta": {"type": "object", "additionalProperties": {"type": "string"}}})),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        object(json!({"anything": {}})),
        object(json!({"anything": true})),
        object(json!({"described": {"description": "no type"}})),
        object(json!({"list": {"type": "array"}})),
        // Keywords with no strict form.
        object(json!({"a": {"type": "string", "not": {"const": "x"}}})),
        object(
            json!({"a": {"type": "object", "properties": {"b": {"type": "string"}}, "if": {}, "then": {}}}),
        ),
        object(
            json!({"a": {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "properties": {"b": {"type": "string"}}}}),
        ),
        object(
            json!({"pair": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]}}),
        ),
        object(json!({"pair": {"type": "array", "prefixItems": [{"type": "string"}]}})),
        object(
            json!({"both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object", "properties": {"b": {"type": "string"}}}]}}),
        ),
        object(json!({"u": {"anyOf": [{"type": "string"}], "oneOf": [{"type": "number"}]}})),
        object(json!({"u": {"type": []}})),
    ];
    for schema in cases {
        assert_eq!(lower(&schema), None, "{schema:#}");
    }
}

#[test]
fn lowering_is_idempotent() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "object", "properties": {"c": {"enum": [1, 2]}}},
            "d": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"e": {"type": "boolean"}}}]}
        },
        "required": ["a"]
    });
    let once = lowered(schema);
    assert_eq!(lowered(once.clone()), once);
}

fn tool(name: &str, schema: Value) -> pb::Tool {
    pb::Tool {
        name: name.into(),
        description: String::new(),
        input_schema_json: schema.to_string(),
        ..Default::default()
    }
}

fn strict_tools() -> StrictTools {
    StrictTools::of(&pb::Generation {
        tools: vec![
            tool(
                "book",
                json!({
                    "type": "object",
                    "$defs": {"guest": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
                        "required": ["name"]
                    }},
                    "properties": {
                        "room": {"type": "string"},
                        "note": {"type": "string"},
                        "late": {"type": ["boolean", "null"]},
                        "checkout": {"type": ["string", "null"]},
                        "guests": {"type": "array", "items": {"$ref": "#/$defs/guest"}},
                        "payer": {"anyOf": [{"$ref": "#/$defs/guest"}, {"type": "string"}]}
                    },
                    "required": ["room", "checkout"]
                }),
            ),
            // Not expressible in strict mode: sent non-strict, so never cleaned.
            tool(
                "free",
                json!({"type": "object", "properties": {"data": {"type": "object"}}}),
            ),
        ],
        ..Default::default()
    })
}

#[test]
fn only_tools_sent_strict_are_cleaned() {
    let tools = strict_tools();
    assert!(!tools.is_empty());
    let args = r#"{"data":null}"#.to_string();
    assert_eq!(tools.clean("free", args.clone()), args);
    assert_eq!(tools.clean("unknown", args.clone()), args);
    assert!(StrictTools::of(&pb::Generation::default()).is_empty());
}

#[test]
fn clean_removes_the_nulls_strict_mode_added_and_keeps_the_real_ones() {
    let tools = strict_tools();
    let args = json!({
        "room": "12",
        "note": null,
        // Optional but nullable in the caller's schema: a real answer.
        "late": null,
        // Required and nullable: stays.
        "checkout": null,
        "guests": [
            {"name": "Ada", "email": null},
            {"name": "Bob", "email": "bob@example.com"}
        ],
        "payer": {"name": "Ada", "email": null}
    })
    .to_string();
    let cleaned: Value = serde_json::from_str(&tools.clean("book", args)).unwrap();
    assert_eq!(
        cleaned,
        json!({
            "room": "12",
            "late": null,
            "checkout": null,
            "guests": [{"name": "Ada"}, {"name": "Bob", "email": "bob@example.com"}],
            "payer": {"name": "Ada"}
        })
    );
}

#[test]
fn clean_returns_the_provider_bytes_when_nothing_changes() {
    let tools = strict_tools();
    for args in [
        r#"{ "room": "12",  "checkout": null }"#,
        r#"{"room":"12","checkout":"noon","payer":"cash"}"#,
        "not json",
        "[1,2]",
    ] {
        assert_eq!(tools.clean("book", args.to_string()), args);
    }
}

#[test]
fn accepts_null_reads_every_way_a_schema_can_allow_it() {
    let root = json!({"$defs": {"n": {"type": "null"}, "s": {"type": "string"}}});
    for (schema, want) in [
        (json!({"type": "string"}), false),
        (json!({"type": ["string", "null"]}), true),
        (json!({"type": "string", "nullable": true}), true),
        (json!({"enum": ["a", null]}), true),
        (json!({"enum": ["a"]}), false),
        (json!({"type": ["string", "null"], "enum": ["a"]}), false),
        (json!({"const": null}), true),
        (
            json!({"anyOf": [{"type": "string"}, {"$ref": "#/$defs/n"}]}),
            true,
        ),
        (json!({"oneOf": [{"$ref": "#/$defs/s"}]}), false),
        (json!({"$ref": "#/$defs/s"}), false),
        (json!({"$ref": "#/nowhere"}), true),
        (json!({}), true),
        (json!(true), true),
        (json!(false), false),
    ] {
        assert_eq!(accepts_null(&schema, &root, 0), want, "{schema}");
    }
}

#[test]
fn ref_cycles_terminate() {
    let root = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}});
    assert_eq!(resolve(&json!({"$ref": "#/$defs/a"}), &root), None);
    let mut v = json!({"x": null});
    assert!(!strip_nulls(
        &mut v,
        &json!({"$ref": "#/$defs/a"}),
        &root,
        0
    ));
}
