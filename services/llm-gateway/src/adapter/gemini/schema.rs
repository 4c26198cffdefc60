//! JSON Schema → the OpenAPI 3.0 subset Gemini takes in `functionDeclarations[].parameters` and `responseSchema`
//! (docs/providers.md §6.5).
//!
//! Gemini parses a schema as a protobuf message, so any keyword it does not know fails the whole request with
//! `Invalid JSON payload received. Unknown name "…"`. The lowering therefore keeps an **allowlist** of keywords
//! rather than removing known offenders, and rewrites what can be expressed another way:
//!
//! - `$ref` is inlined (against `$defs`, `definitions` or any `#/…` pointer into the root), sibling keywords
//!   overriding the target's; a recursive reference cannot be expressed and is an error, as is nesting deeper than
//!   [`MAX_DEPTH`] or a schema that inlines to more than [`MAX_NODES`] sub-schemas;
//! - `"type": ["string", "null"]` becomes `"type": "string", "nullable": true`, and several non-null types become an
//!   `anyOf` with one branch per type;
//! - an `anyOf` / `oneOf` branch `{"type": "null"}` becomes `nullable: true` (and a single remaining branch is
//!   folded into its parent); `oneOf` is sent as `anyOf`, the closest Gemini has;
//! - `allOf` branches are merged into their parent (properties and `required` united);
//! - `const` becomes a one-value `enum`; enum values become strings and the type `string`, because Gemini accepts
//!   `enum` only on strings (a `null` value becomes `nullable`);
//! - `format` is kept only where Gemini accepts it (`enum`/`date-time` on strings, `int32`/`int64`, `float`/`double`);
//! - `required` keeps only names that are in `properties` (Gemini rejects the others), and an empty nested
//!   `properties` map is dropped (Gemini wants it non-empty for `OBJECT`);
//! - everything else (`$schema`, `$id`, `$comment`, `additionalProperties`, `propertyNames`, `examples`, `default`,
//!   `patternProperties`, `exclusiveMinimum`, `not`, …) is dropped: it only ever narrows or documents, and the
//!   processor still validates tool arguments against the caller's original schema.

use serde_json::{Map, Value};

use crate::adapter::BuildError;

/// Deepest sub-schema nesting accepted; real tool schemas stay far below, and it bounds the recursion.
pub(super) const MAX_DEPTH: usize = 32;
/// Most sub-schemas one lowered schema may hold: a small schema whose `$ref`s fan out can inline exponentially.
pub(super) const MAX_NODES: usize = 10_000;

/// Keywords copied as they are (after the rewrites above). Everything not here or handled explicitly is dropped.
const SCALAR_KEYWORDS: [&str; 11] = [
    "title",
    "description",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
];

/// Lowers a tool's `input_schema_json` into `parameters`. `None` means "send no `parameters`": an empty schema, or
/// an object root without properties, which Gemini rejects as an empty `OBJECT` (docs/providers.md §6.5).
pub(super) fn parameters(schema_json: &str, field: &str) -> Result<Option<Value>, BuildError> {
    if schema_json.trim().is_empty() {
        return Ok(None);
    }
    let root: Value = serde_json::from_str(schema_json)
        .map_err(|e| BuildError::new(field, format!("not valid JSON: {e}")))?;
    let Value::Object(obj) = &root else {
        return Err(BuildError::new(
            field,
            "the schema root must be a JSON object",
        ));
    };
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(_) => {
            return Err(BuildError::new(
                field,
                "the schema root must have type \"object\"",
            ));
        }
    }
    let mut lowered = lower(&root, field)?;
    let has_properties = lowered
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if !has_properties {
        return Ok(None);
    }
    if let Value::Object(out) = &mut lowered {
        out.insert("type".into(), Value::from("object"));
    }
    Ok(Some(lowered))
}

/// Lowers any schema (used as is for `responseSchema`); `field` names the request field in errors.
pub(super) fn lower(root: &Value, field: &str) -> Result<Value, BuildError> {
    let mut l = Lowering {
        root,
        field,
        refs: Vec::new(),
        nodes: 0,
    };
    l.schema(root, "", 0).map(Value::Object)
}

/// One lowering pass over a schema.
struct Lowering<'a> {
    /// The whole schema, for resolving `#/…` references.
    root: &'a Value,
    /// The request field, for errors.
    field: &'a str,
    /// References being inlined, outermost first: meeting one of them again means the schema is recursive.
    refs: Vec<String>,
    /// Sub-schemas produced so far, against [`MAX_NODES`].
    nodes: usize,
}

