//! Chat Completions chunk wire types, borrowed from the frame where they can be. Every field is optional: compatible
//! servers omit, null out or add fields freely, and one odd field must not cost the whole stream.

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A JSON string, borrowed from the frame when it has no escapes.
#[derive(Debug)]
pub(super) struct Str<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// Tool-call arguments: a JSON string on the wire, but a few servers send the object itself; it is re-serialized
/// so the caller always gets JSON text.
#[derive(Debug)]
pub(super) struct Args<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Args<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON string or object")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Args(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Args(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Args(Cow::Owned(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Args(Cow::Owned(value.to_string())))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// `delta.content`: a string everywhere except Mistral, which may send a list of typed parts.
#[derive(Debug)]
pub(super) enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ContentPart<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of content parts")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(part) = seq.next_element::<ContentPart<'a>>()? {
                    parts.push(part);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// One Mistral content part: `{type:"text",text}` or `{type:"thinking",thinking:[{type:"text",text}]}`.
#[derive(Debug, Deserialize)]
pub(super) struct ContentPart<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) text: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) thinking: Option<Vec<ContentPart<'a>>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Chunk<'a> {
    #[serde(borrow)]
    pub(super) id: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) model: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) choices: Option<Vec<Choice<'a>>>,
    pub(super) usage: Option<WireUsage>,
    /// Only its presence matters; `classify` reads the frame itself.
    pub(super) error: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Choice<'a> {
    pub(super) index: Option<u64>,
    #[serde(borrow)]
    pub(super) delta: Option<Delta<'a>>,
    #[serde(borrow)]
    pub(super) finish_reason: Option<Str<'a>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(borrow)]
    pub(super) content: Option<Content<'a>>,
    /// DeepSeek, older vLLM.
    #[serde(borrow)]
    pub(super) reasoning_content: Option<Str<'a>>,
    /// Newer vLLM, OpenRouter.
    #[serde(borrow)]
    pub(super) reasoning: Option<Str<'a>>,
    /// OpenRouter: each merged into the block's replay metadata and read for its text.
    pub(super) reasoning_details: Option<Vec<Value>>,
    #[serde(borrow)]
    pub(super) refusal: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ToolCallDelta<'a> {
    pub(super) index: Option<u64>,
    #[serde(borrow)]
    pub(super) id: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) function: Option<FunctionDelta<'a>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionDelta<'a> {
    #[serde(borrow)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) arguments: Option<Args<'a>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireUsage {
    pub(super) prompt_tokens: Option<u64>,
    pub(super) completion_tokens: Option<u64>,
    pub(super) prompt_tokens_details: Option<PromptDetails>,
    pub(super) completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek.
    pub(super) prompt_cache_hit_tokens: Option<u64>,
    /// Compatible servers fronting Anthropic models.
    pub(super) cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct PromptDetails {
    pub(super) cached_tokens: Option<u64>,
    /// OpenRouter and other compatible servers.
    pub(super) cache_write_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CompletionDetails {
    pub(super) reasoning_tokens: Option<u64>,
}
