use super::*;

#[test]
fn amounts_read_as_usd() {
    assert_eq!(usd(250_000_000), "0.25");
    assert_eq!(usd(1_500_000_000), "1.5");
    assert_eq!(usd(1_000), "0.000001");
    assert_eq!(usd(0), "0");
}
