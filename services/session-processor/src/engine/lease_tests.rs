use super::*;

/// A renewal refused because the run's own `done` write released the lease is no loss; refused otherwise, it is.
#[test]
fn a_refused_renewal_is_a_lost_lease_only_when_the_run_did_not_end_itself() {
    assert!(!lease_lost(RenewalEnd::Refused, true));
    assert!(lease_lost(RenewalEnd::Refused, false));
    for end in [RenewalEnd::Stopped, RenewalEnd::Unproven] {
        assert!(!lease_lost(end, false), "{end:?} warns where it happens");
        assert!(!lease_lost(end, true));
    }
}

/// A lease clock is proven by the latest renewal sent, never moved back by an older one answering late.
#[test]
fn the_lease_clock_keeps_the_latest_proof() {
    let clock = LeaseClock::new();
    let earlier = Instant::now() - Duration::from_secs(5);
    clock.proven(earlier);
    assert!(clock.age() < Duration::from_secs(5));
}