impl Lowering<'_> {
    fn error(&self, path: &str, message: impl std::fmt::Display) -> BuildError {
        let at = if path.is_empty() { "/" } else { path };
        BuildError::new(self.field, format!("at {at}: {message}"))
    }

    /// Lowers the sub-schema at JSON-pointer `path`, `depth` levels below the root.
    fn schema(
        &mut self,
        schema: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, BuildError> {
        if depth > MAX_DEPTH {
            return Err(self.error(
                path,
                format!("the schema nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error(
                path,
                format!("the schema expands to more than {MAX_NODES} sub-schemas once its $refs are inlined"),
            ));
        }
        let obj = match schema {
            Value::Object(obj) => obj,
            // `true` accepts anything: the closest Gemini form is a schema with no constraint at all.
            Value::Bool(true) => return Ok(Map::new()),
            Value::Bool(false) => {
                return Err(self.error(
                    path,
                    "a `false` schema (nothing is valid) cannot be expressed",
                ));
            }
            _ => return Err(self.error(path, "a schema must be a JSON object")),
        };

        if let Some(reference) = obj.get("$ref") {
            return self.inline_ref(obj, reference, path, depth);
        }

        let mut out = self.keywords(obj, path, depth)?;

        if let Some(all) = obj.get("allOf") {
            let Value::Array(branches) = all else {
                return Err(self.error(path, "`allOf` must be an array"));
            };
            for (i, branch) in branches.iter().enumerate() {
                let lowered = self.schema(branch, &format!("{path}/allOf/{i}"), depth + 1)?;
                merge_all_of(&mut out, lowered);
            }
        }
        Ok(out)
    }

    /// Inlines `$ref`, the keywords next to it overriding the referenced schema's.
    fn inline_ref(
        &mut self,
        obj: &Map<String, Value>,
        reference: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, BuildError> {
        let Some(reference) = reference.as_str() else {
            return Err(self.error(path, "`$ref` must be a string"));
        };
        if self.refs.iter().any(|r| r == reference) {
            return Err(self.error(
                path,
                format!(
                    "`$ref` {reference:?} is recursive; Gemini's schema subset cannot express recursive schemas"
                ),
            ));
        }
        let target = resolve(self.root, reference).ok_or_else(|| {
            self.error(
                path,
                format!("`$ref` {reference:?} does not point into this schema (only local `#/…` references are inlined)"),
            )
        })?;
        let merged = match target {
            Value::Object(t) => {
                let mut merged = t.clone();
                for (k, v) in obj.iter().filter(|(k, _)| k.as_str() != "$ref") {
                    merged.insert(k.clone(), v.clone());
                }
                Value::Object(merged)
            }
            other => other.clone(),
        };
        self.refs.push(reference.to_string());
        let lowered = self.schema(&merged, path, depth + 1);
        self.refs.pop();
        lowered
    }

    /// Every keyword of a `$ref`-free schema except `allOf`.
    fn keywords(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, BuildError> {
        let mut nullable = obj.get("nullable").and_then(Value::as_bool) == Some(true);
        let mut types = self.types(obj, path, &mut nullable)?;
        let enum_strings = self.enum_strings(obj, path, &mut nullable)?;
        if enum_strings.is_some() {
            types = vec!["string"];
        }
        // Several non-null types: one `anyOf` branch per type, each keeping the keywords that apply to it.
        if types.len() > 1 {
            return self.one_branch_per_type(obj, &types, nullable, path, depth);
        }
        let mut out = Map::new();
        // JSON Schema lets `type` be implied by the keywords; Gemini wants it spelled out.
        let ty = types.first().copied().or_else(|| {
            if obj.contains_key("properties") {
                Some("object")
            } else if obj.contains_key("items") || obj.contains_key("prefixItems") {
                Some("array")
            } else {
                None
            }
        });
        if let Some(t) = ty {
            out.insert("type".into(), Value::from(t));
        }
        if let (Some(t), Some(Value::String(format))) = (ty, obj.get("format"))
            && format_allowed(t, format)
        {
            out.insert("format".into(), Value::String(format.clone()));
        }
        for key in SCALAR_KEYWORDS {
            if let Some(v) = obj.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        if let Some(values) = enum_strings {
            out.insert("enum".into(), Value::Array(values));
        }
        self.properties(obj, &mut out, path, depth)?;
        self.items(obj, &mut out, path, depth)?;
        self.branches(obj, &mut out, &mut nullable, path, depth)?;
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Ok(out)
    }

    /// The non-null types of `type` (a string or an array); `null` among them sets `nullable`.
    fn types<'o>(
        &self,
        obj: &'o Map<String, Value>,
        path: &str,
        nullable: &mut bool,
    ) -> Result<Vec<&'o str>, BuildError> {
        let mut types: Vec<&str> = match obj.get("type") {
            None => Vec::new(),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts
                .iter()
                .map(|t| {
                    t.as_str()
                        .ok_or_else(|| self.error(path, "`type` entries must be strings"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(self.error(path, "`type` must be a string or an array of strings"));
            }
        };
        if types.contains(&"null") {
            *nullable = true;
            types.retain(|t| *t != "null");
        }

        Ok(types)
    }

    /// `enum` (or `const`) as strings, the only enum Gemini takes; a `null` member sets `nullable`.
    fn enum_strings(
        &self,
        obj: &Map<String, Value>,
        path: &str,
        nullable: &mut bool,
    ) -> Result<Option<Vec<Value>>, BuildError> {
        let enum_values = match (obj.get("enum"), obj.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.as_slice()),
            (Some(_), _) => return Err(self.error(path, "`enum` must be an array")),
            (None, Some(c)) => Some(std::slice::from_ref(c)),
            (None, None) => None,
        };
        Ok(enum_values.map(|values| {
            if values.iter().any(Value::is_null) {
                *nullable = true;
            }
            values
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| match v {
                    Value::String(s) => Value::String(s.clone()),
                    other => Value::String(other.to_string()),
                })
                .collect::<Vec<_>>()
        }))
    }

    /// A schema of several types as `anyOf` of one single-typed branch each.
    fn one_branch_per_type(
        &mut self,
        obj: &Map<String, Value>,
        types: &[&str],
        nullable: bool,
        path: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, BuildError> {
        let mut out = Map::new();
        for key in ["title", "description"] {
            if let Some(v) = obj.get(key).filter(|v| v.is_string()) {
                out.insert(key.into(), v.clone());
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        let mut branches = Vec::with_capacity(types.len());
        for (i, t) in types.iter().enumerate() {
            let mut single: Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| applies_to(k, t))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            single.insert("type".into(), Value::from(*t));
            let lowered = self.schema(
                &Value::Object(single),
                &format!("{path}/type/{i}"),
                depth + 1,
            )?;
            branches.push(Value::Object(lowered));
        }
        out.insert("anyOf".into(), Value::Array(branches));
        Ok(out)
    }

    /// `properties`, each lowered, and the `required` names among them.
    fn properties(
        &mut self,
        obj: &Map<String, Value>,
        out: &mut Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<(), BuildError> {
        if let Some(props) = obj.get("properties") {
            let Value::Object(props) = props else {
                return Err(self.error(path, "`properties` must be an object"));
            };
            let mut lowered = Map::new();
            for (name, sub) in props {
                let sub_path = format!("{path}/properties/{}", escape_pointer(name));
                lowered.insert(
                    name.clone(),
                    Value::Object(self.schema(sub, &sub_path, depth + 1)?),
                );
            }
            if !lowered.is_empty() {
                out.insert("properties".into(), Value::Object(lowered));
            }
        }
        if let Some(Value::Array(required)) = obj.get("required") {
            let known = out.get("properties").and_then(Value::as_object);
            let kept: Vec<Value> = required
                .iter()
                .filter(|r| {
                    r.as_str()
                        .is_some_and(|name| known.is_some_and(|p| p.contains_key(name)))
                })
                .cloned()
                .collect();
            if !kept.is_empty() {
                out.insert("required".into(), Value::Array(kept));
            }
        }

        Ok(())
    }

    /// `items`: one schema, or a tuple (draft 4 `items` array, 2020-12 `prefixItems`) as the `anyOf` of its positions.
    fn items(
        &mut self,
        obj: &Map<String, Value>,
        out: &mut Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<(), BuildError> {
        // `items` as an array (draft 4 tuples) or `prefixItems` (2020-12): Gemini has no tuples, so an item may be
        // any of the positions' schemas.
        let tuple = match (obj.get("items"), obj.get("prefixItems")) {
            (Some(Value::Array(items)), _) | (None, Some(Value::Array(items))) => Some(items),
            _ => None,
        };
        if let Some(items) = tuple {
            let mut branches = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                branches.push(Value::Object(self.schema(
                    item,
                    &format!("{path}/items/{i}"),
                    depth + 1,
                )?));
            }
            let items = match branches.len() {
                0 => None,
                1 => branches.pop(),
                _ => Some(Value::Object(Map::from_iter([(
                    "anyOf".to_string(),
                    Value::Array(branches),
                )]))),
            };
            if let Some(items) = items {
                out.insert("items".into(), items);
            }
        } else if let Some(items) = obj.get("items") {
            let lowered = self.schema(items, &format!("{path}/items"), depth + 1)?;
            out.insert("items".into(), Value::Object(lowered));
        }

        Ok(())
    }

    /// `anyOf` and `oneOf`: null-only branches become `nullable`, a single branch left folds into the parent.
    fn branches(
        &mut self,
        obj: &Map<String, Value>,
        out: &mut Map<String, Value>,
        nullable: &mut bool,
        path: &str,
        depth: usize,
    ) -> Result<(), BuildError> {
        for key in ["anyOf", "oneOf"] {
            let Some(branches) = obj.get(key) else {
                continue;
            };
            let Value::Array(branches) = branches else {
                return Err(self.error(path, format!("`{key}` must be an array")));
            };
            let mut kept = Vec::with_capacity(branches.len());
            for (i, branch) in branches.iter().enumerate() {
                let lowered = self.schema(branch, &format!("{path}/{key}/{i}"), depth + 1)?;
                if is_null_only(&lowered) {
                    *nullable = true;
                } else {
                    kept.push(lowered);
                }
            }
            match kept.len() {
                0 => {}
                1 => {
                    // `anyOf: [T, null]`, the usual spelling of an optional value: fold T into its parent, whose
                    // own keywords (a description, say) win.
                    for (k, v) in kept.remove(0) {
                        if k == "nullable" {
                            *nullable |= v == Value::Bool(true);
                        } else {
                            out.entry(k).or_insert(v);
                        }
                    }
                }
                _ => {
                    let branches = kept.into_iter().map(Value::Object);
                    match out.get_mut("anyOf") {
                        // Both `anyOf` and `oneOf`: the value must match one of each, which Gemini cannot say;
                        // offering the union is the closest.
                        Some(Value::Array(existing)) => existing.extend(branches),
                        _ => {
                            out.insert("anyOf".into(), Value::Array(branches.collect()));
                        }
                    }
                }
            }
        }

        Ok(())
    }
}

/// A lowered branch that only allows `null` (`{"type": "null"}` became `{"nullable": true}`).
fn is_null_only(schema: &Map<String, Value>) -> bool {
    schema.get("nullable") == Some(&Value::Bool(true))
        && schema
            .keys()
            .all(|k| matches!(k.as_str(), "nullable" | "title" | "description"))
}

/// Whether keyword `key` constrains values of JSON type `ty` (for splitting a multi-type schema into branches).
fn applies_to(key: &str, ty: &str) -> bool {
    match key {
        "format" | "enum" | "const" => true,
        "minLength" | "maxLength" | "pattern" => ty == "string",
        "minimum" | "maximum" => matches!(ty, "number" | "integer"),
        "items" | "prefixItems" | "minItems" | "maxItems" => ty == "array",
        "properties" | "required" | "minProperties" | "maxProperties" => ty == "object",
        _ => false,
    }
}

/// Formats Gemini accepts per type; it rejects any other (`only 'enum' and 'date-time' are supported for STRING`).
fn format_allowed(ty: &str, format: &str) -> bool {
    match ty {
        "string" => matches!(format, "enum" | "date-time"),
        "integer" => matches!(format, "int32" | "int64"),
        "number" => matches!(format, "float" | "double"),
        _ => false,
    }
}

/// Merges one lowered `allOf` branch into its parent: properties and `required` are united, the parent's other
/// keywords win, and the branch fills in the ones the parent lacks.
fn merge_all_of(out: &mut Map<String, Value>, branch: Map<String, Value>) {
    for (k, v) in branch {
        match (k.as_str(), out.get_mut(&k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, schema) in theirs {
                    mine.entry(name).or_insert(schema);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                out.insert(k, v);
            }
        }
    }
}

/// Resolves a local reference (`#`, `#/$defs/Name`, `#/definitions/Name`, any `#/…` JSON pointer).
fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    // References are URI fragments: `%25` and friends may appear, but tool schemas use plain names in practice, so
    // only the JSON-pointer escapes are undone (by `Value::pointer`).
    root.pointer(pointer)
}

/// Escapes a property name for use in a JSON pointer (RFC 6901), for error paths.
fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}
