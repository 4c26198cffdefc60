//! Tool-call id rewriting (docs/providers.md §6.2).
//!
//! Every rule is a pure function of the original id, so a `tool_use` and the `tool_result` that answers it are
//! rewritten to the same value and stay paired without any state. Ids that already satisfy a provider's rule are
//! passed through unchanged, so the ids a provider generated itself round-trip exactly.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

/// Hex of the first `n` bytes of SHA-256(`id`): a short deterministic suffix that keeps rewritten ids distinct.
fn hash_hex(id: &str, n: usize) -> String {
    let digest = Sha256::digest(id.as_bytes());
    digest.iter().take(n).map(|b| format!("{b:02x}")).collect()
}

/// Anthropic: `^[a-zA-Z0-9_-]+$`. Invalid characters become `_` and a hash suffix keeps distinct ids distinct.
pub fn anthropic(id: &str) -> Cow<'_, str> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(valid) {
        return Cow::Borrowed(id);
    }
    Cow::Owned(word_rewrite(id))
}

/// Word characters kept (others become `_`), at most 48 of them, and a hash suffix.
fn word_rewrite(id: &str) -> String {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let cleaned: String = id
        .chars()
        .map(|c| if valid(c) { c } else { '_' })
        .take(48)
        .collect();
    format!("{cleaned}_{}", hash_hex(id, 6))
}

/// Bedrock Converse: `^[a-zA-Z0-9_-]{1,64}$`, Anthropic's rule plus a length cap; rewritten ids (at most 61
/// characters) fit it.
pub fn bedrock(id: &str) -> Cow<'_, str> {
    if id.len() <= 64 {
        anthropic(id)
    } else {
        Cow::Owned(word_rewrite(id))
    }
}

/// OpenAI Chat: at most 40 characters. Longer ids keep a readable prefix and get a hash suffix.
pub fn openai(id: &str) -> Cow<'_, str> {
    const MAX: usize = 40;
    if !id.is_empty() && id.chars().count() <= MAX {
        return Cow::Borrowed(id);
    }
    let prefix: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(MAX - 17)
        .collect();
    Cow::Owned(format!("{prefix}_{}", hash_hex(id, 8)))
}

/// Mistral: exactly 9 characters of `[a-zA-Z0-9]`.
pub fn mistral(id: &str) -> Cow<'_, str> {
    if id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Cow::Borrowed(id);
    }
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let digest = Sha256::digest(id.as_bytes());
    Cow::Owned(
        digest
            .iter()
            .take(9)
            .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
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
}
