use super::*;

#[test]
fn plans_parse_and_reject_zero() {
    assert_eq!(
        parse_plan("1x3, 200x1,50").unwrap(),
        vec![(1, 3), (200, 1), (50, 1)]
    );
    assert!(parse_plan("0x1").unwrap_err().contains("at least 1"));
    assert!(parse_plan("ax1").unwrap_err().contains("concurrency"));
}

#[tokio::test]
async fn waits_for_a_listener_and_times_out_without_one() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Path::new("unused.log");
    wait_listening(addr, Duration::from_secs(1), "test", log)
        .await
        .unwrap();
    drop(listener);
    let port = free_port().unwrap();
    let closed = SocketAddr::from(([127, 0, 0, 1], port));
    let err = wait_listening(closed, Duration::from_millis(50), "nobody", log)
        .await
        .unwrap_err();
    assert!(err.contains("nobody did not listen"), "{err}");
}
