use super::*;

#[test]
fn details_name_the_field_and_a_stable_reason() {
    let s = invalid("session_id", "required");
    assert_eq!(s.code(), Code::InvalidArgument);
    let d = s.get_error_details();
    let v = &d.bad_request().unwrap().field_violations[0];
    assert_eq!(v.field, "session_id");
    assert_eq!(d.error_info().unwrap().reason, "INVALID_ARGUMENT");
    assert_eq!(d.error_info().unwrap().domain, ERROR_DOMAIN);

    let s = too_large("metadata", "16384 bytes");
    assert_eq!(s.code(), Code::ResourceExhausted);
    let d = s.get_error_details();
    assert_eq!(
        d.bad_request().unwrap().field_violations[0].field,
        "metadata"
    );
    assert_eq!(d.error_info().unwrap().metadata["limit"], "16384 bytes");
}

#[test]
fn a_missing_session_and_another_tenants_are_one_status() {
    let a = session_not_found();
    let b = storage(StoreError::NotFound("session ses_x".into()));
    assert_eq!(
        (a.code(), a.message(), a.details()),
        (b.code(), b.message(), b.details())
    );
    assert_eq!(
        storage(StoreError::Timeout(std::time::Duration::from_secs(1))).code(),
        Code::Unavailable
    );
}
