//! OpenAI strict mode ("Structured Outputs") for tools and JSON Schema output (docs/providers.md §6.5), used by
//! the OpenAI Chat and Responses adapters for models whose catalog entry sets `strict_schemas`.
//!
//! With `strict: true` OpenAI constrains generation to the schema, but it only accepts schemas in which every object
//! sets `additionalProperties: false` and lists *every* property in `required`. Callers' schemas rarely do, so
//! [`lower`] rewrites them:
//!
//! - every object gets `additionalProperties: false` and `required` = all its properties, in declaration order;
//! - a property the caller left optional becomes nullable, the only way strict mode expresses "may be absent":
//!   `"type": "T"` becomes `["T", "null"]` (and `null` joins an `enum`), a `$ref` or an `anyOf` gets a
//!   `{"type": "null"}` branch; a property that already accepts `null` is left alone;
//! - `oneOf` becomes `anyOf` (strict mode has no `oneOf`), a one-branch `allOf` is folded into its parent, `const`
//!   becomes a one-value `enum`, OpenAPI's `nullable: true` becomes a `null` type;
//! - keywords strict mode refuses that only narrow or document (`default`, `examples`, `minLength`, `uniqueItems`,
//!   `propertyNames`, `$schema`, …) are dropped: the caller's original schema is still what the arguments are
//!   checked against (by the session-processor, for client tools);
//! - a schema strict mode cannot express at all is **not** lowered ([`lower`] returns `None`) and goes out as
//!   written, with strict off for that tool: a free-form object or map (an object without `properties` below the
//!   root, `additionalProperties` given as a schema), an unconstrained `{}` / `true`, `not`, `if`/`then`/`else`,
//!   `patternProperties`, `dependentSchemas`, tuples, `allOf` with several branches, or a root that is not an
//!   object. Strict mode is a guarantee the operator opted into, not a requirement: a tool it cannot cover still
//!   works, unconstrained, rather than failing the request.
//!
//! Because the model now answers `null` for an optional property it would have left out, the decoders pass the
//! final arguments of every strict tool through [`StrictTools::clean`], which removes exactly those nulls again
//! (walking the caller's original schema), so a `ToolCall` validates against the schema the caller declared. The
//! `ToolInputDelta` fragments streamed before it are the provider's raw text. JSON Schema *output* cannot be
//! cleaned that way (it is streamed as text): with strict on, an optional field of structured text output arrives
//! as `null`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::adapter::pb;

/// Deepest nesting lowered or cleaned. Real tool schemas stay far below it (OpenAI itself caps strict schemas at ten
/// levels); it bounds the recursion on hostile input and on `$ref` cycles.
const MAX_DEPTH: usize = 32;

/// Keywords copied unchanged: the ones strict mode accepts besides the structural ones handled explicitly.
const KEPT: [&str; 12] = [
    "title",
    "description",
    "enum",
    "format",
    "pattern",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
];

/// Keywords that change what a schema accepts in ways strict mode cannot express: a schema holding one anywhere is
/// not lowered.
const INEXPRESSIBLE: [&str; 8] = [
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "prefixItems",
];

/// The strict-mode form of a tool's parameters or of an output schema, or `None` when strict mode cannot express
/// it (see the module docs). The root must be an object schema (`"type": "object"`, or no type at all).
pub fn lower(schema: &Value) -> Option<Value> {
    let Value::Object(root) = schema else {
        return None;
    };
    match root.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(_) => return None,
    }
    // Strict mode wants an object at the root, not a union of them.
    if ["anyOf", "oneOf", "allOf", "$ref"]
        .iter()
        .any(|k| root.contains_key(*k))
    {
        return None;
    }
    let mut root = root.clone();
    root.insert("type".into(), Value::from("object"));
    lower_object(&root, 0, true).map(Value::Object)
}

/// Lowers any sub-schema.
fn lower_value(schema: &Value, depth: usize) -> Option<Map<String, Value>> {
    match schema {
        Value::Object(s) => lower_object(s, depth, false),
        // `true` accepts anything and `false` nothing: neither has a strict form.
        _ => None,
    }
}

