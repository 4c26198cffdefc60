//! A validating JSON cursor for the decoders' fast paths, and what those decoders share around it ([`frame_object`]
//! for a whole frame, [`ResponseIdentity`] for the id and model both their paths keep).
//!
//! The OpenAI Chat and Gemini decoders recognise their most common chunk (one text delta) with this cursor instead of
//! building the whole envelope through serde: it walks the frame once, borrows the few strings it needs and skips the
//! rest. It is a *recogniser*, never the only parser: every method returns `None` as soon as anything is not exactly
//! what it expects (an unknown shape, an escaped key, a duplicate field, a number it does not parse, malformed JSON),
//! and the decoder then parses the frame the ordinary way, so the ordinary path decides every unusual case, including
//! the error a malformed frame becomes.
//!
//! What it accepts it must validate at least as strictly as `serde_json`, so that a frame accepted here would have
//! been accepted there too: strings reject control characters and invalid escapes, numbers follow the JSON grammar,
//! literals are exact, nesting is bounded, and nothing but whitespace may follow the value.

use std::borrow::Cow;

/// Deepest nesting a skipped value may have (`serde_json` allows 128; deeper values take the ordinary path).
const MAX_DEPTH: u32 = 64;

/// `0x0101…01`: one in every byte of a word, for the word-at-a-time scans.
const ONES: u64 = u64::from_le_bytes([1; 8]);
/// `0x8080…80`: the top bit of every byte.
const HIGHS: u64 = ONES << 7;

/// A JSON string as it stands in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawStr<'a> {
    /// The string with its quotes.
    quoted: &'a str,
    /// It contains at least one escape.
    escaped: bool,
}

impl<'a> RawStr<'a> {
    /// The text between the quotes, undecoded.
    fn raw(&self) -> &'a str {
        self.quoted
            .get(1..self.quoted.len().saturating_sub(1))
            .unwrap_or_default()
    }

    /// The text of a string without escapes (object keys): `None` for an escaped one, which the fast path leaves to
    /// serde.
    pub(crate) fn plain(&self) -> Option<&'a str> {
        (!self.escaped).then(|| self.raw())
    }

    /// The decoded text: borrowed from the frame when it has no escapes, else decoded by `serde_json` itself, so
    /// escapes, `\u` sequences and surrogate pairs mean exactly what they mean on the ordinary path. `None` when
    /// `serde_json` rejects the string (e.g. a lone surrogate).
    pub(crate) fn decode(&self) -> Option<Cow<'a, str>> {
        if self.escaped {
            serde_json::from_str::<String>(self.quoted)
                .ok()
                .map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(self.raw()))
        }
    }
}

/// A position in a JSON text.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        Cursor { text, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON whitespace and returns the next byte without consuming it.
    fn peek(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes `byte` (after whitespace) if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Consumes the literal `word` (`true`, `false`, `null`).
    fn literal(&mut self, word: &str) -> Option<()> {
        let end = self.pos + word.len();
        if self.bytes().get(self.pos..end) == Some(word.as_bytes()) {
            self.pos = end;
            Some(())
        } else {
            None
        }
    }

    /// True once only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// `null`, consumed.
    pub(crate) fn null(&mut self) -> Option<()> {
        (self.peek()? == b'n').then_some(())?;
        self.literal("null")
    }

    /// True if the next value is `null`, which is then consumed.
    pub(crate) fn take_null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.literal("null").is_some()
    }

    /// A string, or `null` as `None`.
    pub(crate) fn opt_str(&mut self) -> Option<Option<RawStr<'a>>> {
        if self.take_null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// A boolean, or `null` as `None`.
    pub(crate) fn opt_bool(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b'n' => self.literal("null").map(|()| None),
            b't' => self.literal("true").map(|()| Some(true)),
            b'f' => self.literal("false").map(|()| Some(false)),
            _ => None,
        }
    }

    /// A non-negative integer written as plain digits (no sign, fraction or exponent) that fits a `u64`, or `null`
    /// as `None`. Anything else (including numbers `serde_json` would accept) is left to the ordinary path.
    pub(crate) fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.take_null() {
            return Some(None);
        }
        let bytes = self.bytes();
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(&b) = bytes.get(self.pos) {
            if !b.is_ascii_digit() {
                break;
            }
            value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            self.pos += 1;
        }
        let digits = self.pos - start;
        // No digits, a leading zero, or a fraction or exponent: not a plain integer.
        if digits == 0
            || (digits > 1 && bytes.get(start) == Some(&b'0'))
            || matches!(bytes.get(self.pos), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        Some(Some(value))
    }

    /// A string token (after whitespace).
    pub(crate) fn string(&mut self) -> Option<RawStr<'a>> {
        if self.peek()? != b'"' {
            return None;
        }
        let bytes = self.bytes();
        let start = self.pos;
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            i = skip_plain(bytes, i);
            match *bytes.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match *bytes.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let hex = bytes.get(i + 2..i + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            i += 6;
                        }
                        _ => return None,
                    }
                }
                // A control character: invalid inside a JSON string.
                _ => return None,
            }
        }
        self.pos = i + 1;
        Some(RawStr {
            quoted: self.text.get(start..self.pos)?,
            escaped,
        })
    }

    /// Walks an object, calling `field` with each key; `field` must consume the value.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, RawStr<'a>) -> Option<()>,
    ) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if !self.eat(b':') {
                return None;
            }
            field(self, key)?;
            if self.eat(b',') {
                continue;
            }
            return self.eat(b'}').then_some(());
        }
    }

    /// Walks an array, calling `element` for each element; `element` must consume it.
    pub(crate) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat(b'[') {
            return None;
        }
        if self.eat(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            if self.eat(b',') {
                continue;
            }
            return self.eat(b']').then_some(());
        }
    }

    /// Skips any valid JSON value.
    pub(crate) fn skip(&mut self) -> Option<()> {
        self.skip_depth(0)
    }

    fn skip_depth(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|c, _| c.skip_depth(depth + 1)),
            b'[' => self.array(|c| c.skip_depth(depth + 1)),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, as `serde_json` accepts it.
    fn number(&mut self) -> Option<()> {
        let bytes = self.bytes();
        let mut i = self.pos;
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => i = digits(bytes, i),
            _ => return None,
        }
        if bytes.get(i) == Some(&b'.') {
            let end = digits(bytes, i + 1);
            if end == i + 1 {
                return None;
            }
            i = end;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let end = digits(bytes, i);
            if end == i {
                return None;
            }
            i = end;
        }
        self.pos = i;
        Some(())
    }
}

