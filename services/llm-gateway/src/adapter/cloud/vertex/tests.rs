#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::catalog::ModelInfo;

fn model(name: &str, protocol: Protocol) -> ModelInfo {
    ModelInfo::for_tests(name, protocol)
}

fn generation(model: &str) -> pb::Generation {
    pb::Generation {
        model: model.into(),
        messages: vec![pb::Message {
            role: pb::Role::User.into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart {
                    text: "Say hello".into(),
                })),
            }],
        }],
        ..Default::default()
    }
}

#[test]
fn gemini_on_vertex_is_the_gemini_body_at_the_publisher_path_with_a_bearer_token() {
    let m = model("gemini-2.5-flash", Protocol::VertexGemini);
    let t = Target::new(&m);
    let g = generation("vertex/gemini-2.5-flash");
    let vertex = VertexGemini.build(&g, &t).unwrap();
    let plain = Gemini.build(&g, &t).unwrap();
    assert_eq!(
        vertex.path,
        "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(vertex.body, plain.body);
    assert_eq!(vertex.headers, plain.headers);
    assert_eq!(
        VertexGemini.auth_headers("ya29.t"),
        vec![("authorization", "Bearer ya29.t".to_string())]
    );
    assert!(VertexGemini.auth_headers("").is_empty());
}

#[test]
fn anthropic_on_vertex_moves_the_model_to_the_path_and_the_version_into_the_body() {
    let m = model("claude-sonnet-4-5@20250929", Protocol::VertexAnthropic);
    let t = Target::new(&m);
    let g = generation("vertex/claude-sonnet-4-5@20250929");
    let vertex = VertexAnthropic.build(&g, &t).unwrap();
    let plain = Anthropic.build(&g, &t).unwrap();
    assert_eq!(
        vertex.path,
        "/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    );
    assert!(vertex.headers.iter().all(|(n, _)| n != "anthropic-version"));
    let mut want = plain.body.clone();
    want.as_object_mut().unwrap().remove("model");
    want["anthropic_version"] = VERTEX_ANTHROPIC_VERSION.into();
    assert_eq!(vertex.body, want);
    assert_eq!(vertex.body.get("model"), None);
    assert_eq!(vertex.body["stream"], true);
}

#[test]
fn names_that_could_leave_the_model_path_are_refused_naming_the_field() {
    for name in ["../../secrets", "a/b", "m?x=1", "", ".hidden"] {
        for protocol in [Protocol::VertexGemini, Protocol::VertexAnthropic] {
            let m = model(name, protocol);
            let t = Target::new(&m);
            let err = protocol.adapter().build(&generation("vertex/x"), &t);
            let err = err.unwrap_err();
            assert_eq!(err.field, "generation.model", "{name}: {err}");
        }
    }
}

#[test]
fn a_strict_tool_that_needs_validated_mode_is_refused_on_vertex() {
    use crate::adapter::testing::testkit::{city_tool, tool_choice};
    use pb::tool_choice::Mode;
    let m = model("gemini-2.5-flash", Protocol::VertexGemini);
    let t = Target::new(&m);
    let mut g = generation("vertex/gemini-2.5-flash");
    g.tools = vec![city_tool("a", false), city_tool("b", true)];
    for mode in [Mode::Unspecified, Mode::Auto] {
        g.tool_choice = tool_choice(mode, "", false);
        let e = VertexGemini.build(&g, &t).unwrap_err();
        assert_eq!(e.field, "generation.tools[1].strict", "{mode:?}");
        assert!(e.message.contains("VALIDATED"), "{e}");
    }
    // A required tool is constrained by ANY, which Vertex has.
    g.tool_choice = tool_choice(Mode::Required, "", false);
    let b = VertexGemini.build(&g, &t).unwrap().body;
    assert_eq!(b["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
}
