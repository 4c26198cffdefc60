//! The protocol registry: which adapter speaks each wire protocol.

use super::cloud::{azure, vertex};
use super::{Adapter, Protocol, anthropic, bedrock, gemini, openai_chat, openai_responses};

impl Protocol {
    /// The adapter for this protocol.
    pub fn adapter(self) -> &'static dyn Adapter {
        match self {
            Protocol::OpenaiChat => &openai_chat::OpenAiChat,
            Protocol::OpenaiResponses => &openai_responses::OpenAiResponses,
            Protocol::Anthropic => &anthropic::Anthropic,
            Protocol::Gemini => &gemini::Gemini,
            Protocol::VertexGemini => &vertex::VertexGemini,
            Protocol::VertexAnthropic => &vertex::VertexAnthropic,
            Protocol::Bedrock => &bedrock::Bedrock,
            Protocol::AzureChat => &azure::AzureChat,
            Protocol::AzureResponses => &azure::AzureResponses,
        }
    }
}
