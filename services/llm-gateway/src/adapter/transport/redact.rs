//! Scrubbing provider keys out of text that leaves the gateway (error messages and bodies, logs, span attributes).
//!
//! A provider may echo a key in another form than it was sent: lowercased, percent-encoded as part of a URL
//! (`sk%2Dabc`, in any mix of escaped and plain bytes and either hex case), JSON-escaped inside an error body (`\/`
//! for the `/` of an AWS secret key, `\u002B` for a `+`, as .NET's and PHP's encoders write them), or inside a
//! basic-auth credential (`base64("user:" + key)`, whatever the user part). [`redact`] finds all of them:
//!
//! - a secret is matched from every byte of the text, each of its bytes either as that byte (ASCII case ignored) or
//!   as a percent or JSON escape of it, so a match is cut out of the original exactly (a JSON body stays valid JSON:
//!   the escapes are inside a string, and so is the cut). Matching from every byte, rather than through one decoded
//!   view, also finds a key whose first characters would read as the end of an escape begun before it (`%` then a
//!   key starting `00`);
//! - for base64, a key starting at any of the three byte offsets modulo 3 has a run of base64 characters that depends
//!   on the key alone; each of the three runs (standard and URL-safe alphabets) is searched for, and a match removes
//!   the whole base64 token around it (the user part included).
//!
//! Matches of all secrets are merged before replacing, so a secret inside another leaves no fragment behind.

/// What a secret becomes.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest base64 run searched for: shorter runs would match ordinary text.
const MIN_BASE64_RUN: usize = 8;

/// Shortest secret redacted wherever it occurs. A shorter one (no real provider key is, but a test or a local
/// server's placeholder key may be) is redacted only as a whole token, where the characters on both sides are not
/// letters, digits, `-` or `_`: matched anywhere, a one-letter key would take that letter out of every word.
pub const MIN_SUBSTRING_SECRET: usize = 16;

/// Replaces every occurrence of each non-empty secret in `text`, in any of the forms above, with `[REDACTED]` (a
/// secret shorter than [`MIN_SUBSTRING_SECRET`] only where it stands as a whole token).
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        let needle = secret.as_bytes().to_ascii_lowercase();
        let found = find_disguised(text.as_bytes(), &needle);
        if secret.len() < MIN_SUBSTRING_SECRET {
            let bytes = text.as_bytes();
            ranges.extend(found.into_iter().filter(|&(s, e)| whole_token(bytes, s, e)));
            continue;
        }
        ranges.extend(found);
        for run in base64_runs(secret.as_bytes()) {
            for at in find_all(text.as_bytes(), run.as_bytes()) {
                ranges.push(base64_token(text.as_bytes(), at, at + run.len()));
            }
        }
    }
    if ranges.is_empty() {
        return text.to_string();
    }
    ranges.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut i = 0;
    while i < ranges.len() {
        let (start, mut end) = ranges[i];
        while i + 1 < ranges.len() && ranges[i + 1].0 <= end {
            end = end.max(ranges[i + 1].1);
            i += 1;
        }
        // Ranges end on byte boundaries of ASCII matches, but a percent escape could decode to a byte inside a
        // multi-byte character: widen to character boundaries so the output stays valid UTF-8.
        let start = floor_boundary(text, start.max(pos));
        let end = ceil_boundary(text, end);
        if start >= pos {
            out.push_str(&text[pos..start]);
            out.push_str(REDACTED);
        }
        pos = pos.max(end);
        i += 1;
    }
    out.push_str(&text[pos.min(text.len())..]);
    out
}