fn lower_object(s: &Map<String, Value>, depth: usize, is_root: bool) -> Option<Map<String, Value>> {
    if depth > MAX_DEPTH || INEXPRESSIBLE.iter().any(|k| s.contains_key(*k)) {
        return None;
    }
    if let Some(Value::Array(items)) = s.get("items")
        && !items.is_empty()
    {
        return None; // a tuple (draft 4–7 `items` array)
    }

    // `$ref` stands alone in strict mode; the target carries the constraints.
    if let Some(reference) = s.get("$ref") {
        return Some(Map::from_iter([("$ref".to_string(), reference.clone())]));
    }

    if let Some(all_of) = s.get("allOf") {
        return fold_all_of(s, all_of, depth);
    }

    let mut out = Map::new();
    for key in KEPT {
        if let Some(v) = s.get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    if let Some(c) = s.get("const") {
        out.insert("enum".into(), json!([c]));
    }

    let ty = lower_type(s)?;
    let has_type = |name: &str| match &ty {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    };

    if has_type("object") {
        lower_properties(s, &mut out, depth, is_root)?;
    }
    if has_type("array") {
        // An array of anything has no strict form.
        let items = lower_value(s.get("items")?, depth + 1)?;
        out.insert("items".into(), Value::Object(items));
    }

    if let Some(any_of) = lower_branches(s, depth)? {
        out.insert("anyOf".into(), any_of);
    }
    for defs in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = s.get(defs) {
            let mut lowered = Map::new();
            for (name, def) in d {
                lowered.insert(name.clone(), Value::Object(lower_value(def, depth + 1)?));
            }
            out.insert(defs.to_string(), Value::Object(lowered));
        }
    }

    if let Some(ty) = ty {
        out.insert("type".into(), ty);
    }
    // Nothing left that says what the value is: an unconstrained schema, which strict mode cannot express.
    if !["type", "anyOf", "enum"]
        .iter()
        .any(|k| out.contains_key(*k))
    {
        return None;
    }
    Some(out)
}

/// The schema's `type` as strict mode writes it (`object` where only `properties` says so, `null` added for
/// OpenAPI's `nullable: true`); `Some(None)` for a schema without a type, `None` for a type that cannot be lowered.
fn lower_type(s: &Map<String, Value>) -> Option<Option<Value>> {
    let mut ty = s.get("type").cloned();
    if ty.is_none() && s.contains_key("properties") {
        ty = Some(Value::from("object"));
    }
    match &ty {
        Some(Value::Array(types)) if types.is_empty() => return None,
        Some(Value::String(_)) | Some(Value::Array(_)) | None => {}
        Some(_) => return None,
    }
    if s.get("nullable") == Some(&Value::Bool(true)) {
        ty = ty.map(with_null);
    }
    Some(ty)
}

/// The schema's `anyOf` or `oneOf` branches lowered, as one `anyOf` (strict mode has no `oneOf`); `Some(None)`
/// without either, `None` when both are given, a branch cannot be lowered or there is none.
fn lower_branches(s: &Map<String, Value>, depth: usize) -> Option<Option<Value>> {
    let branches = match (s.get("anyOf"), s.get("oneOf")) {
        (Some(_), Some(_)) => return None,
        (Some(b), None) | (None, Some(b)) => b,
        (None, None) => return Some(None),
    };
    let Value::Array(branches) = branches else {
        return None;
    };
    let lowered: Vec<Value> = branches
        .iter()
        .map(|b| lower_value(b, depth + 1).map(Value::Object))
        .collect::<Option<_>>()?;
    if lowered.is_empty() {
        return None;
    }
    Some(Some(Value::Array(lowered)))
}

/// `properties`, `required` (all of them) and `additionalProperties: false` of an object schema.
fn lower_properties(
    s: &Map<String, Value>,
    out: &mut Map<String, Value>,
    depth: usize,
    is_root: bool,
) -> Option<()> {
    let properties = match s.get("properties") {
        Some(Value::Object(p)) => p.clone(),
        None => Map::new(),
        Some(_) => return None,
    };
    match s.get("additionalProperties") {
        // A map (`additionalProperties: {schema}`) cannot be declared with fixed properties.
        Some(Value::Object(a)) if !a.is_empty() => return None,
        // Below the root, an object without properties is free-form data; strict mode would only ever allow `{}`.
        // At the root it is a tool without arguments, which `{}` is exactly.
        _ if properties.is_empty() && !is_root => return None,
        // Absent, `true` or `{}`: extra keys were merely allowed; the model never needs them, so they are closed.
        _ => {}
    }
    let required: Vec<&str> = match s.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut lowered = Map::new();
    for (name, sub) in &properties {
        let mut p = lower_value(sub, depth + 1)?;
        if !required.contains(&name.as_str()) {
            p = nullable(p);
        }
        lowered.insert(name.clone(), Value::Object(p));
    }
    let all: Vec<Value> = properties.keys().map(|k| Value::from(k.as_str())).collect();
    out.insert("properties".into(), Value::Object(lowered));
    out.insert("required".into(), Value::Array(all));
    out.insert("additionalProperties".into(), Value::Bool(false));
    Some(())
}

