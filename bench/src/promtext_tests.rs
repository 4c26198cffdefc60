use super::*;

const TEXT: &str = "# TYPE session_processor_prompt_phase_seconds histogram\n\
session_processor_prompt_phase_seconds_sum{phase=\"begun\"} 0.5\n\
session_processor_prompt_phase_seconds_count{phase=\"begun\"} 100\n\
session_processor_prompt_phase_seconds_bucket{le=\"0.001\",phase=\"begun\"} 90\n\
session_processor_prompt_phase_seconds_sum{phase=\"first_event\"} 2.0\n\
session_processor_prompt_phase_seconds_count{phase=\"first_event\"} 100\n\
session_processor_redis_seconds_sum{op=\"put\"} 9.0\n";

#[test]
fn sums_and_counts_by_label_and_their_difference() {
    let t = histogram_totals(TEXT, "session_processor_prompt_phase_seconds", "phase");
    assert_eq!(t.len(), 2);
    assert_eq!(t["begun"], (0.5, 100));
    assert_eq!(t["first_event"], (2.0, 100));
    let mut before = Totals::new();
    before.insert("begun".into(), (0.25, 40));
    let d = since(&t, &before);
    assert_eq!(d["begun"], (0.25, 60));
    assert_eq!(d["first_event"], (2.0, 100));
}

#[test]
fn a_series_value_by_its_exact_name() {
    let text = "session_processor_redis_requests_total 1234\n\
                session_processor_redis_waits_total{outcome=\"short\"} 2\n\
                session_processor_redis_waits_total{outcome=\"skipped\"} 7\n";
    assert_eq!(
        value(text, "session_processor_redis_requests_total"),
        1234.0
    );
    assert_eq!(
        value(
            text,
            "session_processor_redis_waits_total{outcome=\"skipped\"}"
        ),
        7.0
    );
    assert_eq!(value(text, "session_processor_redis_requests"), 0.0);
    assert_eq!(value(text, "absent_total"), 0.0);
}
