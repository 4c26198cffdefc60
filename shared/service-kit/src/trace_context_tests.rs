#![allow(clippy::unwrap_used)]

use tonic::metadata::MetadataMap;

use super::*;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn metadata(pairs: &[(&'static str, &str)]) -> MetadataMap {
    let mut m = MetadataMap::new();
    for (k, v) in pairs {
        m.insert(*k, v.parse().unwrap());
    }
    m
}

#[test]
fn a_well_formed_traceparent_is_valid() {
    assert!(valid_traceparent(PARENT));
    assert!(valid_traceparent(
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00"
    ));
}

#[test]
fn malformed_traceparents_are_not() {
    for bad in [
        "",
        "garbage",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    ] {
        assert!(!valid_traceparent(bad), "{bad}");
    }
}

#[test]
fn a_valid_context_is_passed_on_parent_first() {
    let got = from_metadata(&metadata(&[
        ("tracestate", "vendor=a,other=b"),
        ("traceparent", PARENT),
    ]));
    assert_eq!(
        got,
        [
            ("traceparent".to_string(), PARENT.to_string()),
            ("tracestate".to_string(), "vendor=a,other=b".to_string()),
        ]
    );
}

#[test]
fn a_malformed_parent_drops_the_whole_context() {
    let got = from_metadata(&metadata(&[
        ("traceparent", "00-not-a-trace-01"),
        ("tracestate", "vendor=a"),
    ]));
    assert!(got.is_empty(), "{got:?}");
    assert!(from_metadata(&metadata(&[("tracestate", "vendor=a")])).is_empty());
}

#[test]
fn an_oversized_tracestate_is_dropped_alone() {
    let long = format!("v={}", "x".repeat(MAX_TRACESTATE_BYTES));
    let got = from_metadata(&metadata(&[("traceparent", PARENT), ("tracestate", &long)]));
    assert_eq!(got, [("traceparent".to_string(), PARENT.to_string())]);
    let fits = format!("v={}", "x".repeat(MAX_TRACESTATE_BYTES - 2));
    let got = from_metadata(&metadata(&[("traceparent", PARENT), ("tracestate", &fits)]));
    assert_eq!(got.len(), 2);
}
