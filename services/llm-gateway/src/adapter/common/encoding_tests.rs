use super::*;

#[test]
fn base64_decodes_what_it_encodes() {
    for data in [
        &b""[..],
        b"f",
        b"fo",
        b"foo",
        b"foob",
        b"fooba",
        b"foobar",
        &[0, 255, 128, 7],
    ] {
        assert_eq!(base64_decode(&base64(data)).as_deref(), Some(data));
    }
    assert_eq!(base64_decode("Zm9v!"), None);
}

#[test]
fn base64_matches_rfc4648_vectors() {
    for (input, expected) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(input.as_bytes()), expected);
    }
    assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    let mut out = String::from("x");
    base64_into(&mut out, &[0xfb, 0xff, 0xbf]);
    assert_eq!(out, "x+/+/");
}

#[test]
fn data_urls_and_default_filenames() {
    assert_eq!(data_url("image/png", b"foo"), "data:image/png;base64,Zm9v");
    assert_eq!(default_filename(2, "application/pdf"), "part-2.pdf");
    assert_eq!(
        default_filename(0, "text/plain; charset=utf-8"),
        "part-0.txt"
    );
    assert_eq!(
        default_filename(1, "application/vnd.ms-excel"),
        "part-1.bin"
    );
    assert_eq!(default_filename(3, "image/svg+xml"), "part-3.svg");
}

#[test]
fn openai_files_are_classified_by_media_type_and_source() {
    let file = |media: &str, name: &str, source| pb::FilePart {
        media_type: media.into(),
        filename: name.into(),
        source: Some(source),
    };
    let png = file("IMAGE/png", "", Source::Data(b"foo".to_vec()));
    assert_eq!(
        OpenAiFile::of(0, 0, &png).unwrap(),
        OpenAiFile::ImageData("data:IMAGE/png;base64,Zm9v".into())
    );
    let url = file("image/png", "", Source::Url("https://x/y.png".into()));
    assert_eq!(
        OpenAiFile::of(0, 0, &url).unwrap(),
        OpenAiFile::ImageUrl("https://x/y.png")
    );
    let pdf = file("application/pdf", "", Source::Data(b"fo".to_vec()));
    assert_eq!(
        OpenAiFile::of(0, 4, &pdf).unwrap(),
        OpenAiFile::FileData {
            filename: "part-4.pdf".into(),
            data_url: "data:application/pdf;base64,Zm8=".into()
        }
    );
    let bare = file("", "a.bin", Source::Url("https://x/a".into()));
    assert_eq!(
        OpenAiFile::of(0, 0, &bare).unwrap(),
        OpenAiFile::FileUrl {
            filename: "a.bin",
            url: "https://x/a"
        }
    );
    let none = pb::FilePart {
        source: None,
        ..pdf.clone()
    };
    assert_eq!(
        OpenAiFile::of(1, 2, &none).unwrap_err().field,
        "generation.messages[1].parts[2].file"
    );
}

#[test]
fn a_media_type_loses_its_parameters_and_case() {
    let file = |media_type: &str| pb::FilePart {
        media_type: media_type.into(),
        ..Default::default()
    };
    assert_eq!(media_type(&file("Image/PNG; q=1")), "image/png");
    assert_eq!(media_type(&file(" text/plain;charset=utf-8")), "text/plain");
    assert_eq!(media_type(&file("")), "");
}
