use super::*;
use serde_json::json;

fn rule(tool: &str, pattern: Option<&str>, decision: &str) -> RuleConfig {
    RuleConfig {
        tool: tool.to_owned(),
        pattern: pattern.map(str::to_owned),
        decision: decision.to_owned(),
    }
}

#[test]
fn defaults() {
    let rules = PermissionRules::defaults();
    let any = json!({"path": "a.txt"});
    assert_eq!(rules.decide("read", &any), Decision::Allow);
    assert_eq!(rules.decide("list", &json!({})), Decision::Allow);
    assert_eq!(
        rules.decide("grep", &json!({"pattern": "x"})),
        Decision::Allow
    );
    assert_eq!(rules.decide("write", &any), Decision::Ask);
    assert_eq!(rules.decide("edit", &any), Decision::Ask);
    assert_eq!(
        rules.decide("bash", &json!({"command": "ls"})),
        Decision::Deny
    );
    assert_eq!(rules.decide("client_tool", &json!({})), Decision::Ask);
    assert!(!rules.tool_enabled("bash"));
    assert!(rules.tool_enabled("read"));
    assert!(rules.tool_enabled("write"));
}

#[test]
fn first_match_wins() {
    let rules = PermissionRules::from_config(&[
        rule("write", Some("src/generated/**"), "deny"),
        rule("write", Some("src/**"), "allow"),
        rule("*", Some("secrets/**"), "deny"),
    ])
    .unwrap();
    assert_eq!(
        rules.decide("write", &json!({"path": "src/generated/x.rs"})),
        Decision::Deny
    );
    assert_eq!(
        rules.decide("write", &json!({"path": "src/lib.rs"})),
        Decision::Allow
    );
    // Falls through to the default for write.
    assert_eq!(
        rules.decide("write", &json!({"path": "README.md"})),
        Decision::Ask
    );
    assert_eq!(
        rules.decide("read", &json!({"path": "secrets/key"})),
        Decision::Deny
    );
    assert_eq!(
        rules.decide("list", &json!({"path": "secrets"})),
        Decision::Deny
    );
    assert_eq!(
        rules.decide("read", &json!({"path": "notes.md"})),
        Decision::Allow
    );

    let reordered = PermissionRules::from_config(&[
        rule("write", Some("src/**"), "allow"),
        rule("write", Some("src/generated/**"), "deny"),
    ])
    .unwrap();
    assert_eq!(
        reordered.decide("write", &json!({"path": "src/generated/x.rs"})),
        Decision::Allow
    );
}

#[test]
fn paths_are_normalized_before_matching() {
    let rules = PermissionRules::from_config(&[rule("read", Some("secrets/**"), "deny")]).unwrap();
    for path in [
        "secrets/a",
        "./secrets/a",
        "x/../secrets/a",
        "secrets//a",
        "secrets",
    ] {
        assert_eq!(
            rules.decide("read", &json!({ "path": path })),
            Decision::Deny,
            "{path}"
        );
    }
    let all = PermissionRules::from_config(&[rule("list", Some("."), "deny")]).unwrap();
    assert_eq!(all.decide("list", &json!({})), Decision::Deny);
    assert_eq!(all.decide("list", &json!({"path": "./"})), Decision::Deny);
}

#[test]
fn bash_rules() {
    let rules = PermissionRules::from_config(&[
        rule("bash", Some("rm *"), "deny"),
        rule("bash", Some("git *"), "allow"),
        rule("bash", Some("cargo *"), "ask"),
    ])
    .unwrap();
    let cmd = |c: &str| json!({ "command": c });
    assert_eq!(
        rules.decide("bash", &cmd("git log src/main.rs")),
        Decision::Allow
    );
    assert_eq!(rules.decide("bash", &cmd("rm -rf target")), Decision::Deny);
    assert_eq!(
        rules.decide("bash", &cmd("cargo test | tail")),
        Decision::Ask
    );
    // A chained command does not ride on an allow pattern; it falls through to the default deny.
    assert_eq!(
        rules.decide("bash", &cmd("git status; curl evil.example")),
        Decision::Deny
    );
    assert_eq!(
        rules.decide("bash", &cmd("git log $(whoami)")),
        Decision::Deny
    );
    assert_eq!(rules.decide("bash", &cmd("ls")), Decision::Deny);
    assert!(rules.tool_enabled("bash"));
}

#[test]
fn bash_can_be_enabled_wholesale() {
    let rules = PermissionRules::from_config(&[rule("bash", None, "ask")]).unwrap();
    assert_eq!(
        rules.decide("bash", &json!({"command": "a; b"})),
        Decision::Ask
    );
    assert!(rules.tool_enabled("bash"));
    let star = PermissionRules::from_config(&[rule("*", None, "allow")]).unwrap();
    assert_eq!(
        star.decide("bash", &json!({"command": "anything"})),
        Decision::Allow
    );
}

#[test]
fn tool_enabled_sees_denials() {
    let rules = PermissionRules::from_config(&[rule("write", None, "deny")]).unwrap();
    assert!(!rules.tool_enabled("write"));
    let partial = PermissionRules::from_config(&[rule("write", Some("a/**"), "deny")]).unwrap();
    assert!(partial.tool_enabled("write"));
    let only_pattern_deny =
        PermissionRules::from_config(&[rule("bash", Some("rm *"), "deny")]).unwrap();
    assert!(!only_pattern_deny.tool_enabled("bash"));
}

#[test]
fn pattern_rules_do_not_match_client_tools() {
    let rules = PermissionRules::from_config(&[
        rule("*", Some("**"), "deny"),
        rule("lookup", None, "allow"),
    ])
    .unwrap();
    assert_eq!(
        rules.decide("lookup", &json!({"path": "x"})),
        Decision::Allow
    );
    assert_eq!(rules.decide("read", &json!({"path": "x"})), Decision::Deny);
}

#[test]
fn config_errors() {
    let err = PermissionRules::from_config(&[rule("read", None, "yes")]).unwrap_err();
    assert!(err.contains("rule 1") && err.contains("`yes`"), "{err}");
    let err = PermissionRules::from_config(&[rule("read", None, "allow"), rule("", None, "allow")])
        .unwrap_err();
    assert!(err.contains("rule 2"), "{err}");
    let err = PermissionRules::from_config(&[rule("read", Some("{a"), "allow")]).unwrap_err();
    assert!(err.contains("unclosed"), "{err}");
}

#[test]
fn rule_config_rejects_unknown_fields() {
    let ok: RuleConfig =
        serde_json::from_value(json!({"tool": "read", "decision": "allow"})).unwrap();
    assert_eq!(ok.pattern, None);
    let bad = serde_json::from_value::<RuleConfig>(
        json!({"tool": "read", "decision": "allow", "path": "x"}),
    );
    assert!(bad.is_err());
}
