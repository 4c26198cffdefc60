//! A whole Chat Completions response (`object: "chat.completion"`), as a compatible server that ignores
//! `stream: true` answers, turned into the one stream chunk it is equivalent to, so the stream decoder, with every
//! quirk it tolerates, is the only reader of a Chat Completions answer.
//!
//! The completion differs from a chunk only in naming: each choice carries `message` where a chunk carries
//! `delta`, and its tool calls have no `index` (their position is it). Everything else (`id`, `model`,
//! `finish_reason`, `usage`, an `error` object, the reasoning fields compatible servers add to the message) has the
//! same name and shape in both.

use serde_json::Value;

/// The chunk equivalent to the completion `body`, or `body` unchanged when it is not a completion (an error object,
/// or JSON the decoder will report as malformed).
pub(super) fn as_chunk(body: &str) -> std::borrow::Cow<'_, str> {
    let Ok(Value::Object(mut completion)) = serde_json::from_str::<Value>(body) else {
        return body.into();
    };
    if completion.contains_key("error") {
        return body.into();
    }
    if let Some(Value::Array(choices)) = completion.get_mut("choices") {
        for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
            let Some(mut message) = choice.remove("message") else {
                continue;
            };
            if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                for (index, call) in calls.iter_mut().enumerate() {
                    if let Some(call) = call.as_object_mut() {
                        call.entry("index").or_insert(Value::from(index));
                    }
                }
            }
            choice.insert("delta".to_string(), message);
        }
    }
    completion.insert("object".to_string(), Value::from("chat.completion.chunk"));
    Value::Object(completion).to_string().into()
}
