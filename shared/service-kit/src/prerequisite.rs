//! What a test does when something it needs from outside the Rust build is missing: a toolchain, an SDK, a kernel
//! feature. Under CI (`CI` set, as .ci/run sets it) it fails, naming what to install, because a green run must mean
//! that every test ran. Elsewhere it may skip, but says so where the developer sees it, although the test runner
//! keeps a passing test's output to itself.

use std::io::Write;

/// Whether this run is CI's: `CI` set to anything but empty, `0` or `false` (CI systems set `true` or `1`).
pub fn under_ci() -> bool {
    means_ci(std::env::var("CI").ok().as_deref())
}

fn means_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim();
        !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
    })
}

/// For a test about to return early because a prerequisite is missing (`missing` says which, `install` what provides
/// it). Panics under CI; elsewhere prints a SKIPPED notice naming the test, to stderr and to the terminal (if any),
/// then returns.
pub fn skip_or_fail(missing: &str, install: &str) {
    // The test harness names each test's thread after the test.
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    assert!(
        !under_ci(),
        "{test} cannot run: {missing}; {install} (under CI a test never skips for a missing prerequisite)"
    );
    let notice = format!(
        "\nSKIPPED {test}, which did not run: {missing}; {install} (under CI this fails)\n\n"
    );
    eprint!("{notice}");
    // What the runner captures it shows only for a failing test; the terminal is where a skip is seen.
    if let Ok(mut tty) = std::fs::OpenOptions::new().write(true).open("/dev/tty") {
        let _ = tty.write_all(notice.as_bytes());
    }
}

#[cfg(test)]
#[path = "prerequisite_tests.rs"]
mod tests;