/// True when `text[start..end]` is not part of a longer word: the bytes around it are not letters, digits, `-` or
/// `_` (or there are none).
fn whole_token(text: &[u8], start: usize, end: usize) -> bool {
    let word = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_');
    !start
        .checked_sub(1)
        .and_then(|i| text.get(i))
        .is_some_and(word)
        && !text.get(end).is_some_and(word)
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Every `(start, end)` of `text` that reads as `needle` (lowercase) byte by byte, each byte plain (ASCII case
/// ignored) or escaped ([`escape_at`]). At each position at most one of the two can match a byte of a credential (a
/// credential holds no `%` or `\`), so each start is one pass over the needle.
fn find_disguised(text: &[u8], needle: &[u8]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for start in 0..text.len() {
        let mut at = start;
        let whole = needle.iter().all(|&want| {
            if text.get(at).is_some_and(|b| b.to_ascii_lowercase() == want) {
                at += 1;
                return true;
            }
            match (at < text.len()).then(|| escape_at(text, at)).flatten() {
                Some((b, len)) if b.to_ascii_lowercase() == want => {
                    at += len;
                    true
                }
                _ => false,
            }
        });
        if whole && !needle.is_empty() {
            found.push((start, at));
        }
    }
    found
}

/// `text` with percent and JSON escapes decoded and ASCII lowercased; `start[i]..end[i]` is where byte `i` came
/// from. The tests read redacted text through it.
#[cfg(test)]
struct Normalised {
    bytes: Vec<u8>,
    start: Vec<usize>,
    end: Vec<usize>,
}

#[cfg(test)]
impl Normalised {
    fn of(text: &[u8]) -> Normalised {
        let mut n = Normalised {
            bytes: Vec::with_capacity(text.len()),
            start: Vec::with_capacity(text.len()),
            end: Vec::with_capacity(text.len()),
        };
        let mut i = 0;
        while i < text.len() {
            let (byte, len) = escape_at(text, i).unwrap_or((text[i], 1));
            n.bytes.push(byte.to_ascii_lowercase());
            n.start.push(i);
            n.end.push(i + len);
            i += len;
        }
        n
    }
}

/// The byte an escape at `at` stands for and its length: `%XX` (a URL), `\/` and `\uXXXX` of an ASCII character
/// (JSON). Other JSON escapes stand for characters no credential holds.
fn escape_at(text: &[u8], at: usize) -> Option<(u8, usize)> {
    let hex_at = |j: usize| hex(*text.get(at + j)?);
    match (text[at], text.get(at + 1)) {
        (b'%', _) => Some(((hex_at(1)? << 4) | hex_at(2)?, 3)),
        (b'\\', Some(b'/')) => Some((b'/', 2)),
        (b'\\', Some(b'u')) => {
            let (a, b, c, d) = (hex_at(2)?, hex_at(3)?, hex_at(4)?, hex_at(5)?);
            // Only ASCII: a credential is ASCII, and a byte of the view is one byte of text.
            (a == 0 && b == 0 && c < 8).then_some(((c << 4) | d, 6))
        }
        _ => None,
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Every start of `needle` in `hay` (overlapping ones included).
fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return Vec::new();
    }
    let first = needle[0];
    (0..=hay.len() - needle.len())
        .filter(|&i| hay[i] == first && &hay[i..i + needle.len()] == needle)
        .collect()
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The base64 characters (standard, then URL-safe) that depend only on `secret`, for the secret starting at byte
/// offsets 0, 1 and 2 modulo 3 of the encoded data. Runs shorter than [`MIN_BASE64_RUN`] are left out.
fn base64_runs(secret: &[u8]) -> Vec<String> {
    let mut runs = Vec::new();
    for offset in 0..3usize {
        let mut data = vec![0u8; offset];
        data.extend_from_slice(secret);
        let encoded = base64(&data);
        // Character c covers bits 6c..6c+6; keep those entirely inside the secret's bits.
        let first = (8 * offset).div_ceil(6);
        let last = (8 * (offset + secret.len())) / 6;
        if last <= first || last - first < MIN_BASE64_RUN {
            continue;
        }
        let run = &encoded[first..last];
        let url_safe = run.replace('+', "-").replace('/', "_");
        if url_safe != run {
            runs.push(url_safe);
        }
        runs.push(run.to_string());
    }
    runs
}

/// Unpadded standard base64.
fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for k in 0..chars {
            out.push(char::from(STANDARD[((n >> (18 - 6 * k)) & 63) as usize]));
        }
    }
    out
}

/// The whole base64 token around `start..end` (the user part of a basic-auth credential, the padding).
fn base64_token(text: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    let b64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=');
    while start > 0 && b64(text[start - 1]) {
        start -= 1;
    }
    while end < text.len() && b64(text[end]) {
        end += 1;
    }
    (start, end)
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
