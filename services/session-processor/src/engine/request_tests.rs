use super::*;
use std::time::Duration;

#[test]
fn the_day_is_utc_and_dated() {
    assert_eq!(utc_day(SystemTime::UNIX_EPOCH), "1970-01-01");
    assert_eq!(
        utc_day(SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_083_200 + 86_399)),
        "2026-12-01"
    );
}