/// A one-branch `allOf` (what many generators emit to attach a description to a `$ref`) is the branch itself,
/// keeping the parent's annotations. Anything more would need a schema merge strict mode gives no guarantee about.
fn fold_all_of(s: &Map<String, Value>, all_of: &Value, depth: usize) -> Option<Map<String, Value>> {
    let Value::Array(branches) = all_of else {
        return None;
    };
    let [only] = branches.as_slice() else {
        return None;
    };
    const ANNOTATIONS: [&str; 4] = ["allOf", "description", "title", "default"];
    if s.keys().any(|k| !ANNOTATIONS.contains(&k.as_str())) {
        return None;
    }
    let mut out = lower_value(only, depth + 1)?;
    // A `$ref` stands alone in strict mode, so the annotations only join a branch that is not one.
    if !out.contains_key("$ref") {
        for key in ["title", "description"] {
            if let Some(v) = s.get(key) {
                out.entry(key).or_insert_with(|| v.clone());
            }
        }
    }
    Some(out)
}

/// `type` with `"null"` added.
fn with_null(ty: Value) -> Value {
    match ty {
        Value::String(t) if t == "null" => Value::String(t),
        Value::String(t) => json!([t, "null"]),
        Value::Array(mut ts) => {
            if !ts.iter().any(|t| t == "null") {
                ts.push(Value::from("null"));
            }
            Value::Array(ts)
        }
        other => other,
    }
}

/// A lowered schema that also accepts `null`.
fn nullable(mut p: Map<String, Value>) -> Map<String, Value> {
    if lowered_accepts_null(&p) {
        return p;
    }
    if p.contains_key("$ref") {
        return Map::from_iter([(
            "anyOf".to_string(),
            json!([Value::Object(p), {"type": "null"}]),
        )]);
    }
    if let Some(ty) = p.remove("type") {
        p.insert("type".into(), with_null(ty));
    } else if let Some(Value::Array(branches)) = p.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
    }
    // An enum restricts the value on top of the type, so `null` must be one of its values too.
    if let Some(Value::Array(values)) = p.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    p
}

/// Whether a *lowered* schema (the shapes [`lower`] produces) accepts `null`.
fn lowered_accepts_null(p: &Map<String, Value>) -> bool {
    let type_null = match p.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    };
    let enum_ok = match p.get("enum") {
        Some(Value::Array(values)) => values.contains(&Value::Null),
        _ => true,
    };
    let branch_null = match p.get("anyOf") {
        Some(Value::Array(bs)) => bs
            .iter()
            .filter_map(Value::as_object)
            .any(lowered_accepts_null),
        _ => false,
    };
    (type_null && enum_ok) || branch_null
}

/// The original schemas of the tools a request sent in strict mode, by tool name: what the decoder needs to remove
/// the nulls strict mode made the model write for optional properties.
#[derive(Debug, Clone, Default)]
pub struct StrictTools {
    schemas: HashMap<String, Value>,
}

impl StrictTools {
    /// The tools of `g` that the adapters lower to strict mode (those whose schema [`lower`] accepts). A tool the
    /// caller marked strict is not among them: it goes as written, so the model never writes a `null` the caller's
    /// schema did not ask for.
    pub fn of(g: &pb::Generation) -> StrictTools {
        let mut schemas = HashMap::new();
        for tool in g.tools.iter().filter(|t| !t.strict) {
            let Ok(schema) = serde_json::from_str::<Value>(&tool.input_schema_json) else {
                continue;
            };
            if lower(&schema).is_some() {
                schemas.insert(tool.name.clone(), schema);
            }
        }
        StrictTools { schemas }
    }

    /// True when no tool went out strict, so nothing ever needs cleaning.
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty()
    }

    /// The arguments of a call to `tool` with every `null` removed that stands for a property the caller's schema
    /// made optional and does not allow to be `null`. Arguments of other tools, arguments that are not JSON and
    /// arguments with nothing to remove are returned unchanged, byte for byte.
    pub fn clean(&self, tool: &str, input_json: String) -> String {
        let Some(schema) = self.schemas.get(tool) else {
            return input_json;
        };
        let Ok(mut args) = serde_json::from_str::<Value>(&input_json) else {
            return input_json;
        };
        if !strip_nulls(&mut args, schema, schema, 0) {
            return input_json;
        }
        serde_json::to_string(&args).unwrap_or(input_json)
    }
}

