use super::*;

fn set(addrs: &[&str]) -> BTreeMap<SocketAddr, usize> {
    addrs.iter().map(|a| (a.parse().unwrap(), 0)).collect()
}

#[test]
fn targets_parse_with_default_ports_and_lists() {
    let t = parse_targets("http://gw-headless:50051, https://gw.example").unwrap();
    assert_eq!(t[0].host, "gw-headless");
    assert_eq!(t[0].port, 50051);
    assert_eq!(t[1].port, 443);
    assert_eq!(Target::parse("http://[::1]:7").unwrap().host, "::1");
    assert!(parse_targets("").is_err());
    assert!(parse_targets("ftp://x").unwrap_err().contains("http(s)"));
}

#[test]
fn diff_adds_new_addresses_and_removes_gone_ones() {
    let known = set(&["10.0.0.1:1", "10.0.0.2:1"]);
    let resolved = set(&["10.0.0.2:1", "10.0.0.3:1"]);
    assert_eq!(
        diff(&known, &resolved),
        vec![
            Diff::Add("10.0.0.3:1".parse().unwrap(), 0),
            Diff::Remove("10.0.0.1:1".parse().unwrap()),
        ]
    );
    assert!(diff(&resolved, &resolved).is_empty());
}

#[test]
fn an_empty_resolution_keeps_the_known_addresses() {
    assert!(diff(&set(&["10.0.0.1:1"]), &BTreeMap::new()).is_empty());
}

#[tokio::test]
async fn localhost_resolves_to_a_loopback_address() {
    let r = resolve_all(&parse_targets("http://localhost:50051").unwrap()).await;
    assert!(!r.is_empty());
    assert!(r.keys().all(|a| a.ip().is_loopback() && a.port() == 50051));
}
