use super::*;

fn split(s: &str) -> Vec<String> {
    split_events(&Bytes::from(s.to_owned()))
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

#[test]
fn splits_lf_events() {
    assert_eq!(
        split("data: 1\n\nevent: x\ndata: 2\n\n"),
        vec!["data: 1\n\n", "event: x\ndata: 2\n\n"]
    );
}

#[test]
fn splits_crlf_events_and_keeps_trailing_bytes() {
    assert_eq!(
        split("data: 1\r\n\r\ndata: 2\r\n\r\n{\n  \"error\": {}\n}\n"),
        vec![
            "data: 1\r\n\r\n",
            "data: 2\r\n\r\n",
            "{\n  \"error\": {}\n}\n"
        ]
    );
}

#[test]
fn unterminated_body_is_one_event() {
    assert_eq!(split("data: 1\n"), vec!["data: 1\n"]);
    assert!(split("").is_empty());
}

#[test]
fn crlf_rewrite_is_idempotent() {
    let once = lf_to_crlf(b"data: 1\n\ndata: 2\r\n\r\n");
    assert_eq!(&once[..], b"data: 1\r\n\r\ndata: 2\r\n\r\n");
    assert_eq!(lf_to_crlf(&once), once);
}
