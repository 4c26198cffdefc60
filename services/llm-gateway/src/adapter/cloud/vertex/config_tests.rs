#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

const KEY_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fake-provider/fixtures/vertex/service_account.json"
);

fn g(project: &str, location: Option<&str>) -> GoogleFile {
    GoogleFile {
        project: Some(project.into()),
        location: location.map(String::from),
        ..GoogleFile::default()
    }
}

#[test]
fn global_and_regional_endpoints_carry_project_and_location() {
    let env = [("GOOGLE_APPLICATION_CREDENTIALS", KEY_FILE)];
    let global = build("vx", Some(&g("acme-prod", None)), None, &env).unwrap();
    assert_eq!(
        global.base_url,
        "https://aiplatform.googleapis.com/v1/projects/acme-prod/locations/global"
    );
    let regional = build("vx", Some(&g("acme-prod", Some("us-east5"))), None, &env).unwrap();
    assert_eq!(
        regional.base_url,
        "https://us-east5-aiplatform.googleapis.com/v1/projects/acme-prod/locations/us-east5"
    );
    let local = build("vx", Some(&g("p1", None)), Some("http://127.0.0.1:9"), &env).unwrap();
    assert_eq!(
        local.base_url,
        "http://127.0.0.1:9/v1/projects/p1/locations/global"
    );
    let shown = format!("{:?}", local.tokens);
    assert!(shown.contains("ServiceAccount"), "{shown}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
}

#[test]
fn without_a_key_file_tokens_come_from_the_metadata_server() {
    let env = [("GCE_METADATA_HOST", "127.0.0.1:8")];
    let v = build("vx", Some(&g("p1", None)), None, &env).unwrap();
    let shown = format!("{:?}", v.tokens);
    assert!(
        shown.contains("MetadataServer") && shown.contains("127.0.0.1:8"),
        "{shown}"
    );
}

#[test]
fn mistakes_name_the_key() {
    let none: [(&str, &str); 0] = [];
    let cases = [
        (None, "providers.vx.google.project"),
        (Some(g("Bad/Project", None)), "providers.vx.google.project"),
        (Some(g("p1", Some("../x"))), "providers.vx.google.location"),
        (
            Some(GoogleFile {
                credentials: Some(CredentialsKind::ServiceAccount),
                ..g("p1", None)
            }),
            "providers.vx.google.credentials_file",
        ),
        (
            Some(GoogleFile {
                credentials_file: Some("/nonexistent/key.json".into()),
                ..g("p1", None)
            }),
            "providers.vx.google.credentials_file",
        ),
    ];
    for (file, want) in cases {
        let err = build("vx", file.as_ref(), None, &none).err().unwrap();
        assert_eq!(err.key, want, "{err}");
    }
}
