use super::*;

#[test]
fn a_delivered_prompt_brings_its_inputs_and_newer_tools_win() {
    let tool = |name: &str, description: &str| pb::ClientTool {
        name: name.into(),
        description: description.into(),
        input_schema_json: "{}".into(),
    };
    let first = pb::PromptRequest {
        model: "openai/gpt-4o".into(),
        client_tools: vec![tool("a", "old"), tool("b", "kept")],
        system: "be brief".into(),
        ..Default::default()
    };
    let mut inputs = RunInputs::from_prompt(&first, Vec::new());
    assert_eq!(inputs.model, None, "a prompt's model lives on its message");
    assert!(
        !inputs.absorb(&pb::PromptRequest::default()),
        "an empty prompt changes nothing"
    );
    let queued = pb::PromptRequest {
        client_tools: vec![tool("a", "new"), tool("c", "added")],
        ..Default::default()
    };
    assert!(inputs.absorb(&queued));
    let names: Vec<(&str, &str)> = inputs
        .client_tools
        .iter()
        .map(|t| (t.name.as_str(), t.description.as_str()))
        .collect();
    assert_eq!(names, [("b", "kept"), ("a", "new"), ("c", "added")]);
    assert_eq!(inputs.system, "be brief");
    let stored = inputs.stored();
    let mut resumed = RunInputs::default();
    assert!(resumed.absorb(&stored));
    assert_eq!(resumed.client_tools, inputs.client_tools);
    assert_eq!(resumed.system, inputs.system);
}
