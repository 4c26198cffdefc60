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
#[path = "ids_tests.rs"]
mod tests;
