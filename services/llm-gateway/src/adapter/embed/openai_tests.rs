use super::*;
use crate::adapter::cloud::azure::{AzureApi, Surface};
use crate::catalog::ModelInfo;
use crate::protocol::Protocol;

fn batch<'a>(inputs: &'a [Input], dimensions: Option<u32>, user: Option<&'a str>) -> Batch<'a> {
    Batch {
        inputs,
        offset: 0,
        dimensions,
        user,
    }
}

fn texts(t: &[&str]) -> Vec<Input> {
    t.iter().map(|s| Input::Text((*s).into())).collect()
}

fn body_text(req: &EncodedRequest) -> &str {
    std::str::from_utf8(&req.body).unwrap()
}

#[test]
fn the_body_asks_for_base64_with_the_callers_options() {
    let model = ModelInfo::for_tests("text-embedding-3-small", Protocol::OpenaiChat);
    let inputs = texts(&["hello", "world"]);
    let req = OpenAi
        .build(
            &batch(&inputs, Some(256), Some("u-1")),
            &Target::new(&model),
        )
        .unwrap();
    assert_eq!(req.path, "/embeddings");
    assert!(req.headers.is_empty());
    assert_eq!(
        body_text(&req),
        r#"{"input":["hello","world"],"model":"text-embedding-3-small","encoding_format":"base64","dimensions":256,"user":"u-1"}"#
    );
    let plain = OpenAi
        .build(&batch(&inputs, None, None), &Target::new(&model))
        .unwrap();
    assert_eq!(
        body_text(&plain),
        r#"{"input":["hello","world"],"model":"text-embedding-3-small","encoding_format":"base64"}"#
    );
}

#[test]
fn token_ids_go_as_lists_and_may_not_be_mixed_with_text() {
    let model = ModelInfo::for_tests("text-embedding-3-small", Protocol::OpenaiChat);
    let inputs = vec![Input::Tokens(vec![15339, 1917]), Input::Tokens(vec![9906])];
    let req = OpenAi
        .build(&batch(&inputs, None, None), &Target::new(&model))
        .unwrap();
    assert!(body_text(&req).starts_with(r#"{"input":[[15339,1917],[9906]],"#));
    let mixed = vec![Input::Tokens(vec![1]), Input::Text("a".into())];
    let e = OpenAi
        .build(&batch(&mixed, None, None), &Target::new(&model))
        .unwrap_err();
    assert_eq!(e.field, "inputs[1]");
}

#[test]
fn azure_addresses_the_deployment_on_either_surface() {
    let model = ModelInfo::for_tests("emb-small", Protocol::AzureChat);
    let inputs = texts(&["hello"]);
    let v1 = Target::new(&model);
    let req = Azure.build(&batch(&inputs, None, None), &v1).unwrap();
    assert_eq!(req.path, "/v1/embeddings");
    assert!(body_text(&req).contains(r#""model":"emb-small""#));
    let api = AzureApi {
        surface: Surface::Deployments,
        api_version: Some("2024-10-21".into()),
    };
    let dated = Target {
        model: &model,
        azure: Some(&api),
    };
    let req = Azure.build(&batch(&inputs, None, None), &dated).unwrap();
    assert_eq!(
        req.path,
        "/deployments/emb-small/embeddings?api-version=2024-10-21"
    );
    let bad = ModelInfo::for_tests("../x", Protocol::AzureChat);
    let e = Azure
        .build(&batch(&inputs, None, None), &Target::new(&bad))
        .unwrap_err();
    assert_eq!(e.field, "model");
}

fn answer(body: &str) -> Answer {
    Answer {
        body: body.to_string().into(),
        ..Default::default()
    }
}

#[test]
fn base64_vectors_are_little_endian_f32s_put_in_input_order() {
    let one = crate::http::embeddings::base64_f32(&[1.0, -0.5]);
    let two = crate::http::embeddings::base64_f32(&[0.25, 2.0]);
    let body = format!(
        r#"{{"object":"list","data":[{{"object":"embedding","index":1,"embedding":"{two}"}},{{"object":"embedding","index":0,"embedding":"{one}"}}],"model":"text-embedding-3-small","usage":{{"prompt_tokens":5,"total_tokens":5}}}}"#
    );
    let v = OpenAi.decode(&answer(&body), 2).unwrap();
    assert_eq!(v.vectors, [vec![1.0, -0.5], vec![0.25, 2.0]]);
    assert_eq!(v.input_tokens, Some(5));
}

#[test]
fn a_server_that_answers_numbers_is_read_too() {
    let body = r#"{"data":[{"index":0,"embedding":[0.1,-0.2]}]}"#;
    let v = OpenAi.decode(&answer(body), 1).unwrap();
    assert_eq!(v.vectors, [vec![0.1f32, -0.2]]);
    assert_eq!(v.input_tokens, None);
}

#[test]
fn answers_with_the_wrong_vectors_are_provider_errors() {
    for (body, expected) in [
        (r#"{"data":[{"index":0,"embedding":[0.1]}]}"#, 2),
        (r#"{"data":[{"index":5,"embedding":[0.1]}]}"#, 1),
        (r#"{"data":[{"index":0,"embedding":"AAA"}]}"#, 1),
        (r#"{"data":[{"index":0,"embedding":"!!"}]}"#, 1),
        (r#"{"error":"nope"}"#, 1),
    ] {
        let e = OpenAi.decode(&answer(body), expected).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::ProviderError, "{body}");
    }
}
