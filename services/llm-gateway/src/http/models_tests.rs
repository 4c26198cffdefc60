use super::*;
use crate::config::FileConfig;

#[test]
fn the_list_is_the_catalog_in_both_shapes() {
    let env = [
        ("GATEWAY_AUTH_TOKENS", "a-caller-token-of-length"),
        ("OPENAI_API_KEY", "sk-x"),
    ];
    let config = Config::from_file(FileConfig::default(), &env).unwrap();
    let v = list(&config);
    assert_eq!(v["object"], "list");
    let data = v["data"].as_array().unwrap();
    let chat = config
        .catalog
        .iter()
        .filter(|m| config.catalog.kind(&m.id) == crate::catalog::ModelKind::Chat)
        .count();
    assert_eq!(data.len(), chat);
    // Embedding models are served by their own endpoint, not offered for chat.
    assert!(
        config
            .catalog
            .get("openai/text-embedding-3-small")
            .is_some()
    );
    assert!(
        !data
            .iter()
            .any(|m| m["id"] == "openai/text-embedding-3-small")
    );
    let gpt = data.iter().find(|m| m["id"] == "openai/gpt-4o").unwrap();
    assert_eq!(
        (&gpt["owned_by"], &gpt["type"]),
        (&json!("openai"), &json!("model"))
    );
    assert_eq!(v["first_id"], data[0]["id"]);
}
