//! Google Vertex AI fakes for the end-to-end tests: a token server (the JWT bearer grant and the metadata server,
//! verifying signatures against the test service account) and a Vertex endpoint that validates every request and
//! accepts only the tokens that server issued.

use fake_provider::{FakeProvider, GoogleTokens, Protocol};

/// Path of a file in `shared/fake-provider/fixtures/vertex/` (the test service-account keys).
pub fn key_file(name: &str) -> String {
    format!(
        "{}/../shared/fake-provider/fixtures/vertex/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The fakes behind one Vertex provider.
pub struct GoogleFakes {
    /// The tokens issued, their lifetimes and the refusals.
    pub tokens: GoogleTokens,
    /// The token endpoint and metadata server.
    pub oauth: FakeProvider,
    /// The Vertex endpoint, for Gemini and Anthropic models.
    pub vertex: FakeProvider,
}

impl GoogleFakes {
    /// Starts both servers for the test account.
    pub async fn start() -> GoogleFakes {
        let tokens = GoogleTokens::test_account();
        let oauth = FakeProvider::start().await.expect("fake token server");
        oauth.set_fallback(tokens.endpoint());
        let vertex = FakeProvider::start().await.expect("fake vertex");
        vertex.require_google_token(&tokens);
        vertex.validate_requests(Protocol::VertexGemini);
        vertex.validate_requests(Protocol::VertexAnthropic);
        GoogleFakes {
            tokens,
            oauth,
            vertex,
        }
    }

    /// The `google` settings that sign with the key file `key` and exchange at the fake token endpoint.
    pub fn key_settings(&self, key: &str) -> String {
        format!(
            r#"credentials_file = "{}", token_uri = "{}/token""#,
            key_file(key),
            self.oauth.base_url()
        )
    }

    /// A `[providers.<id>]` table for these fakes in `location`, with `google` settings `settings`.
    pub fn provider(&self, id: &str, location: &str, settings: &str) -> String {
        format!(
            "[providers.{id}]\nprotocol = \"vertex_gemini\"\nbase_url = \"{}\"\ngoogle = {{ project = \"acme-llm-test\", location = \"{location}\", {settings} }}\n",
            self.vertex.base_url()
        )
    }
}
