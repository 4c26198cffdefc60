use super::*;

fn agents() -> BTreeSet<String> {
    ["default", "coder"].into_iter().map(String::from).collect()
}

fn file(tokens: &[&str], agents: Option<&[&str]>) -> TenantFile {
    TenantFile {
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        budget_usd: None,
        agents: agents.map(|a| a.iter().map(|s| s.to_string()).collect()),
        max_sessions: None,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn tokens_name_their_caller() {
    let files = BTreeMap::from([(
        "acme".to_string(),
        file(&["acme-token-0123456789"], Some(&["coder"])),
    )]);
    let a = Access::from_config(
        &strings(&["plain-token-0123456789"]),
        &strings(&["operator-token-0123456789"]),
        &files,
        &agents(),
        false,
    )
    .unwrap();
    let who = |t: &str| caller(&a.tokens, t).cloned();
    assert_eq!(
        who("acme-token-0123456789"),
        Some(Caller::Tenant("acme".into()))
    );
    assert_eq!(
        who("plain-token-0123456789"),
        Some(Caller::Tenant(String::new()))
    );
    assert_eq!(who("operator-token-0123456789"), Some(Caller::Operator));
    assert_eq!(who("acme-token-012345678"), None);
    assert_eq!(who(""), None);
    let acme = Caller::Tenant("acme".into());
    assert!(agent_allowed(&a.tenants, &acme, "coder"));
    assert!(!agent_allowed(&a.tenants, &acme, "default"));
    assert!(agent_allowed(
        &a.tenants,
        &Caller::Tenant(String::new()),
        "default"
    ));
    assert!(agent_allowed(&a.tenants, &Caller::Operator, "default"));
}

#[test]
fn callers_see_their_own_tenant_and_operators_every_one() {
    let acme = Caller::Tenant("acme".into());
    assert!(acme.sees("acme"));
    assert!(!acme.sees("evil"));
    assert!(!acme.sees(""));
    assert!(!Caller::Tenant(String::new()).sees("acme"));
    assert!(Caller::Operator.sees("acme") && Caller::Operator.sees(""));
    assert_eq!(Caller::Operator.owner(), "");
    assert_eq!(acme.owner(), "acme");
}

#[test]
fn tenant_names_are_safe_path_and_key_parts() {
    for ok in ["acme", "a", "Acme-2.prod_x", &"a".repeat(64)] {
        assert!(valid_tenant_name(ok), "{ok}");
    }
    for bad in [
        "",
        ".",
        "..",
        ".hidden",
        "-x",
        "a/b",
        "a{b}",
        "a b",
        "é",
        &"a".repeat(65),
    ] {
        assert!(!valid_tenant_name(bad), "{bad}");
    }
}

type Case = (
    Vec<String>,
    Vec<String>,
    BTreeMap<String, TenantFile>,
    &'static str,
);

#[test]
fn bad_access_names_the_key() {
    let none = BTreeMap::new();
    let cases: Vec<Case> = vec![
        (
            strings(&["short"]),
            vec![],
            none.clone(),
            "server.auth_tokens",
        ),
        (
            vec![],
            strings(&["short"]),
            none.clone(),
            "server.operator_tokens",
        ),
        (
            strings(&["same-token-0123456789"]),
            strings(&["same-token-0123456789"]),
            none.clone(),
            "server.operator_tokens",
        ),
        (
            vec![],
            strings(&["same-token-0123456789"]),
            BTreeMap::from([("a".into(), file(&["same-token-0123456789"], None))]),
            "tenants.a.tokens",
        ),
        (
            strings(&["plain-token-0123456789"]),
            vec![],
            BTreeMap::from([(
                "a".into(),
                file(&["acme-token-0123456789"], Some(&["nope"])),
            )]),
            "tenants.a.agents",
        ),
        (
            strings(&["plain-token-0123456789"]),
            vec![],
            BTreeMap::from([("..".into(), file(&["acme-token-0123456789"], None))]),
            "tenants...",
        ),
        (vec![], vec![], none.clone(), "server.auth_tokens"),
    ];
    for (unnamed, operators, files, key) in cases {
        let e = Access::from_config(&unnamed, &operators, &files, &agents(), false).unwrap_err();
        assert_eq!(e.key, key, "{e}");
    }
    assert!(
        Access::from_config(&[], &[], &none, &agents(), true)
            .unwrap()
            .tokens
            .is_empty()
    );
}
