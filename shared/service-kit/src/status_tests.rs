#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn invalid_names_the_field_in_the_message_the_violation_and_the_info() {
    let status = invalid("svc", "generation.model", "required");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "generation.model: required");
    let details = status.get_error_details();
    let violations = &details.bad_request().unwrap().field_violations;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].field, "generation.model");
    assert_eq!(violations[0].description, "required");
    let info = details.error_info().unwrap();
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("INVALID_ARGUMENT", "svc")
    );
    assert_eq!(info.metadata["field"], "generation.model");
}

#[test]
fn with_info_carries_reason_domain_and_metadata() {
    let status = with_info(
        Code::NotFound,
        "tenant not found",
        "svc",
        "TENANT_NOT_FOUND",
        &[("a", "1")],
    );
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "tenant not found");
    let info = status.get_error_details().error_info().cloned().unwrap();
    assert_eq!(info.reason, "TENANT_NOT_FOUND");
    assert_eq!(info.domain, "svc");
    assert_eq!(info.metadata.len(), 1);
    assert_eq!(info.metadata["a"], "1");
}
