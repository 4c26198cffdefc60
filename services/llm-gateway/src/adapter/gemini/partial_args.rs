//! Vertex AI's streamed function-call arguments (docs/providers.md §4 "Streamed arguments (Vertex)"), rebuilt into
//! one JSON object.
//!
//! With `streamFunctionCallArguments`, Vertex sends a call as several `functionCall` parts: the first names the
//! function and says `willContinue: true`, the following ones carry `partialArgs`, each a typed value
//! (`stringValue`, `numberValue`, `boolValue` or `nullValue`) at an RFC 9535 JSON path such as `$.location` or
//! `$.stops[1].city`, and an empty `functionCall` closes the call. A string may arrive in pieces: a fragment with
//! `willContinue: true` says more of the same path follows, and those pieces are concatenated.
//!
//! [`Arguments`] is the pure core: it applies fragments and refuses the shapes that cannot be rebuilt (a path set
//! twice, a path through a value of another type, an array index that skips an element, an unparsable path), so
//! the decoder turns them into a typed error instead of guessing.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Map, Value};

/// One `partialArgs` entry as Vertex writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PartialArg {
    #[serde(default)]
    pub json_path: Option<String>,
    #[serde(default)]
    pub string_value: Option<String>,
    #[serde(default)]
    pub number_value: Option<f64>,
    #[serde(default)]
    pub bool_value: Option<bool>,
    /// `"NULL_VALUE"` (protobuf's `NullValue` in JSON).
    #[serde(default)]
    pub null_value: Option<Value>,
    #[serde(default)]
    pub will_continue: Option<bool>,
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The arguments of one streamed call, as far as they have arrived.
#[derive(Debug, Default)]
pub(super) struct Arguments {
    root: Map<String, Value>,
    /// Paths whose string value the last fragment said would continue.
    continuing: HashSet<String>,
}

impl Arguments {
    /// Starts from the `args` object a call may carry next to its first fragments.
    pub(super) fn with_args(args: Option<Value>) -> Result<Self, String> {
        let root = match args {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err("function call arguments are not an object".into()),
        };
        Ok(Arguments {
            root,
            continuing: HashSet::new(),
        })
    }

    /// Applies one fragment.
    pub(super) fn apply(&mut self, arg: PartialArg) -> Result<(), String> {
        let path = arg
            .json_path
            .ok_or_else(|| "a partial argument without a jsonPath".to_string())?;
        let value = if let Some(s) = arg.string_value {
            Value::String(s)
        } else if let Some(n) = arg.number_value {
            number(n).ok_or_else(|| format!("{path}: not a finite number"))?
        } else if let Some(b) = arg.bool_value {
            Value::Bool(b)
        } else if arg.null_value.is_some() {
            Value::Null
        } else {
            // A fragment without a value adds nothing (and may only say the path continues).
            return Ok(());
        };
        let steps = parse_path(&path).ok_or_else(|| format!("unsupported jsonPath `{path}`"))?;
        let continues = arg.will_continue == Some(true);
        let appending = self.continuing.contains(&path);
        let misfit = || format!("jsonPath `{path}` does not fit the arguments received so far");
        let (last, inner) = steps.split_last().ok_or_else(misfit)?;
        let mut parent = walk(&mut self.root, inner, last).ok_or_else(misfit)?;
        let value = match (parent.get(last).ok_or_else(misfit)?, appending) {
            (None, false) => Some(value),
            (Some(Value::String(prefix)), true) => match value {
                Value::String(more) => {
                    prefix.push_str(&more);
                    None
                }
                _ => {
                    return Err(format!(
                        "{path}: a continued string went on with a non-string"
                    ));
                }
            },
            _ => return Err(format!("jsonPath `{path}` set twice")),
        };
        if let Some(value) = value {
            parent.set(last, value);
        }
        if continues {
            self.continuing.insert(path);
        } else {
            self.continuing.remove(&path);
        }
        Ok(())
    }

