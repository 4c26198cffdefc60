use super::*;
use crate::config::Config;

const LIMITED: &str = "a-limited-caller-token-1";
const FULL: &str = "an-unlimited-token-00001";

fn gateway() -> Gateway {
    let env = [
        ("LIMITED", LIMITED),
        ("FULL", FULL),
        ("OPENAI_API_KEY", "sk-x"),
        ("ANTHROPIC_API_KEY", "sk-ant-x"),
    ];
    let file = Config::parse(
        "[keys.limited]\ntenant = \"acme\"\ntoken_env = \"LIMITED\"\nmodels = [\"openai/gpt-4o\"]\n\
         [keys.full]\ntenant = \"acme\"\ntoken_env = \"FULL\"\n\
         [aliases]\nfast = \"openai/gpt-4o\"\n",
    )
    .unwrap();
    Gateway::new(Config::from_file(file, &env).unwrap()).unwrap()
}

fn caller(g: &Gateway, token: &str) -> Caller {
    crate::keys::caller::identify(Some(token), None, &[&g.config().keys], false).unwrap()
}

#[test]
fn a_limited_key_reaches_its_models_and_aliases_only() {
    let g = gateway();
    let c = caller(&g, LIMITED);
    for ok in ["openai/gpt-4o", "fast", "gpt-4o"] {
        assert!(check(&g, &c, ok).is_ok(), "{ok}");
    }
    let refused = check(&g, &c, "anthropic/claude-haiku-4-5").unwrap_err();
    let StartError::UnknownModel {
        model,
        unconfigured,
        close,
        served,
    } = &refused
    else {
        panic!("{refused:?}");
    };
    assert_eq!(model, "anthropic/claude-haiku-4-5");
    assert!(close.is_empty() && unconfigured.is_none());
    assert_eq!(served, &(vec!["openai/gpt-4o".to_owned()], 1));
    // Refused exactly as a model nobody serves (NOT_FOUND), the message naming only the key's model.
    let status = crate::status::start_error_status(&refused);
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(
        !status.message().contains("claude-sonnet"),
        "{}",
        status.message()
    );
}

#[test]
fn an_unknown_models_suggestions_are_cut_to_the_keys_models() {
    let g = gateway();
    let limited = check(&g, &caller(&g, LIMITED), "anthropic/claude-haiku-4-6").unwrap_err();
    let message = crate::status::start_error_status(&limited)
        .message()
        .to_owned();
    // Only the name asked for and the key's own model: no close match, no sample of other models.
    assert!(!message.contains("claude-haiku-4-5"), "{message}");
    assert!(message.ends_with("served: openai/gpt-4o"), "{message}");
    // A key of every model keeps the full suggestions.
    let full = g.resolve("anthropic/claude-haiku-4-6").unwrap_err();
    let message = crate::status::start_error_status(&full)
        .message()
        .to_owned();
    assert!(message.contains("anthropic/claude-haiku-4-5"), "{message}");
    assert!(check(&g, &caller(&g, FULL), "anthropic/claude-haiku-4-5").is_ok());
}

#[test]
fn an_admitted_call_is_counted_under_its_tenant() {
    let g = gateway();
    let c = caller(&g, FULL);
    let span = tracing::Span::none();
    admit(&g, &c, "chat", ["openai/gpt-4o"], &span).unwrap();
    let limited = caller(&g, LIMITED);
    assert!(
        admit(
            &g,
            &limited,
            "chat",
            ["openai/gpt-4o", "anthropic/claude-haiku-4-5"],
            &span
        )
        .is_err()
    );
    let text = g.metrics().encode();
    let line = text
        .lines()
        .find(|l| l.starts_with("llm_gateway_tenant_calls_total{"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("tenant=\"acme\"") && line.ends_with(" 1"),
        "{line}"
    );
}

#[test]
fn why_a_model_is_not_served_is_told_only_of_the_keys_models() {
    // Gemini is in the catalog but not configured here: a key of every model learns what enables it, a limited
    // key whose list does not name it does not.
    let g = gateway();
    let full = check(&g, &caller(&g, FULL), "gemini/gemini-2.5-flash");
    let limited = check(&g, &caller(&g, LIMITED), "gemini/gemini-2.5-flash");
    let message = |r: Result<(), StartError>| {
        crate::status::start_error_status(&r.unwrap_err())
            .message()
            .to_owned()
    };
    assert!(g.resolve("gemini/gemini-2.5-flash").is_err());
    assert!(
        full.is_ok(),
        "a key of every model is not checked here; the core refuses it"
    );
    assert!(!message(limited).contains("GEMINI_API_KEY"));
    let core = g.resolve("gemini/gemini-2.5-flash").unwrap_err();
    let scrubbed = scrub(&caller(&g, LIMITED), core);
    let StartError::UnknownModel { unconfigured, .. } = scrubbed else {
        panic!("{scrubbed:?}");
    };
    assert!(unconfigured.is_none());
}
