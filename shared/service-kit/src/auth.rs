//! The bearer-token check both services make: parsing the `authorization` value and comparing tokens without
//! revealing, by timing, how much of a guess matched.

/// The credentials of an `authorization` value: RFC 9110's `<scheme> <credentials>`, the `Bearer` scheme matched in
/// any case, the spaces after it skipped. `None` when the scheme is another or the token is empty.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Compares without an early exit on the first differing byte (a length difference is not hidden: token lengths
/// are not secret).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
