use super::*;

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    for v in [
        "Bearer tok",
        "bearer tok",
        "BEARER tok",
        "bEaReR tok",
        "Bearer   tok",
    ] {
        assert_eq!(bearer(v), Some("tok"), "{v}");
    }
    for v in ["Bearer", "Bearer ", "Basic tok", "Bearertok", "tok", ""] {
        assert_eq!(bearer(v), None, "{v}");
    }
}
