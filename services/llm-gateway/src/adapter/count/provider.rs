//! The providers' token-counting endpoints: each request is the chat adapter's own request for the generation (every
//! fix it applies, so the count is of what a generation would send), narrowed to the fields the endpoint takes and
//! re-addressed. The narrowing is typed: the chat body is read into a struct of the counted fields, which drops the
//! rest (`max_tokens`, `stream`, sampling), and written out again.

use llm_proto::gateway as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::adapter::anthropic::Anthropic;
use crate::adapter::bedrock::Bedrock;
use crate::adapter::cloud::vertex::{VertexAnthropic, VertexGemini, path_name};
use crate::adapter::gemini::Gemini;
use crate::adapter::transport::Answer;
use crate::adapter::{Adapter, BuildError, EncodedRequest, HttpRequest, Target};
use crate::error::ProviderError;
use crate::protocol::Protocol;

/// One provider's counting endpoint: a pure request builder and answer decoder.
pub trait ProviderCounter: Send + Sync {
    /// The endpoint's name, for logs and spans.
    fn name(&self) -> &'static str;

    /// The counting request for `generation` on `target`.
    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<EncodedRequest, BuildError>;

    /// The input tokens of the answer.
    fn decode(&self, answer: &Answer) -> Result<u64, ProviderError>;
}

/// The counting endpoint of `protocol`, if it has one.
pub fn for_protocol(protocol: Protocol) -> Option<&'static dyn ProviderCounter> {
    match protocol {
        Protocol::Anthropic => Some(&AnthropicCount),
        Protocol::VertexAnthropic => Some(&VertexAnthropicCount),
        Protocol::Gemini => Some(&GeminiCount),
        Protocol::VertexGemini => Some(&VertexGeminiCount),
        Protocol::Bedrock => Some(&BedrockCount),
        Protocol::OpenaiChat
        | Protocol::OpenaiResponses
        | Protocol::AzureChat
        | Protocol::AzureResponses => None,
    }
}

/// `body`, the chat adapter's, as `T`: only `T`'s fields are kept.
fn narrow<T: for<'de> Deserialize<'de>>(body: Value) -> Result<T, BuildError> {
    serde_json::from_value(body).map_err(|e| {
        BuildError::new(
            "generation",
            format!("the counting request could not be made: {e}"),
        )
    })
}

/// The request with `body` serialised.
fn encoded<T: Serialize>(
    path: String,
    headers: Vec<(String, String)>,
    body: &T,
) -> Result<EncodedRequest, BuildError> {
    let body = serde_json::to_value(body).map_err(|e| {
        BuildError::new(
            "generation",
            format!("the counting request could not be made: {e}"),
        )
    })?;
    Ok(HttpRequest {
        path,
        headers,
        body,
    }
    .encode())
}

/// The counted fields of a Messages body (Anthropic's `count_tokens` takes no `max_tokens`, `stream` or sampling).
#[derive(Deserialize, Serialize)]
struct MessagesCount {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    anthropic_version: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<Value>,
    messages: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
}

#[derive(Deserialize)]
struct InputTokens {
    input_tokens: u64,
}

/// Anthropic's `POST /v1/messages/count_tokens`.
struct AnthropicCount;

impl ProviderCounter for AnthropicCount {
    fn name(&self) -> &'static str {
        "anthropic count_tokens"
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<EncodedRequest, BuildError> {
        let chat = Anthropic.build(generation, target)?;
        let body: MessagesCount = narrow(chat.body)?;
        encoded(
            format!("{}/count_tokens", crate::adapter::anthropic::MESSAGES_PATH),
            chat.headers,
            &body,
        )
    }

    fn decode(&self, answer: &Answer) -> Result<u64, ProviderError> {
        Ok(answer
            .json::<InputTokens>("Anthropic's count_tokens")?
            .input_tokens)
    }
}

/// Vertex AI's count for Anthropic models: one `count-tokens` model for all, the counted model named in the body
/// beside Vertex's `anthropic_version` (as Anthropic's Vertex SDK sends it).
struct VertexAnthropicCount;

impl ProviderCounter for VertexAnthropicCount {
    fn name(&self) -> &'static str {
        "vertex anthropic count-tokens"
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<EncodedRequest, BuildError> {
        let chat = VertexAnthropic.build(generation, target)?;
        let mut body: MessagesCount = narrow(chat.body)?;
        body.model = Some(Value::String(path_name(target, "Anthropic")?.to_string()));
        let path = "/publishers/anthropic/models/count-tokens:rawPredict".to_string();
        encoded(path, chat.headers, &body)
    }

