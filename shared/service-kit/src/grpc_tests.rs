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
