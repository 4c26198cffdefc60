use super::*;

#[test]
fn keepalive_keys_are_checked() {
    assert_eq!(
        Keepalive::from_millis(30_000, 20_000),
        Ok(Keepalive::DEFAULT)
    );
    assert_eq!(
        Keepalive::from_millis(10, 20_000).map_err(|e| e.0),
        Err("keepalive_interval_ms")
    );
    assert_eq!(
        Keepalive::from_millis(30_000, 0).map_err(|e| e.0),
        Err("keepalive_timeout_ms")
    );
}

#[test]
fn a_calls_receive_window_is_bounded_and_the_connections_at_least_a_mebibyte() {
    assert_eq!(ReceiveWindow::DEFAULT.stream_bytes(), 65_535);
    assert_eq!(ReceiveWindow::DEFAULT.connection_bytes(), 1024 * 1024);
    let big = ReceiveWindow::from_bytes(4 * 1024 * 1024).unwrap();
    assert_eq!(big.connection_bytes(), 4 * 1024 * 1024);
    assert_eq!(
        ReceiveWindow::from_bytes(65_535),
        Ok(ReceiveWindow::DEFAULT)
    );
    for bad in [0, 16 * 1024 - 1, 16 * 1024 * 1024 + 1, u32::MAX] {
        assert!(
            ReceiveWindow::from_bytes(bad)
                .unwrap_err()
                .starts_with(&bad.to_string())
        );
    }
}

#[test]
fn reflection_keeps_only_the_served_services_files_and_what_they_import() {
    use prost::Message;
    use prost_types::{FileDescriptorProto, FileDescriptorSet, ServiceDescriptorProto};
    let file = |name: &str, package: &str, service: &str, deps: &[&str]| FileDescriptorProto {
        name: Some(name.into()),
        package: Some(package.into()),
        dependency: deps.iter().map(|d| d.to_string()).collect(),
        service: vec![ServiceDescriptorProto {
            name: Some(service.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let set = FileDescriptorSet {
        file: vec![
            file("a.proto", "a", "Served", &["c.proto"]),
            file("b.proto", "b", "Other", &["c.proto"]),
            file("c.proto", "c", "Shared", &[]),
        ],
    }
    .encode_to_vec();
    let kept = served_files(&[&set], &["a.Served"]);
    let names: Vec<(&str, Vec<&str>)> = kept
        .file
        .iter()
        .map(|f| (f.name(), f.service.iter().map(|s| s.name()).collect()))
        .collect();
    assert_eq!(
        names,
        [("a.proto", vec!["Served"]), ("c.proto", vec![])],
        "b.proto left out; c.proto kept for its messages, without its service"
    );
    assert!(
        served_files(&[b"not a descriptor set"], &["a.Served"])
            .file
            .is_empty()
    );
}
