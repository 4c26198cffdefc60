//! The wire protocols the gateway speaks: a leaf type the catalog, the configuration and the adapters share
//! (each adapter is found with `Protocol::adapter`, defined beside the adapters).

/// Wire protocols the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// OpenAI Chat Completions and every OpenAI-compatible server.
    OpenaiChat,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `streamGenerateContent?alt=sse`.
    Gemini,
    /// Gemini models on Google Vertex AI (the Gemini wire, OAuth2 access tokens).
    VertexGemini,
    /// Anthropic models on Google Vertex AI (`streamRawPredict`, OAuth2 access tokens).
    VertexAnthropic,
    /// AWS Bedrock Converse (`/model/{modelId}/converse-stream`), SigV4-signed, eventstream-framed.
    Bedrock,
    /// OpenAI Chat Completions on Azure OpenAI (a deployment's `chat/completions`, `api-key` or Entra ID tokens).
    AzureChat,
    /// OpenAI Responses on Azure OpenAI.
    AzureResponses,
}

impl Protocol {
    /// Every protocol (the addressing rule's test checks the list is complete).
    pub const ALL: [Protocol; 9] = [
        Protocol::OpenaiChat,
        Protocol::OpenaiResponses,
        Protocol::Anthropic,
        Protocol::Gemini,
        Protocol::VertexGemini,
        Protocol::VertexAnthropic,
        Protocol::Bedrock,
        Protocol::AzureChat,
        Protocol::AzureResponses,
    ];

    /// The protocol's stable name, as used in config and `provider_options_json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenaiChat => "openai_chat",
            Protocol::OpenaiResponses => "openai_responses",
            Protocol::Anthropic => "anthropic",
            Protocol::Gemini => "gemini",
            Protocol::VertexGemini => "vertex_gemini",
            Protocol::VertexAnthropic => "vertex_anthropic",
            Protocol::Bedrock => "bedrock",
            Protocol::AzureChat => "azure_chat",
            Protocol::AzureResponses => "azure_responses",
        }
    }

    /// The protocol named `name` ([`as_str`](Protocol::as_str)), if any.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The publisher wire format this protocol carries: Vertex's protocols speak Gemini's and Anthropic's, Azure's
    /// OpenAI's. Replay metadata is labelled with it, so a signature made on Vertex (or encrypted reasoning made on
    /// Azure) is recognised by the Gemini, Anthropic or OpenAI request builder (still only for the model that made
    /// it).
    pub fn wire(self) -> Protocol {
        match self {
            Protocol::VertexGemini => Protocol::Gemini,
            Protocol::VertexAnthropic => Protocol::Anthropic,
            Protocol::AzureChat => Protocol::OpenaiChat,
            Protocol::AzureResponses => Protocol::OpenaiResponses,
            other => other,
        }
    }

    /// True for the protocols that authenticate with Google OAuth2 access tokens instead of an API key.
    pub fn uses_google_tokens(self) -> bool {
        matches!(self, Protocol::VertexGemini | Protocol::VertexAnthropic)
    }

    /// True for the Azure OpenAI protocols, whose providers take an `azure` table.
    pub fn is_azure(self) -> bool {
        matches!(self, Protocol::AzureChat | Protocol::AzureResponses)
    }
}
