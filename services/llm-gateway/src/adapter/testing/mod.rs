//! Test support for the adapters, compiled for the unit tests and, with the `fuzzing` feature, for the cargo-fuzz
//! targets in `fuzz/`; never part of the service: the unified stream's invariant checker ([`invariants`]), the
//! fuzzing harness the targets and the seed-corpus replay share ([`fuzzing`]), the part and event builders of the
//! unit tests, the golden request bodies, and the tests that run every protocol's decoder alike.

#[cfg(test)]
pub(crate) mod event_kit;
pub mod fuzzing;
#[cfg(test)]
pub(crate) mod golden;
pub mod invariants;
#[cfg(test)]
mod no_nameless_tests;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod whole_tests;
