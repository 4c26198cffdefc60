#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const CREDENTIALS: &str = "\
# comment
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = secret-default

[work]
aws_access_key_id=AKIDWORK
aws_secret_access_key=secret-work
aws_session_token = token-work
";

const CONFIG: &str = "\
[default]
region = eu-west-1

[profile work]
region = us-west-2
s3 =
  max_concurrent_requests = 20

[profile onlyconfig]
region = ap-south-1
aws_access_key_id = AKIDCONF
aws_secret_access_key = secret-conf
";

fn files() -> SharedFiles {
    SharedFiles {
        credentials: Some(CREDENTIALS.into()),
        config: Some(CONFIG.into()),
    }
}

#[test]
fn environment_keys_win_over_files() {
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDENV"),
        ("AWS_SECRET_ACCESS_KEY", "secret-env"),
        ("AWS_SESSION_TOKEN", "token-env"),
        ("AWS_REGION", "us-east-2"),
    ];
    let s = resolve(&AwsFile::default(), &env, &files()).unwrap();
    assert_eq!(s.credentials.access_key_id, "AKIDENV");
    assert_eq!(s.credentials.secret_access_key.expose(), "secret-env");
    assert_eq!(
        s.credentials.session_token.as_ref().map(Secret::expose),
        Some("token-env")
    );
    assert_eq!(s.region, "us-east-2");
    assert_eq!(s.credentials.source, "environment");
    assert_eq!(s.secrets(), vec!["secret-env", "token-env"]);
}

#[test]
fn profiles_come_from_the_credentials_file_then_the_config_file() {
    let s = resolve(&AwsFile::default(), &[("HOME", "/nowhere")], &files()).unwrap();
    assert_eq!(
        (s.credentials.access_key_id.as_str(), s.region.as_str()),
        ("AKIDDEFAULT", "eu-west-1")
    );
    let s = resolve(&AwsFile::default(), &[("AWS_PROFILE", "work")], &files()).unwrap();
    assert_eq!(s.credentials.access_key_id, "AKIDWORK");
    assert_eq!(s.credentials.session_token.unwrap().expose(), "token-work");
    assert_eq!(s.region, "us-west-2");
    // The configured profile and region beat the environment's.
    let file = AwsFile {
        region: Some("ca-central-1".into()),
        profile: Some("onlyconfig".into()),
    };
    let s = resolve(&file, &[("AWS_PROFILE", "work")], &files()).unwrap();
    assert_eq!(s.credentials.access_key_id, "AKIDCONF");
    assert_eq!(s.credentials.source, "config file profile onlyconfig");
    assert_eq!(s.region, "ca-central-1");
}

#[test]
fn missing_credentials_or_region_say_what_to_set() {
    let err = resolve(
        &AwsFile::default(),
        &[("AWS_REGION", "us-east-1")],
        &SharedFiles::default(),
    )
    .unwrap_err();
    assert!(err.contains("AWS_ACCESS_KEY_ID"), "{err}");
    let env = [("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")];
    let err = resolve(&AwsFile::default(), &env, &SharedFiles::default()).unwrap_err();
    assert!(err.contains("region"), "{err}");
    let env = [
        ("AWS_ACCESS_KEY_ID", "a"),
        ("AWS_SECRET_ACCESS_KEY", "b"),
        ("AWS_REGION", "us-east-1/../x"),
    ];
    assert!(resolve(&AwsFile::default(), &env, &SharedFiles::default()).is_err());
}

#[test]
fn credentials_never_print() {
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDENV"),
        ("AWS_SECRET_ACCESS_KEY", "secret-env"),
        ("AWS_SESSION_TOKEN", "token-env"),
        ("AWS_REGION", "us-east-1"),
    ];
    let s = resolve(&AwsFile::default(), &env, &SharedFiles::default()).unwrap();
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("secret-env") && !shown.contains("token-env"),
        "{shown}"
    );
}

