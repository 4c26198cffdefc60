#![allow(clippy::unwrap_used)]

use super::*;

// A real line's shape, with a command name holding a space and a parenthesis.
const STAT: &str = "4242 (llm gw) x) S 1 4242 4242 0 -1 4194560 2000 0 0 0 250 50 0 0 20 0 7 0 1500 \
                    123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

#[test]
fn the_stat_fields_are_read_past_the_command_name() {
    let s = parse_stat(STAT, 1_700_000_000, 100, 4096).unwrap();
    assert_eq!(s.cpu_seconds, 3.0, "250 + 50 ticks at 100 per second");
    assert_eq!(s.threads, 7);
    assert_eq!(s.start_time_seconds, 1_700_000_015.0);
    assert_eq!(s.virtual_bytes, 123_456_789);
    assert_eq!(s.resident_bytes, 2048 * 4096);
}

#[test]
fn a_short_line_is_none() {
    assert_eq!(parse_stat("4242 (x) S 1 2 3", 0, 100, 4096), None);
    assert_eq!(parse_stat("no parenthesis", 0, 100, 4096), None);
}

#[test]
fn boot_time_and_fd_limit() {
    assert_eq!(
        parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
        Some(1_700_000_000)
    );
    let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                  Max open files            1024                 524288               files\n";
    assert_eq!(parse_max_fds(limits), Some(1024));
    assert_eq!(
        parse_max_fds(
            "Max open files            unlimited            unlimited            files\n"
        ),
        None
    );
}

#[test]
fn this_process_is_exported_under_the_standard_names() {
    let mut registry = Registry::default();
    register(&mut registry);
    let text = crate::metrics_http::encode_registry(&registry);
    for name in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ",
        "process_threads ",
        "process_start_time_seconds ",
        "process_open_fds ",
        "process_max_fds ",
    ] {
        let value: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name}missing:\n{text}"))
            .trim()
            .parse()
            .unwrap();
        // A fresh test process may not have used a whole clock tick of CPU yet.
        let least = if name.starts_with("process_cpu") {
            0.0
        } else {
            1.0
        };
        assert!(value >= least, "{name}= {value}");
    }
}