/// Removes, in place, the `null`s of `value` that strict mode introduced for optional properties of `schema`
/// (resolving local `$ref`s against `root`). Returns whether anything was removed.
fn strip_nulls(value: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(s) = resolve(schema, root).and_then(Value::as_object) else {
        return false;
    };
    let mut changed = false;
    if let Some(Value::Array(all)) = s.get("allOf") {
        for branch in all {
            changed |= strip_nulls(value, branch, root, depth + 1);
        }
    }
    let branches = s.get("anyOf").or_else(|| s.get("oneOf"));
    if let Some(Value::Array(branches)) = branches
        && let Some(branch) = branches
            .iter()
            .find(|b| shape_matches(b, value, root, depth))
    {
        changed |= strip_nulls(value, branch, root, depth + 1);
    }
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(properties)) = s.get("properties") else {
                return changed;
            };
            let required: Vec<&str> = match s.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            fields.retain(|name, v| {
                let optional_null = v.is_null()
                    && !required.contains(&name.as_str())
                    && properties
                        .get(name)
                        .is_some_and(|p| !accepts_null(p, root, depth + 1));
                changed |= optional_null;
                !optional_null
            });
            for (name, v) in fields.iter_mut() {
                if let Some(p) = properties.get(name) {
                    changed |= strip_nulls(v, p, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items").filter(|i| i.is_object()) {
                for item in items {
                    changed |= strip_nulls(item, item_schema, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}

/// Whether a union branch describes values of `value`'s JSON kind (object or array), the only kinds that can hold
/// nulls to remove.
fn shape_matches(branch: &Value, value: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(b) = resolve(branch, root).and_then(Value::as_object) else {
        return false;
    };
    let (kind, marker) = match value {
        Value::Object(_) => ("object", "properties"),
        Value::Array(_) => ("array", "items"),
        _ => return false,
    };
    let typed = match b.get("type") {
        Some(Value::String(t)) => t == kind,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == kind),
        _ => false,
    };
    typed || b.contains_key(marker)
}

/// Whether the caller's original sub-schema accepts `null` (then a `null` is the model's real answer and stays).
fn accepts_null(schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    let Some(resolved) = resolve(schema, root) else {
        return true;
    };
    let s = match resolved {
        Value::Bool(b) => return *b,
        Value::Object(s) => s,
        _ => return true,
    };
    let typed = match s.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t == "null"),
        Some(Value::Array(ts)) => Some(ts.iter().any(|t| t == "null")),
        Some(_) => Some(false),
    };
    let nullable = s.get("nullable") == Some(&Value::Bool(true));
    let enum_null = match s.get("enum") {
        Some(Value::Array(values)) => Some(values.contains(&Value::Null)),
        _ => None,
    };
    let const_null = s.get("const").map(Value::is_null);
    let any = |key: &str| match s.get(key) {
        Some(Value::Array(bs)) => Some(bs.iter().any(|b| accepts_null(b, root, depth + 1))),
        _ => None,
    };
    let union = any("anyOf").or_else(|| any("oneOf"));
    let all = match s.get("allOf") {
        Some(Value::Array(bs)) => bs.iter().all(|b| accepts_null(b, root, depth + 1)),
        _ => true,
    };
    // Every constraint present must let null through; a schema with none accepts anything.
    let type_ok = typed.unwrap_or(true) || nullable;
    let enum_ok = enum_null.unwrap_or(true);
    let const_ok = const_null.unwrap_or(true);
    let union_ok = union.unwrap_or(true);
    type_ok && enum_ok && const_ok && union_ok && all
}

/// Follows a local `$ref` (`#/$defs/x`, `#/definitions/x`, `#`) to its target in `root`; other schemas are
/// returned as they are. `None` for a reference that leads nowhere.
fn resolve<'v>(schema: &'v Value, root: &'v Value) -> Option<&'v Value> {
    let mut current = schema;
    // A chain of references (`a` → `b` → …) is followed a bounded number of times, so a cycle cannot hang.
    for _ in 0..MAX_DEPTH {
        let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
            return Some(current);
        };
        let pointer = reference.strip_prefix('#')?;
        current = root.pointer(pointer)?;
    }
    None
}

#[cfg(test)]
#[path = "strict_tests.rs"]
mod tests;
