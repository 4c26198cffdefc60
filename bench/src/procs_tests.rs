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

#[test]
fn the_schedule_says_paced_or_burst() {
    assert_eq!(schedule(64, 20), "64 chunks at 20 ms");
    assert_eq!(schedule(8, 0), "8 chunks in a burst (no pacing)");
}

#[test]
fn the_run_header_names_the_run_the_machine_and_the_load() {
    let mut out = String::new();
    run_header(&mut out, "loadgen", "0.10 0.20 0.30", "1.00 0.50 0.40");
    assert!(
        out.starts_with("\n## loadgen results\n\n- machine: "),
        "{out}"
    );
    assert!(
        out.ends_with(
            "- load average (1, 5, 15 min) at start: 0.10 0.20 0.30; at end: 1.00 0.50 0.40\n"
        ),
        "{out}"
    );
}

#[test]
fn free_ports_bind_and_lie_below_the_range_of_outgoing_connections() {
    let outgoing_from: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..20 {
        let port = free_port().unwrap();
        assert!(port < outgoing_from, "{port} is in the outgoing range");
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        seen.insert(port);
    }
    assert!(seen.len() > 10, "picked at random: {seen:?}");
}
