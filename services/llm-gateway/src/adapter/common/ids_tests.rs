use super::*;

#[test]
fn bedrock_ids_are_word_characters_at_most_64() {
    assert_eq!(bedrock("tooluse_abc-1"), "tooluse_abc-1");
    assert_eq!(bedrock("call:1"), anthropic("call:1"));
    let long = "a".repeat(65);
    let rewritten = bedrock(&long);
    assert!(rewritten.len() <= 64 && rewritten != long, "{rewritten}");
    assert_ne!(bedrock(&"a".repeat(66)), rewritten);
}

#[test]
fn valid_ids_pass_through_unchanged() {
    assert_eq!(anthropic("toolu_01A-b"), "toolu_01A-b");
    assert_eq!(openai("call_abc123"), "call_abc123");
    assert_eq!(mistral("Ab3dE6gH9"), "Ab3dE6gH9");
}

#[test]
fn anthropic_rewrites_charset_deterministically_and_distinctly() {
    let a = anthropic("call:1/x");
    assert!(
        a.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "{a}"
    );
    assert_eq!(a, anthropic("call:1/x"));
    assert_ne!(a, anthropic("call_1_x"));
    assert_ne!(a, anthropic("call:1.x"));
    assert!(!anthropic("").is_empty());
}

#[test]
fn openai_caps_length_at_40() {
    let long = format!("fc_{}", "a".repeat(50));
    let r = openai(&long);
    assert!(r.len() <= 40, "{r}");
    assert_eq!(r, openai(&long));
    assert_ne!(r, openai(&format!("fc_{}", "a".repeat(51))));
}

#[test]
fn mistral_is_nine_alphanumerics() {
    for id in ["toolu_01XYZ", "call_1", "", "x"] {
        let m = mistral(id);
        assert_eq!(m.len(), 9, "{m}");
        assert!(m.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(m, mistral(id));
    }
    assert_ne!(mistral("a"), mistral("b"));
}
