use super::*;
use crate::config::FileConfig;

#[test]
fn the_list_is_the_catalog_in_both_shapes() {
    let env = [
        ("GATEWAY_AUTH_TOKENS", "a-caller-token-of-length"),
        ("OPENAI_API_KEY", "sk-x"),
    ];
    let config = Config::from_file(FileConfig::default(), &env).unwrap();
    let caller =
        crate::keys::caller::identify(Some(env[0].1), None, &[&config.keys], false).unwrap();
    let v = list(&config, &caller);
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

#[test]
fn a_limited_key_lists_only_its_models_and_aliases_of_them() {
    let env = [
        ("GATEWAY_KEY", "a-limited-caller-token-1"),
        ("OPENAI_API_KEY", "sk-x"),
    ];
    let file = Config::parse(
        "[keys.limited]\ntenant = \"acme\"\ntoken_env = \"GATEWAY_KEY\"\nmodels = [\"openai/gpt-4o\"]\n\
         [aliases]\nfast = \"openai/gpt-4o\"\n",
    )
    .unwrap();
    let config = Config::from_file(file, &env).unwrap();
    let caller =
        crate::keys::caller::identify(Some(env[0].1), None, &[&config.keys], false).unwrap();
    let v = list(&config, &caller);
    let mut ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["fast", "openai/gpt-4o"]);
}
