//! Reading a front-door request body: JSON parsed strictly, and every mistake named by its path in the body.
//!
//! - An object that names a key twice is refused (`messages[0].role: this key appears twice in its object`):
//!   parsers disagree on which of the two wins, so a proxy or a policy that read the first `model` would let the
//!   gateway act on the last.
//! - Nesting deeper than serde_json's 128 levels is refused by the parser before it recurses further, so a body of
//!   a million `[` costs neither stack nor memory.
//! - Invalid UTF-8, numbers out of range (`1e309`) and trailing bytes are refused by the parser.
//! - A value of the wrong type or out of its type's range (`max_tokens: 18446744073709551616`) is refused naming its
//!   path (`max_tokens`), found by [`serde_path_to_error`] on the typed translation.

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde_json::{Map, Value};

use crate::http::errors::ApiError;

/// Parses `body` as one strict JSON value (module docs).
pub fn json(body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Strict>(body) {
        Ok(Strict(value)) => Ok(value),
        // Parsed a second time, tracking the path, only when it failed: the path costs an allocation per key.
        Err(e) => Err(located(body, e)),
    }
}

/// The error of `body`, named by the path where parsing stopped.
fn located(body: &[u8], e: serde_json::Error) -> ApiError {
    let mut de = serde_json::Deserializer::from_slice(body);
    let (path, e) = match serde_path_to_error::deserialize::<_, Strict>(&mut de) {
        Err(tracked) => (tracked.path().to_string(), tracked.into_inner()),
        // Trailing bytes after a whole value: only the full parse sees them.
        Ok(_) => (".".to_string(), e),
    };
    let field = join("body", &path);
    if e.is_data() {
        ApiError::invalid(&field, e)
    } else {
        ApiError::invalid(&field, format!("not valid JSON: {e}"))
    }
}

/// Deserializes `value`, part of the body at `field`, into `T`; a mistake is named by its full path.
pub fn parse<T: DeserializeOwned>(field: &str, value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ApiError::invalid(&join(field, &path), e.into_inner())
    })
}

/// `field` and the path below it (`.` when the value itself is at fault); the top level is named `body`. A path
/// that reaches a place the path reader could not name (`?`, inside a value that never parsed) is cut before it.
fn join(field: &str, path: &str) -> String {
    let path = match path.find('?') {
        Some(0) => ".",
        Some(at) => path[..at].trim_end_matches('.'),
        None => path,
    };
    match path {
        "." => field.to_string(),
        p if field == "body" => p.to_string(),
        p if p.starts_with('[') => format!("{field}{p}"),
        p => format!("{field}.{p}"),
    }
}

/// A JSON value read with duplicate keys refused.
struct Strict(Value);

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // The parser refuses numbers that are not finite, so this is never `Null` for a body.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        de::Deserialize::deserialize(d).map(|Strict(v)| v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                // Refused while reading the second value, so the error's path ends with the key.
                map.next_value_seed(Duplicate)?;
            }
            let Strict(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// The value of a key already seen: always an error.
struct Duplicate;

impl<'de> DeserializeSeed<'de> for Duplicate {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(de::Error::custom("this key appears twice in its object"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "body_tests.rs"]
mod tests;
