//! Embeddings request rules, as each API documents them: OpenAI's (and Azure OpenAI's) `/embeddings`, the Gemini
//! API's `batchEmbedContents`, Vertex AI's `predict`, and Bedrock's `InvokeModel` bodies of Titan Text Embeddings
//! and Cohere Embed. Every API refuses a field it does not know, an empty input and more inputs than it takes.

use serde_json::{Map, Value};

use super::{Check, Fail, array, string};

/// OpenAI's limit on inputs per request.
pub const OPENAI_MAX_INPUTS: usize = 2048;
/// The Gemini API's limit on requests per `batchEmbedContents`.
pub const GEMINI_MAX_REQUESTS: usize = 100;
/// Vertex AI's limit on instances per `predict` of a text embedding model.
pub const VERTEX_MAX_INSTANCES: usize = 250;
/// Cohere's limit on texts per request.
pub const COHERE_MAX_TEXTS: usize = 96;

/// The body as an object whose keys are all in `known`; the first other key is refused by `unknown`.
fn fields<'a>(
    body: &'a Value,
    known: &[&str],
    unknown: impl Fn(&str) -> Fail,
) -> Result<&'a Map<String, Value>, Fail> {
    let obj = body
        .as_object()
        .ok_or_else(|| Fail::new("the body must be a JSON object"))?;
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(unknown(k)),
        None => Ok(obj),
    }
}

/// OpenAI's `POST /v1/embeddings` (and Azure OpenAI's, whose `model` is the deployment).
pub(super) fn openai(body: &Value) -> Check {
    let known = ["input", "model", "encoding_format", "dimensions", "user"];
    fields(body, &known, |k| {
        Fail::new(format!("Unrecognized request argument supplied: {k}"))
    })?;
    if string(body, "model").is_none_or(str::is_empty) {
        return Err(Fail::new("you must provide a model parameter").param("model"));
    }
    let invalid = || {
        Fail::new("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.").param("input")
    };
    let count = match body.get("input") {
        Some(Value::String(s)) if !s.is_empty() => 1,
        Some(Value::Array(items)) if !items.is_empty() => {
            // All strings, all token ids, or all lists of token ids: one shape for the whole array.
            let ok = match &items[0] {
                Value::String(_) => items
                    .iter()
                    .all(|i| i.as_str().is_some_and(|s| !s.is_empty())),
                Value::Number(_) => items.iter().all(|n| n.as_u64().is_some()),
                Value::Array(_) => items.iter().all(|i| {
                    i.as_array().is_some_and(|ids| {
                        !ids.is_empty() && ids.iter().all(|n| n.as_u64().is_some())
                    })
                }),
                _ => false,
            };
            if !ok {
                return Err(invalid());
            }
            items.len()
        }
        _ => return Err(invalid()),
    };
    if count > OPENAI_MAX_INPUTS {
        return Err(Fail::new(format!(
            "Too many inputs. The max number of inputs is {OPENAI_MAX_INPUTS}."
        ))
        .param("input"));
    }
    match string(body, "encoding_format") {
        None | Some("float" | "base64")
            if body.get("encoding_format").is_none_or(Value::is_string) => {}
        _ => {
            return Err(Fail::new(
                "Invalid value for 'encoding_format': must be 'float' or 'base64'.",
            )
            .param("encoding_format"));
        }
    }
    if let Some(d) = body.get("dimensions") {
        if d.as_u64().is_none_or(|d| d < 1) {
            return Err(Fail::new("Invalid value for 'dimensions'.").param("dimensions"));
        }
        if string(body, "model").is_some_and(|m| m.contains("ada-002")) {
            return Err(
                Fail::new("This model does not support specifying dimensions.").param("dimensions"),
            );
        }
    }
    Ok(())
}

/// The Gemini API's `POST /v1beta/models/{m}:batchEmbedContents`: one `EmbedContentRequest` per input, each naming
/// the model of the path.
pub(super) fn gemini(model: &str, body: &Value) -> Check {
    fields(body, &["requests"], |k| unknown_google(k, ""))?;
    let requests = array(body, "requests");
    if requests.is_empty() {
        return Err(Fail::new(
            "* BatchEmbedContentsRequest.requests: requests is not specified\n",
        ));
    }
    if requests.len() > GEMINI_MAX_REQUESTS {
        return Err(Fail::new(format!(
            "* BatchEmbedContentsRequest.requests: at most {GEMINI_MAX_REQUESTS} requests can be in one batch\n"
        )));
    }
    let known = [
        "model",
        "content",
        "taskType",
        "title",
        "outputDimensionality",
    ];
    for (i, r) in requests.iter().enumerate() {
        let at = format!("requests[{i}]");
        fields(r, &known, |k| unknown_google(k, &at))?;
        if string(r, "model") != Some(&format!("models/{model}")) {
            return Err(Fail::new(format!(
                "Model `{}` in {at} does not match the model of the batch request `models/{model}`.",
                string(r, "model").unwrap_or("")
            )));
        }
        let text = r
            .pointer("/content/parts/0/text")
            .and_then(Value::as_str)
            .unwrap_or("");
        if text.is_empty() {
            return Err(Fail::new(format!(
                "* {at}.content: contents must not be empty\n"
            )));
        }
        positive(r, "outputDimensionality")?;
    }
    Ok(())
}

