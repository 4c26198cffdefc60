use tonic::Code;

use super::{StreamSlots, key};
use crate::config::Caller;

/// The streams `caller`'s tenant has open.
fn open(slots: &StreamSlots, caller: &Caller) -> usize {
    let open = slots.open.lock().unwrap();
    open.get(key(caller)).copied().unwrap_or(0)
}

#[test]
fn a_tenant_opens_at_most_its_limit_and_a_closed_stream_frees_its_place() {
    let slots = StreamSlots::new(2, Default::default());
    let a = Caller::Tenant("a".into());
    let b = Caller::Tenant("b".into());
    let first = slots.take(&a).unwrap();
    let _second = slots.take(&a).unwrap();
    let refused = slots.take(&a).unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(refused.message().contains("2 streams"), "{refused:?}");
    // Another tenant, and the operators, count apart.
    let _b = slots.take(&b).unwrap();
    let _op = slots.take(&Caller::Operator).unwrap();
    assert_eq!(
        (
            open(&slots, &a),
            open(&slots, &b),
            open(&slots, &Caller::Operator)
        ),
        (2, 1, 1)
    );
    assert_eq!(slots.gauge.get(), 4);
    drop(first);
    assert_eq!(open(&slots, &a), 1);
    assert_eq!(slots.gauge.get(), 3);
    let _again = slots.take(&a).unwrap();
}

#[test]
fn the_counts_leave_nothing_behind() {
    let slots = StreamSlots::new(1, Default::default());
    for i in 0..1000 {
        let _s = slots.take(&Caller::Tenant(format!("t{i}"))).unwrap();
    }
    assert!(slots.open.lock().unwrap().is_empty());
}