    fn decode(&self, answer: &Answer) -> Result<u64, ProviderError> {
        Ok(answer
            .json::<InputTokens>("Vertex AI's count-tokens")?
            .input_tokens)
    }
}

/// The counted fields of a Gemini body.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct GeminiContent {
    contents: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation_config: Option<Value>,
}

/// The Gemini API's `countTokens` takes the whole `generateContentRequest`, its model named in it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GeminiCountBody {
    generate_content_request: GenerateContentRequest,
}

#[derive(Serialize)]
struct GenerateContentRequest {
    model: String,
    #[serde(flatten)]
    content: GeminiContent,
}

/// `totalTokens`, left out of Google's JSON when zero.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TotalTokens {
    #[serde(default)]
    total_tokens: u64,
}

/// The Gemini API's `POST /v1beta/models/{m}:countTokens`.
struct GeminiCount;

impl ProviderCounter for GeminiCount {
    fn name(&self) -> &'static str {
        "gemini countTokens"
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<EncodedRequest, BuildError> {
        let chat = Gemini.build(generation, target)?;
        let name = target.model.name.as_str();
        let body = GeminiCountBody {
            generate_content_request: GenerateContentRequest {
                model: format!("models/{name}"),
                content: narrow(chat.body)?,
            },
        };
        encoded(
            format!("/v1beta/models/{name}:countTokens"),
            chat.headers,
            &body,
        )
    }

    fn decode(&self, answer: &Answer) -> Result<u64, ProviderError> {
        Ok(answer
            .json::<TotalTokens>("the Gemini API's countTokens")?
            .total_tokens)
    }
}

/// Vertex AI's `POST …/publishers/google/models/{m}:countTokens`.
struct VertexGeminiCount;

impl ProviderCounter for VertexGeminiCount {
    fn name(&self) -> &'static str {
        "vertex gemini countTokens"
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<EncodedRequest, BuildError> {
        let chat = VertexGemini.build(generation, target)?;
        let name = path_name(target, "Gemini")?;
        // Vertex AI's `countTokens` takes the contents, system instruction, tools and generation config at its top
        // level, and no tool config.
        let mut body: GeminiContent = narrow(chat.body)?;
        body.tool_config = None;
        encoded(
            format!("/publishers/google/models/{name}:countTokens"),
            chat.headers,
            &body,
        )
    }

    fn decode(&self, answer: &Answer) -> Result<u64, ProviderError> {
        Ok(answer
            .json::<TotalTokens>("Vertex AI's countTokens")?
            .total_tokens)
    }
}

/// The counted fields of a Converse body (`ConverseTokensRequest`).
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConverseTokens {
    messages: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    additional_model_request_fields: Option<Value>,
}

#[derive(Serialize)]
struct BedrockCountBody {
    input: CountInput,
}

#[derive(Serialize)]
struct CountInput {
    converse: ConverseTokens,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BedrockTokens {
    input_tokens: u64,
}

/// Bedrock's `CountTokens`, `POST /model/{modelId}/count-tokens`, with the Converse input.
struct BedrockCount;

/// The geography prefixes of Bedrock's cross-region inference profiles (`us.anthropic.…`).
const PROFILE_PREFIXES: [&str; 8] = [
    "us.", "us-gov.", "eu.", "apac.", "ca.", "jp.", "au.", "global.",
];

/// The foundation model of a Bedrock id: `CountTokens` counts for a foundation model, and an inference profile's
/// id is its model's id behind a geography prefix.
pub fn foundation_model(id: &str) -> &str {
    PROFILE_PREFIXES
        .iter()
        .find_map(|p| id.strip_prefix(p))
        .unwrap_or(id)
}

impl ProviderCounter for BedrockCount {
    fn name(&self) -> &'static str {
        "bedrock CountTokens"
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<EncodedRequest, BuildError> {
        let chat = Bedrock.build(generation, target)?;
        let segment = crate::adapter::bedrock::model_segment(foundation_model(&target.model.name))?;
        let body = BedrockCountBody {
            input: CountInput {
                converse: narrow(chat.body)?,
            },
        };
        encoded(
            format!("/model/{segment}/count-tokens"),
            chat.headers,
            &body,
        )
    }

    fn decode(&self, answer: &Answer) -> Result<u64, ProviderError> {
        Ok(answer
            .json::<BedrockTokens>("Bedrock's CountTokens")?
            .input_tokens)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "provider_tests.rs"]
mod tests;