#[test]
fn urls_split_as_clients_send_them() {
    assert_eq!(
        split_url("https://bedrock-runtime.us-east-1.amazonaws.com:443/model/m/converse-stream"),
        Some((
            "bedrock-runtime.us-east-1.amazonaws.com",
            "/model/m/converse-stream",
            ""
        ))
    );
    assert_eq!(
        split_url("http://127.0.0.1:8080/a?b=c"),
        Some(("127.0.0.1:8080", "/a", "b=c"))
    );
    assert_eq!(split_url("http://h"), Some(("h", "/", "")));
    assert_eq!(split_url("nohost"), None);
}

#[test]
fn signed_headers_cover_the_body_and_the_session_token() {
    let signer = AwsSigner {
        credentials: Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: Some(Secret::new("session-token")),
            source: "test".into(),
        },
        region: "us-east-1".into(),
    };
    let url = "http://127.0.0.1:9/model/us.amazon.nova-lite-v1%3A0/converse-stream";
    let headers = signer
        .sign_at(url, "application/json", b"{}", 1_440_938_160)
        .unwrap();
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(get("x-amz-date"), "20150830T123600Z");
    assert_eq!(get("x-amz-security-token"), "session-token");
    assert_eq!(get("x-amz-content-sha256"), sigv4::sha256_hex(b"{}"));
    let auth = get("authorization");
    assert!(auth.starts_with(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, \
         SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature="
    ), "{auth}");
    // Another body, another signature.
    let other = signer
        .sign_at(url, "application/json", b"{ }", 1_440_938_160)
        .unwrap();
    assert_ne!(other[0].1, auth);
}

#[test]
fn a_bedrock_provider_is_configured_from_the_aws_environment() {
    use crate::config::Config;
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDENV"),
        ("AWS_SECRET_ACCESS_KEY", "secret-env"),
        ("AWS_REGION", "eu-central-1"),
    ];
    let text =
        "[server]\nallow_unauthenticated = true\n[providers.bedrock]\nprotocol = \"bedrock\"\n";
    let c = Config::from_file(Config::parse(text).unwrap(), &env).unwrap();
    let p = &c.providers["bedrock"];
    assert_eq!(
        p.base_url,
        "https://bedrock-runtime.eu-central-1.amazonaws.com"
    );
    assert_eq!(p.signer.as_ref().unwrap().region, "eu-central-1");
    assert!(c.catalog.get("bedrock/us.amazon.nova-lite-v1:0").is_some());
    // An endpoint for tests, and the region from the table.
    let text = "[server]\nallow_unauthenticated = true\n[providers.bedrock]\nprotocol = \"bedrock\"\nbase_url = \"http://127.0.0.1:9\"\n[providers.bedrock.aws]\nregion = \"us-west-2\"\n";
    let c = Config::from_file(Config::parse(text).unwrap(), &env).unwrap();
    assert_eq!(c.providers["bedrock"].base_url, "http://127.0.0.1:9");
    assert_eq!(
        c.providers["bedrock"].signer.as_ref().unwrap().region,
        "us-west-2"
    );
    // Mistakes name their key.
    let bad = |text: &str| {
        Config::from_file(Config::parse(text).unwrap(), &env)
            .unwrap_err()
            .key
    };
    assert_eq!(
        bad(
            "[server]\nallow_unauthenticated = true\n[providers.b]\nprotocol = \"bedrock\"\napi_key_env = \"X\"\n"
        ),
        "providers.b.api_key_env"
    );
    assert_eq!(
        bad(
            "[server]\nallow_unauthenticated = true\n[providers.o]\nprotocol = \"openai_chat\"\nbase_url = \"http://h/v1\"\n[providers.o.aws]\nregion = \"us-east-1\"\n"
        ),
        "providers.o.aws"
    );
    let no_creds = [("AWS_REGION", "us-east-1"), ("HOME", "/nonexistent")];
    let err = Config::from_file(
        Config::parse(
            "[server]\nallow_unauthenticated = true\n[providers.b]\nprotocol = \"bedrock\"\n",
        )
        .unwrap(),
        &no_creds,
    )
    .unwrap_err();
    assert_eq!(err.key, "providers.b.aws");
}
