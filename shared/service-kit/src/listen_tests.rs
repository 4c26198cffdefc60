#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn the_environment_comes_before_the_file_and_neither_means_off() {
    let env = [("X_LISTEN", "127.0.0.1:9")];
    assert_eq!(
        address(&env, "X_LISTEN", "server.listen", Some("127.0.0.1:8")).unwrap(),
        Some("127.0.0.1:9".parse().unwrap())
    );
    assert_eq!(
        address(
            &[("X_LISTEN", "")],
            "X_LISTEN",
            "server.listen",
            Some("[::1]:8")
        )
        .unwrap(),
        Some("[::1]:8".parse().unwrap())
    );
    assert_eq!(
        address(&[("X_LISTEN", "")], "X_LISTEN", "server.listen", None).unwrap(),
        None
    );
}

#[test]
fn a_bad_address_names_its_key_and_value() {
    let e = address(
        &[("X", "")],
        "X",
        "server.metrics_listen",
        Some("localhost"),
    )
    .unwrap_err();
    assert_eq!(e.key, "server.metrics_listen");
    assert!(
        e.message.starts_with("`localhost` is not an address"),
        "{}",
        e.message
    );
}

#[test]
fn the_environment_adds_tokens_to_the_files() {
    let env = [("X_TOKENS", " b , ,c,")];
    assert_eq!(
        tokens(&env, "X_TOKENS", &["a".to_string()]),
        ["a", "b", "c"]
    );
    assert_eq!(
        tokens(&[("X_TOKENS", "")], "X_TOKENS", &[]),
        Vec::<String>::new()
    );
}

#[test]
fn http2_settings_are_checked_by_key() {
    let (keepalive, window) = http2(
        DEFAULT_KEEPALIVE_INTERVAL_MS,
        DEFAULT_KEEPALIVE_TIMEOUT_MS,
        ReceiveWindow::DEFAULT.stream_bytes(),
    )
    .unwrap();
    assert_eq!(keepalive, Keepalive::DEFAULT);
    assert_eq!(window, ReceiveWindow::DEFAULT);
    assert_eq!(
        http2(10, 20_000, 65_535).unwrap_err().key,
        "server.keepalive_interval_ms"
    );
    assert_eq!(
        http2(30_000, 1, 65_535).unwrap_err().key,
        "server.keepalive_timeout_ms"
    );
    assert_eq!(
        http2(30_000, 20_000, 1).unwrap_err().key,
        "server.stream_window_bytes"
    );
}
