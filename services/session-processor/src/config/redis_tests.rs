use super::*;

#[test]
fn a_replica_wait_is_read_and_checked() {
    assert_eq!(replica_wait(&RedisFile::default()).unwrap(), None);
    let wait = |replicas, timeout_ms| RedisFile {
        wait_replicas: replicas,
        wait_timeout_ms: timeout_ms,
        ..Default::default()
    };
    assert_eq!(
        replica_wait(&wait(1, 50)).unwrap(),
        Some(ReplicaWait {
            replicas: 1,
            timeout: std::time::Duration::from_millis(50)
        })
    );
    // The timeout is ignored while nothing waits.
    assert_eq!(replica_wait(&wait(0, 0)).unwrap(), None);
    for (file, key) in [
        (wait(1, 0), "redis.wait_timeout_ms"),
        (wait(1, 1_001), "redis.wait_timeout_ms"),
        (wait(17, 100), "redis.wait_replicas"),
    ] {
        let e = replica_wait(&file).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
}
