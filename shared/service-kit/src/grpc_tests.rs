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
