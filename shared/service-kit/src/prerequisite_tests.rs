use super::means_ci;

#[test]
fn ci_is_any_value_but_empty_zero_or_false() {
    for on in ["1", "true", "TRUE", "yes", "github"] {
        assert!(means_ci(Some(on)), "{on}");
    }
    for off in [
        None,
        Some(""),
        Some(" "),
        Some("0"),
        Some("false"),
        Some("False"),
    ] {
        assert!(!means_ci(off), "{off:?}");
    }
}
