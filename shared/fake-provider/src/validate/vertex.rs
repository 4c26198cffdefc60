//! Vertex AI's rules: the publisher wire formats' own rules, plus what Vertex adds (the path shape, `alt=sse` on
//! the Gemini stream, and for Anthropic models `anthropic_version: "vertex-2023-10-16"` in the body and no
//! `model`, which is in the path).

use serde_json::Value;

use super::{Check, Fail, anthropic, gemini, string};

/// The `anthropic_version` Vertex requires for Anthropic models.
pub(crate) const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Whether `path` (without its query) is `/v1/projects/{p}/locations/{l}/publishers/{publisher}/models/{m}:{method}`.
pub(super) fn serves(path: &str, publisher: &str, method: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    match parts.as_slice() {
        [
            "",
            "v1",
            "projects",
            p,
            "locations",
            l,
            "publishers",
            pubr,
            "models",
            m,
        ] => {
            ok(p)
                && ok(l)
                && *pubr == publisher
                && m.split_once(':')
                    .is_some_and(|(name, verb)| !name.is_empty() && verb == method)
        }
        _ => false,
    }
}

/// Gemini on Vertex: a stream is asked for as SSE, then Gemini's rules.
pub(super) fn check_gemini(path: &str, model: &str, body: &Value) -> Check {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    if route.ends_with(":streamGenerateContent") && !query.split('&').any(|kv| kv == "alt=sse") {
        return Err(Fail::new(
            "fake-provider: a Vertex stream without alt=sse is a JSON array, not SSE",
        ));
    }
    // Vertex's v1 API has no `VALIDATED` mode.
    gemini::tool_config(body, &gemini::MODES[..3])?;
    gemini::check(model, body)
}

/// Anthropic on Vertex: the version in the body, no `model`, then Anthropic's rules.
pub(super) fn check_anthropic(body: &Value) -> Check {
    if body.get("model").is_some() {
        return Err(Fail::new("model: Extra inputs are not permitted"));
    }
    match string(body, "anthropic_version") {
        Some(ANTHROPIC_VERSION) => {}
        Some(_) => {
            return Err(Fail::new(format!(
                "anthropic_version: Input should be '{ANTHROPIC_VERSION}'"
            )));
        }
        None => return Err(Fail::new("anthropic_version: Field required")),
    }
    let mut rest = body.clone();
    if let Some(map) = rest.as_object_mut() {
        map.remove("anthropic_version");
    }
    anthropic::check(&rest)
}
