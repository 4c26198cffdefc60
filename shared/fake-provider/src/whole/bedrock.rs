//! Bedrock's whole answer: the `converse` response a `converse-stream` eventstream amounts to.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Answer, Broken};

/// One decoded eventstream message: `:message-type` `event` (named by `:event-type`) or `exception` (named by
/// `:exception-type`), and its JSON payload.
struct Message {
    exception: bool,
    name: String,
    payload: Value,
}

/// The messages of an eventstream body. Checksums are not verified: the body is the fake's own script.
fn messages(mut body: &[u8]) -> Result<Vec<Message>, Broken> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let word = |b: &[u8], at: usize| -> Option<usize> {
            let bytes = b.get(at..at + 4)?;
            Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
        };
        let (Some(total), Some(headers_len)) = (word(body, 0), word(body, 4)) else {
            return Err("an eventstream message cut short".into());
        };
        if total < 16 + headers_len || body.len() < total {
            return Err("an eventstream message cut short".into());
        }
        let headers = parse_headers(&body[12..12 + headers_len])?;
        let payload = &body[12 + headers_len..total - 4];
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let exception = get(":message-type").as_deref() == Some("exception");
        let name = get(if exception {
            ":exception-type"
        } else {
            ":event-type"
        })
        .unwrap_or_default();
        let payload = serde_json::from_slice(payload).unwrap_or(Value::Null);
        out.push(Message {
            exception,
            name,
            payload,
        });
        body = &body[total..];
    }
    Ok(out)
}

/// The string headers of one message (other value types skipped by their sizes).
fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, String)>, Broken> {
    let short = || Broken::from("an eventstream header cut short");
    let mut out = Vec::new();
    while let Some((&len, rest)) = b.split_first() {
        let name = rest.get(..usize::from(len)).ok_or_else(short)?;
        let rest = &rest[usize::from(len)..];
        let (&kind, rest) = rest.split_first().ok_or_else(short)?;
        let sized = |n: usize| rest.get(n..).ok_or_else(short);
        let (value, after) = match kind {
            0 | 1 => (None, rest),
            2 => (None, sized(1)?),
            3 => (None, sized(2)?),
            4 => (None, sized(4)?),
            5 | 8 => (None, sized(8)?),
            9 => (None, sized(16)?),
            6 | 7 => {
                let n = rest.get(..2).ok_or_else(short)?;
                let n = usize::from(u16::from_be_bytes([n[0], n[1]]));
                let value = rest.get(2..2 + n).ok_or_else(short)?;
                (Some(value), &rest[2 + n..])
            }
            _ => return Err(format!("an eventstream header of unknown type {kind}")),
        };
        if let (Some(value), 7) = (value, kind) {
            out.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        }
        b = after;
    }
    Ok(out)
}

/// One content block being put together from its deltas.
enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        input: String,
    },
    Reasoning {
        text: String,
        signature: Option<String>,
        redacted: Option<String>,
    },
}

impl Block {
    fn add(&mut self, delta: &Value) {
        let s = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
        match self {
            Block::Text(text) => text.push_str(&s(delta, "text").unwrap_or_default()),
            Block::Tool { input, .. } => {
                if let Some(tool) = delta.get("toolUse") {
                    input.push_str(&s(tool, "input").unwrap_or_default());
                }
            }
            Block::Reasoning {
                text,
                signature,
                redacted,
            } => {
                let r = delta.get("reasoningContent").unwrap_or(&Value::Null);
                text.push_str(&s(r, "text").unwrap_or_default());
                if let Some(sig) = s(r, "signature") {
                    signature.get_or_insert_with(String::new).push_str(&sig);
                }
                if let Some(data) = s(r, "redactedContent") {
                    *redacted = Some(data);
                }
            }
        }
    }

    fn from_delta(delta: &Value) -> Block {
        if delta.get("reasoningContent").is_some() {
            Block::Reasoning {
                text: String::new(),
                signature: None,
                redacted: None,
            }
        } else {
            Block::Text(String::new())
        }
    }

