#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use super::*;

const VECTORS: &str = include_str!("testdata/sigv4_vectors.json");

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("{key} missing"))
}

#[test]
fn hmac_matches_rfc_4231() {
    // Test case 2 (a short key) and test case 6 (a key longer than the block, hashed first).
    assert_eq!(
        hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    assert_eq!(
        hex(&hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First"
        )),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn the_published_test_suite_cases_sign_as_documented() {
    let v: Value = serde_json::from_str(VECTORS).unwrap();
    let scope = Scope {
        region: s(&v, "region"),
        service: s(&v, "service"),
        amz_date: s(&v, "amz_date"),
    };
    let secret = s(&v, "secret_access_key");
    assert_eq!(
        hex(&signing_key(
            secret,
            "20150830",
            scope.region,
            scope.service
        )),
        s(&v, "signing_key")
    );
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 5);
    for case in cases {
        let name = s(case, "name");
        let headers: Vec<(&str, &str)> = case["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0].as_str().unwrap(), h[1].as_str().unwrap()))
            .collect();
        let payload = sha256_hex(s(case, "body").as_bytes());
        let req = Request {
            method: s(case, "method"),
            path: s(case, "path"),
            query: s(case, "query"),
            headers: &headers,
            payload_sha256: &payload,
        };
        if let Some(canonical) = case["canonical_request"].as_str() {
            assert_eq!(canonical_request(&req).0, canonical, "{name}");
            assert_eq!(
                string_to_sign(&scope, canonical),
                s(case, "string_to_sign"),
                "{name}"
            );
        }
        let signed = sign(s(&v, "access_key_id"), secret, &scope, &req);
        assert_eq!(signed.signed_headers, s(case, "signed_headers"), "{name}");
        assert_eq!(signed.signature, s(case, "signature"), "{name}");
        assert_eq!(
            signed.authorization,
            format!(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders={}, Signature={}",
                s(case, "signed_headers"),
                s(case, "signature")
            ),
            "{name}"
        );
    }
}

#[test]
fn bedrock_paths_are_signed_encoded_twice() {
    // The wire path carries `%3A` for the `:` of a model id; every service but S3 signs it encoded again.
    let path = "/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse-stream";
    assert_eq!(
        uri_encode(path, false),
        "/model/us.anthropic.claude-3-7-sonnet-20250219-v1%253A0/converse-stream"
    );
}

#[test]
fn header_values_are_trimmed_and_repeated_names_joined() {
    let headers = [
        ("My-Header1", "  a   b   c  "),
        ("host", "h"),
        ("my-header1", "d"),
    ];
    let req = Request {
        method: "POST",
        path: "/",
        query: "b=2&a=1&a=0",
        headers: &headers,
        payload_sha256: "x",
    };
    let (canonical, signed) = canonical_request(&req);
    assert_eq!(signed, "host;my-header1");
    assert_eq!(
        canonical,
        "POST\n/\na=0&a=1&b=2\nhost:h\nmy-header1:a b c,d\n\nhost;my-header1\nx"
    );
}

#[test]
fn amz_dates() {
    assert_eq!(amz_date(1_440_938_160), "20150830T123600Z");
    assert_eq!(amz_date(0), "19700101T000000Z");
    assert_eq!(amz_date(951_782_400), "20000229T000000Z");
    assert_eq!(amz_date(4_102_444_799), "20991231T235959Z");
}
