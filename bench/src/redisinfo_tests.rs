use super::*;

const BEFORE: &str = "# Commandstats\r\n\
    cmdstat_xadd:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
    cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n\
    cmdstat_config|resetstat:calls=1,usec=165,usec_per_call=165.00,rejected_calls=0,failed_calls=0\r\n";
const AFTER: &str = "# Commandstats\r\n\
    cmdstat_xadd:calls=74,usec=350,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
    cmdstat_evalsha:calls=4,usec=90,usec_per_call=22.50,rejected_calls=0,failed_calls=0\r\n\
    cmdstat_hset:calls=8,usec=40,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
    cmdstat_info:calls=5,usec=150,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n\
    cmdstat_config|resetstat:calls=1,usec=165,usec_per_call=165.00,rejected_calls=0,failed_calls=0\r\n";

#[test]
fn parses_and_diffs_command_counts_without_info() {
    let before = CommandStats::parse(BEFORE);
    assert_eq!(before.0.get("xadd"), Some(&10));
    assert_eq!(before.0.get("config|resetstat"), Some(&1));
    let d = CommandStats::parse(AFTER).since(&before);
    assert_eq!(
        d.ranked(),
        vec![("xadd", 64), ("hset", 8), ("evalsha", 4)],
        "info is the benchmark's own; unchanged commands are left out"
    );
    assert_eq!(d.total(), 76);
    assert_eq!(d.script_calls(), 4);
    let mut sum = d.clone();
    sum.add(&d);
    assert_eq!(sum.total(), 152);
}

#[test]
fn reads_info_fields() {
    let text = "# Memory\r\nused_memory:1024\r\nused_memory_human:1.00K\r\n";
    assert_eq!(info_field(text, "used_memory"), Some("1024"));
    assert_eq!(info_field(text, "used_memory_rss"), None);
}