/// Vertex AI's `POST …/publishers/google/models/{m}:predict` for a text embedding model.
pub(super) fn vertex(model: &str, body: &Value) -> Check {
    fields(body, &["instances", "parameters"], |k| {
        unknown_google(k, "")
    })?;
    let instances = array(body, "instances");
    let most = if model == "gemini-embedding-001" {
        1
    } else {
        VERTEX_MAX_INSTANCES
    };
    if instances.is_empty() || instances.len() > most {
        return Err(Fail::new(format!(
            "The number of instances ({}) must be between 1 and {most} for model {model}.",
            instances.len()
        )));
    }
    for (i, inst) in instances.iter().enumerate() {
        let at = format!("instances[{i}]");
        fields(inst, &["content", "task_type", "title"], |k| {
            unknown_google(k, &at)
        })?;
        if string(inst, "content").is_none_or(str::is_empty) {
            return Err(Fail::new(format!(
                "{at}.content: the content must not be empty"
            )));
        }
    }
    if let Some(p) = body.get("parameters") {
        fields(p, &["autoTruncate", "outputDimensionality"], |k| {
            unknown_google(k, "parameters")
        })?;
        positive(p, "outputDimensionality")?;
    }
    Ok(())
}

fn unknown_google(k: &str, at: &str) -> Fail {
    Fail::new(format!(
        "Invalid JSON payload received. Unknown name \"{k}\" at '{at}': Cannot find field."
    ))
}

fn positive(v: &Value, key: &str) -> Check {
    match v.get(key) {
        Some(n) if n.as_u64().is_none_or(|n| n < 1) => {
            Err(Fail::new(format!("{key} must be a positive integer")))
        }
        _ => Ok(()),
    }
}

/// A Bedrock `InvokeModel` body of an embedding model, by its family; Bedrock's wording for a body the model's
/// schema refuses.
pub(super) fn bedrock(model: &str, body: &Value) -> Check {
    let malformed = |what: String| {
        Fail::new(format!(
            "Malformed input request: {what}, please reformat your input and try again."
        ))
        .code("ValidationException")
    };
    let extraneous = |k: &str| malformed(format!("#: extraneous key [{k}] is not permitted"));
    if model.contains("amazon.titan-embed-text") {
        let known = ["inputText", "dimensions", "normalize", "embeddingTypes"];
        fields(body, &known, extraneous)?;
        if string(body, "inputText").is_none_or(str::is_empty) {
            return Err(malformed("#/inputText: expected minLength: 1".into()));
        }
        match body.get("dimensions").map(Value::as_u64) {
            None => Ok(()),
            Some(Some(256 | 512 | 1024)) if model.contains("-v2") => Ok(()),
            Some(_) => Err(malformed("#/dimensions: 256, 512 or 1024 (v2 only)".into())),
        }
    } else if model.contains("cohere.embed") {
        let known = [
            "texts",
            "images",
            "input_type",
            "truncate",
            "embedding_types",
            "output_dimension",
        ];
        fields(body, &known, extraneous)?;
        let texts = array(body, "texts");
        if texts.is_empty() || texts.len() > COHERE_MAX_TEXTS {
            return Err(malformed(format!(
                "#/texts: expected 1 to {COHERE_MAX_TEXTS} texts"
            )));
        }
        if !matches!(
            string(body, "input_type"),
            Some("search_document" | "search_query" | "classification" | "clustering")
        ) {
            return Err(malformed("#/input_type: required, one of search_document, search_query, classification, clustering".into()));
        }
        if body.get("output_dimension").is_some() && !model.contains("embed-v4") {
            return Err(extraneous("output_dimension"));
        }
        Ok(())
    } else {
        Err(Fail::new("The provided model identifier is invalid.").code("ValidationException"))
    }
}
