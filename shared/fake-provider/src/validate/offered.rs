//! A model calls only the tools its request offered: a scripted reply that calls another is a broken script, and
//! answering with it would let a test pass on a conversation no provider could produce.

use serde_json::Value;

use super::{Protocol, array, string};
use crate::sse::split_events;

/// The tool names `body` (a request to `protocol`) offers.
fn offered(protocol: Protocol, body: &Value) -> Vec<String> {
    let tools = array(body, "tools");
    let names = tools.iter().flat_map(|t| match protocol {
        Protocol::OpenaiChat
        | Protocol::AzureChat
        | Protocol::MistralChat
        | Protocol::DeepseekChat => t
            .get("function")
            .and_then(|f| string(f, "name"))
            .into_iter()
            .collect::<Vec<_>>(),
        Protocol::Gemini | Protocol::VertexGemini => array(t, "functionDeclarations")
            .iter()
            .chain(array(t, "function_declarations"))
            .filter_map(|d| string(d, "name"))
            .collect(),
        Protocol::Bedrock => t
            .get("toolSpec")
            .and_then(|s| string(s, "name"))
            .into_iter()
            .collect(),
        _ => string(t, "name").into_iter().collect(),
    });
    let mut out: Vec<String> = names.map(String::from).collect();
    if protocol == Protocol::Bedrock {
        out.extend(
            array(object_or_null(body, "toolConfig"), "tools")
                .iter()
                .filter_map(|t| t.get("toolSpec").and_then(|s| string(s, "name")))
                .map(String::from),
        );
    }
    out
}

fn object_or_null<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&Value::Null)
}

/// The tool names the events of an SSE `reply` call, in `protocol`'s stream shapes.
fn called(protocol: Protocol, reply: &bytes::Bytes) -> Vec<String> {
    let mut out = Vec::new();
    for event in split_events(reply) {
        let text = String::from_utf8_lossy(&event);
        for data in text.lines().filter_map(|l| l.strip_prefix("data:")) {
            let Ok(v) = serde_json::from_str::<Value>(data.trim()) else {
                continue;
            };
            collect(protocol, &v, &mut out);
        }
    }
    out
}

fn collect(protocol: Protocol, v: &Value, out: &mut Vec<String>) {
    let mut push = |name: Option<&str>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            out.push(name.to_string());
        }
    };
    match protocol {
        Protocol::OpenaiChat
        | Protocol::AzureChat
        | Protocol::MistralChat
        | Protocol::DeepseekChat => {
            for choice in array(v, "choices") {
                let delta = object_or_null(choice, "delta");
                for call in array(delta, "tool_calls") {
                    push(call.get("function").and_then(|f| string(f, "name")));
                }
            }
        }
        Protocol::OpenaiResponses | Protocol::AzureResponses => {
            let item = object_or_null(v, "item");
            if string(item, "type") == Some("function_call") {
                push(string(item, "name"));
            }
        }
        Protocol::Anthropic | Protocol::VertexAnthropic => {
            let block = object_or_null(v, "content_block");
            if string(block, "type") == Some("tool_use") {
                push(string(block, "name"));
            }
        }
        Protocol::Gemini | Protocol::VertexGemini => {
            for candidate in array(v, "candidates") {
                for part in array(object_or_null(candidate, "content"), "parts") {
                    push(part.get("functionCall").and_then(|c| string(c, "name")));
                }
            }
        }
        _ => {}
    }
}

/// The first tool an SSE `reply` calls that the request `body` did not offer.
pub(crate) fn unoffered_call(
    protocol: Protocol,
    body: &Value,
    reply: &bytes::Bytes,
) -> Option<String> {
    let offered = offered(protocol, body);
    called(protocol, reply)
        .into_iter()
        .find(|name| !offered.contains(name))
}
