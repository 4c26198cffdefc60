use super::*;

#[test]
fn page_tokens_round_trip() {
    let t = encode_page_token("openai/gpt-4o");
    assert_eq!(decode_page_token(&t).as_deref(), Some("openai/gpt-4o"));
    assert_eq!(decode_page_token("zz"), None);
    assert_eq!(decode_page_token("abc"), None);
}
