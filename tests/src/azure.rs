//! Azure OpenAI fakes for the end-to-end tests: a Microsoft Entra ID token endpoint for the test application, and
//! an Azure OpenAI resource that checks every request as the real one does (the key or an Entra token, the route
//! and its `api-version`, the deployment, OpenAI's body rules for the deployment's model).

use fake_provider::azure::{TEST_API_KEY, TEST_CLIENT_ID};
use fake_provider::{AzureResource, EntraTokens, FakeProvider};

/// The harness variable holding the resource's key ([`fake_provider::azure::TEST_API_KEY`]).
pub const AZURE_KEY_ENV: &str = "E2E_AZURE_KEY";
/// The harness variable holding the application's client secret ([`fake_provider::azure::TEST_CLIENT_SECRET`]).
pub const ENTRA_SECRET_ENV: &str = "E2E_ENTRA_SECRET";
/// The deployments of the test resource and the models they run.
pub const DEPLOYMENTS: [(&str, &str); 4] = [
    ("prod-4o", "gpt-4o"),
    ("prod-41", "gpt-4.1"),
    ("reasoner", "o4-mini"),
    ("codex", "gpt-5-codex"),
];

/// The fakes behind the Azure providers of a test.
pub struct AzureFakes {
    /// The tokens issued to the test application, their lifetimes and the refusals.
    pub entra: EntraTokens,
    /// The token endpoint (Entra's `login.microsoftonline.com`).
    pub login: FakeProvider,
    /// The resource's deployments and credentials.
    pub resource: AzureResource,
    /// The resource's endpoint.
    pub azure: FakeProvider,
}

impl AzureFakes {
    /// Starts both servers: the resource has the [`DEPLOYMENTS`], the test key, and accepts the tokens `entra`
    /// issues.
    pub async fn start() -> AzureFakes {
        let entra = EntraTokens::test_app();
        let login = FakeProvider::start().await.expect("fake Entra ID");
        login.set_fallback(entra.endpoint());
        let resource = AzureResource::new(TEST_API_KEY, Some(&entra));
        for (deployment, model) in DEPLOYMENTS {
            resource.deploy(deployment, model);
        }
        let azure = FakeProvider::start().await.expect("fake Azure OpenAI");
        azure.serve_azure(&resource);
        AzureFakes {
            entra,
            login,
            resource,
            azure,
        }
    }

    /// `deployments = { … }` of the config for `list` (deployment, model).
    fn deployments(list: &[(&str, &str)]) -> String {
        let pairs: Vec<String> = list
            .iter()
            .map(|(d, m)| format!("\"{d}\" = \"{m}\""))
            .collect();
        format!("deployments = {{ {} }}", pairs.join(", "))
    }

    /// A `[providers.<id>]` for the resource, authenticated with its key, with `api` settings (`api = "…",
    /// api_version = "…"`) and the [`DEPLOYMENTS`].
    pub fn key_provider(&self, id: &str, protocol: &str, api: &str) -> String {
        format!(
            "[providers.{id}]\nprotocol = \"{protocol}\"\nbase_url = \"{}\"\napi_key_env = \"{AZURE_KEY_ENV}\"\nazure = {{ {api}, {} }}\n",
            self.azure.base_url(),
            Self::deployments(&DEPLOYMENTS)
        )
    }

    /// The `entra` settings of the test application at the fake token endpoint, with `extra` settings appended
    /// (`, token_refresh_margin_ms = …`).
    pub fn entra_settings(&self, extra: &str) -> String {
        format!(
            "entra = {{ tenant_id = \"{}\", client_id = \"{TEST_CLIENT_ID}\", client_secret_env = \"{ENTRA_SECRET_ENV}\", authority_host = \"{}\"{extra} }}",
            self.entra.tenant(),
            self.login.base_url()
        )
    }

    /// A `[providers.<id>]` for the resource, authenticated with Entra ID tokens (`entra` from
    /// [`entra_settings`](Self::entra_settings)), with `api` settings and the [`DEPLOYMENTS`].
    pub fn entra_provider(&self, id: &str, protocol: &str, api: &str, entra: &str) -> String {
        format!(
            "[providers.{id}]\nprotocol = \"{protocol}\"\nbase_url = \"{}\"\nazure = {{ {api}, {}, {entra} }}\n",
            self.azure.base_url(),
            Self::deployments(&DEPLOYMENTS)
        )
    }
}