    /// The rebuilt arguments as JSON text.
    pub(super) fn finish(self) -> String {
        Value::Object(self.root).to_string()
    }
}

/// A protobuf double as JSON: integral values as integers (`50`, not `50.0`), as the model wrote them.
fn number(n: f64) -> Option<Value> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below it is exact in an f64.
    if !n.is_finite() {
        return None;
    }
    if n.fract() == 0.0 && n.abs() < EXACT {
        // In range and integral, so the conversion is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Some(Value::from(n as i64));
    }
    serde_json::Number::from_f64(n).map(Value::Number)
}

/// Parses `$`, `.name`, `['name']`, `["name"]` and `[n]` steps; `None` for anything else (filters, wildcards, …).
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let (name, tail) = after.split_at(end);
            if name.is_empty() {
                return None;
            }
            steps.push(Step::Key(name.to_string()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let (step, tail) = bracket(after)?;
            steps.push(step);
            rest = tail;
        } else {
            return None;
        }
    }
    (!steps.is_empty()).then_some(steps)
}

/// The inside of a `[…]` step and what follows its `]`.
fn bracket(s: &str) -> Option<(Step, &str)> {
    if let Some(quote) = s.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let body = &s[1..];
        let mut name = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => name.push(chars.next()?.1),
                c if c == quote => {
                    let tail = body[i + 1..].strip_prefix(']')?;
                    return Some((Step::Key(name), tail));
                }
                c => name.push(c),
            }
        }
        return None;
    }
    let end = s.find(']')?;
    let index = s[..end].parse().ok()?;
    Some((Step::Index(index), &s[end + 1..]))
}

/// The container `inner` leads to under `root` (the one `last` is a key or index of), creating the objects and
/// arrays on the way; `None` when the path runs through a value of another type or skips an array element.
fn walk<'a>(
    root: &'a mut Map<String, Value>,
    inner: &[Step],
    last: &Step,
) -> Option<Container<'a>> {
    let mut here = Container::Object(root);
    for (i, step) in inner.iter().enumerate() {
        let next = inner.get(i + 1).unwrap_or(last);
        let fresh = match next {
            Step::Index(_) => Value::Array(Vec::new()),
            Step::Key(_) => Value::Object(Map::new()),
        };
        here = match here.child(step, fresh)? {
            Value::Object(m) => Container::Object(m),
            Value::Array(a) => Container::Array(a),
            _ => return None,
        };
    }
    Some(here)
}

/// An object or array on the way to a leaf.
enum Container<'a> {
    Object(&'a mut Map<String, Value>),
    Array(&'a mut Vec<Value>),
}

impl<'a> Container<'a> {
    /// The child at `step`, inserting `fresh` when absent (arrays only grow by one, at their end).
    fn child(self, step: &Step, fresh: Value) -> Option<&'a mut Value> {
        match (self, step) {
            (Container::Object(m), Step::Key(k)) => Some(m.entry(k.clone()).or_insert(fresh)),
            (Container::Array(a), Step::Index(i)) => {
                if *i == a.len() {
                    a.push(fresh);
                }
                a.get_mut(*i)
            }
            _ => None,
        }
    }

    /// The value at `step`: `Some(None)` when it is not set yet (an array's next index included), `None` when the
    /// step does not fit this container (a key into an array, an index past the end).
    fn get(&mut self, step: &Step) -> Option<Option<&mut Value>> {
        match (self, step) {
            (Container::Object(m), Step::Key(k)) => Some(m.get_mut(k)),
            (Container::Array(a), Step::Index(i)) if *i <= a.len() => Some(a.get_mut(*i)),
            _ => None,
        }
    }

    /// Sets the unset value at `step` ([`get`](Self::get) said it fits).
    fn set(&mut self, step: &Step, value: Value) {
        match (self, step) {
            (Container::Object(m), Step::Key(k)) => {
                m.insert(k.clone(), value);
            }
            (Container::Array(a), Step::Index(_)) => a.push(value),
            _ => {}
        }
    }
}
