use super::*;

#[test]
fn data_urls_are_decoded_and_other_urls_passed_on() {
    let part = file_url("f", "data:image/png;base64,iVBORw==", "").unwrap();
    let Some(Kind::File(f)) = part.kind else {
        panic!()
    };
    assert_eq!(f.media_type, "image/png");
    assert_eq!(
        f.source,
        Some(pb::file_part::Source::Data(vec![0x89, b'P', b'N', b'G']))
    );
    let part = file_url("f", "https://example.com/cat.jpg", "").unwrap();
    let Some(Kind::File(f)) = part.kind else {
        panic!()
    };
    assert_eq!(
        f.source,
        Some(pb::file_part::Source::Url(
            "https://example.com/cat.jpg".into()
        ))
    );
    assert_eq!(
        file_url("f", "data:image/png,raw", "")
            .unwrap_err()
            .param
            .as_deref(),
        Some("f")
    );
}
