use super::*;

fn schema_of(name: &str) -> Value {
    builtin_specs()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
        .input_schema
}

#[test]
fn specs_cover_the_six_tools_with_valid_schemas() {
    let names: Vec<String> = builtin_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["read", "write", "edit", "list", "grep", "bash"]);
    for spec in builtin_specs() {
        assert!(
            jsonschema::meta::is_valid(&spec.input_schema),
            "{}",
            spec.name
        );
        assert_eq!(spec.input_schema["type"], "object");
        assert_eq!(spec.input_schema["additionalProperties"], false);
        assert!(!spec.description.is_empty());
    }
}

#[test]
fn valid_input_is_returned_parsed() {
    let input = validate_input(&schema_of("read"), r#"{"path": "a.txt", "offset": 3}"#).unwrap();
    assert_eq!(input, json!({"path": "a.txt", "offset": 3}));
}

#[test]
fn empty_input_is_an_empty_object() {
    assert_eq!(validate_input(&schema_of("list"), "  ").unwrap(), json!({}));
    let err = validate_input(&schema_of("read"), "").unwrap_err();
    assert!(err.contains("\"path\" is a required property"), "{err}");
}

#[test]
fn invalid_json_is_named() {
    let err = validate_input(&schema_of("read"), r#"{"path": "a"#).unwrap_err();
    assert!(err.starts_with("input is not valid JSON"), "{err}");
}

#[test]
fn violations_name_the_field() {
    let err = validate_input(&schema_of("read"), r#"{"path": "a", "offset": "x"}"#).unwrap_err();
    assert!(err.contains("at `/offset`"), "{err}");
    assert!(err.contains("integer"), "{err}");
    let err = validate_input(&schema_of("read"), r#"{"path": "a", "ofset": 1}"#).unwrap_err();
    assert!(err.contains("ofset"), "{err}");
    let err = validate_input(&schema_of("edit"), r#"[1]"#).unwrap_err();
    assert!(err.contains("object"), "{err}");
}

#[test]
fn an_invalid_schema_is_reported() {
    let err = validate_input(&json!({"type": 12}), "{}").unwrap_err();
    assert!(err.contains("schema is itself invalid"), "{err}");
}
