//! `PROCESSOR_RUNTIMES` as read.

use super::{MAX, Runtimes};

#[test]
fn unset_or_per_core_is_one_runtime_per_usable_core() {
    for value in [None, Some(""), Some("per-core"), Some(" per-core ")] {
        assert_eq!(
            Runtimes::parse(value, 6),
            Ok(Runtimes::PerCore(6)),
            "{value:?}"
        );
    }
    assert_eq!(Runtimes::parse(None, 0), Ok(Runtimes::PerCore(1)));
}

#[test]
fn a_number_is_that_many_and_shared_is_the_multi_threaded_runtime() {
    assert_eq!(Runtimes::parse(Some("1"), 8), Ok(Runtimes::PerCore(1)));
    assert_eq!(Runtimes::parse(Some("3"), 8), Ok(Runtimes::PerCore(3)));
    assert_eq!(
        Runtimes::parse(Some(&MAX.to_string()), 8),
        Ok(Runtimes::PerCore(MAX))
    );
    assert_eq!(Runtimes::parse(Some("shared"), 8), Ok(Runtimes::Shared));
}

#[test]
fn anything_else_is_refused_naming_the_variable() {
    for bad in ["0", "-1", "two", "1.5", "Shared", &(MAX + 1).to_string()] {
        let e = Runtimes::parse(Some(bad), 4).unwrap_err();
        assert!(e.contains("PROCESSOR_RUNTIMES"), "{e}");
        assert!(e.contains(bad), "{e}");
    }
}