    fn whole(self) -> Result<Value, Broken> {
        Ok(match self {
            Block::Text(text) => json!({ "text": text }),
            Block::Tool { id, name, input } => {
                let input: Value = if input.is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&input)
                        .map_err(|e| format!("a tool input that is not JSON ({e}): {input}"))?
                };
                json!({"toolUse": {"toolUseId": id, "name": name, "input": input}})
            }
            Block::Reasoning {
                redacted: Some(data),
                ..
            } => json!({"reasoningContent": {"redactedContent": data}}),
            Block::Reasoning {
                text, signature, ..
            } => {
                let mut reasoning = json!({ "text": text });
                if let Some(signature) = signature {
                    reasoning["signature"] = Value::String(signature);
                }
                json!({"reasoningContent": {"reasoningText": reasoning}})
            }
        })
    }
}

/// The HTTP status of a Bedrock exception, by its stream name.
fn status_of(exception: &str) -> u16 {
    match exception {
        "validationException" => 400,
        "accessDeniedException" => 403,
        "resourceNotFoundException" => 404,
        "modelTimeoutException" => 408,
        "modelStreamErrorException" | "modelErrorException" => 424,
        "throttlingException" => 429,
        "serviceUnavailableException" => 503,
        _ => 500,
    }
}

/// An exception as the HTTP error Bedrock answers `converse` with: its status, `message`, and error type header.
fn exception(m: &Message) -> Answer {
    let mut kind = m.name.clone();
    if let Some(first) = kind.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    let message = m.payload.get("message").cloned().unwrap_or(Value::Null);
    Answer {
        status: status_of(&m.name),
        body: json!({ "message": message }).to_string(),
        error_type: Some(format!(
            "{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        )),
    }
}

/// The `converse` response: the message's blocks in order, `messageStop`'s reason, `metadata`'s usage and metrics;
/// an exception is that error, with its status and type.
pub(super) fn converse(body: &[u8]) -> Result<Answer, Broken> {
    let mut role = Value::String("assistant".into());
    let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
    let mut stop: Option<Value> = None;
    let mut extra: Option<Value> = None;
    let mut metadata: Option<Value> = None;
    for m in messages(body)? {
        if m.exception {
            return Ok(exception(&m));
        }
        let p = &m.payload;
        let index = p
            .get("contentBlockIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match m.name.as_str() {
            "messageStart" => role = p.get("role").cloned().unwrap_or(role),
            "contentBlockStart" => {
                if let Some(tool) = p.pointer("/start/toolUse") {
                    let s = |key: &str| {
                        tool.get(key)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    };
                    blocks.insert(
                        index,
                        Block::Tool {
                            id: s("toolUseId"),
                            name: s("name"),
                            input: String::new(),
                        },
                    );
                }
            }
            "contentBlockDelta" => {
                let delta = p.get("delta").unwrap_or(&Value::Null);
                blocks
                    .entry(index)
                    .or_insert_with(|| Block::from_delta(delta))
                    .add(delta);
            }
            "messageStop" => {
                stop = p.get("stopReason").cloned();
                extra = p.get("additionalModelResponseFields").cloned();
            }
            "metadata" => metadata = Some(p.clone()),
            _ => {}
        }
    }
    let Some(stop) = stop else {
        return Err("the stream ends before messageStop".into());
    };
    let content = blocks
        .into_values()
        .map(Block::whole)
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = json!({
        "output": {"message": {"role": role, "content": content}},
        "stopReason": stop,
    });
    if let Some(extra) = extra {
        out["additionalModelResponseFields"] = extra;
    }
    let meta = metadata.unwrap_or(Value::Null);
    for key in ["usage", "metrics"] {
        if let Some(v) = meta.get(key) {
            out[key] = v.clone();
        }
    }
    Ok(Answer::ok(&out))
}