/// Recognises a whole frame as one object: calls `field` with each key (it must consume the value), then requires
/// nothing but whitespace after the object. `None` as soon as `field` or the JSON says no, so the decoder falls back
/// to its full parse.
#[inline]
pub(crate) fn frame_object<'a>(
    data: &'a str,
    field: impl FnMut(&mut Cursor<'a>, RawStr<'a>) -> Option<()>,
) -> Option<()> {
    let mut c = Cursor::new(data);
    c.object(field)?;
    c.at_end().then_some(())
}

/// Marks a field seen; `None` the second time (serde refuses duplicate fields, so a fast path must leave them to it).
pub(crate) fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// A string or `null` field, decoded (see [`RawStr::decode`]).
pub(crate) fn decode_opt<'a>(c: &mut Cursor<'a>) -> Option<Option<Cow<'a, str>>> {
    match c.opt_str()? {
        Some(s) => Some(Some(s.decode()?)),
        None => Some(None),
    }
}

/// A string or `null` field met for the first time ([`once`]), decoded ([`decode_opt`]).
pub(crate) fn once_decode<'a>(seen: &mut bool, c: &mut Cursor<'a>) -> Option<Option<Cow<'a, str>>> {
    once(seen)?;
    decode_opt(c)
}

/// The response id and model a Chat Completions or Gemini stream reports on its finish. Every chunk repeats them, so
/// the first non-empty value of each is kept (Azure's leading prompt-filter chunk has `id: ""` and `model: ""`). The
/// decoders' fast paths and full parses both feed it, so the two agree on it by construction.
#[derive(Debug, Default)]
pub(crate) struct ResponseIdentity {
    /// The provider's response id (`id`, `responseId`).
    pub(crate) id: String,
    /// The model that answered (`model`, `modelVersion`).
    pub(crate) model: String,
}

impl ResponseIdentity {
    /// Keeps `id` and `model` from one chunk, each unless a non-empty value is already kept.
    #[inline]
    pub(crate) fn offer(&mut self, id: Option<Cow<'_, str>>, model: Option<Cow<'_, str>>) {
        if self.id.is_empty()
            && let Some(id) = id
        {
            self.id = id.into_owned();
        }
        if self.model.is_empty()
            && let Some(model) = model
        {
            self.model = model.into_owned();
        }
    }

    /// The kept id and model, leaving both empty.
    pub(crate) fn take(&mut self) -> ResponseIdentity {
        std::mem::take(self)
    }
}

/// The index after the run of ASCII digits starting at `i`.
fn digits(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// The index of the first `"`, `\` or control character at or after `i` (or the length), eight bytes at a time.
fn skip_plain(bytes: &[u8], mut i: usize) -> usize {
    while let Some(word) = bytes.get(i..i + 8) {
        let mut array = [0u8; 8];
        array.copy_from_slice(word);
        let w = u64::from_le_bytes(array);
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        // A byte below 0x20, or equal to one of the two (the usual "has zero byte" test on the xor): the lowest set
        // bit marks the first such byte exactly; bits above it may be spurious and are never looked at.
        let found = ((w.wrapping_sub(ONES * 0x20) & !w)
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash))
            & HIGHS;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "json_scan_tests.rs"]
mod tests;

/// Generators for the fast-path equivalence tests: JSON objects written the way providers write them, with the
/// variations a fast path must get right or leave alone.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "json_scan_testgen.rs"]
pub(crate) mod testgen;
