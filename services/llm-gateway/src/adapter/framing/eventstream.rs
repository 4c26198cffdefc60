//! Incremental decoder of the binary `application/vnd.amazon.eventstream` framing (AWS Bedrock streams,
//! docs/providers.md "Bedrock").
//!
//! A message is: a 12-byte prelude (total length, headers length, both big-endian u32, then the CRC32 of those 8
//! bytes), the headers, the payload, and the CRC32 of everything before it. A header is a 1-byte name length, the
//! name, a 1-byte value type and the typed value. Both CRCs are checked; a message that fails any check is a typed
//! [`FrameError`] and the decoder stops: a binary stream cannot be resynchronised once a length is wrong.
//!
//! Hot path: a message that arrives whole inside one read is handed to the callback as a slice of that read, with no
//! copy; only a message split across reads is assembled in one buffer that is cleared, never shrunk. Headers are
//! validated once and then read in place ([`Message::header`]), so decoding allocates nothing per message.

use std::mem;

/// Bytes of the prelude: total length, headers length, prelude CRC.
const PRELUDE: usize = 12;
/// Prelude plus the trailing message CRC: the smallest message.
const MIN_MESSAGE: usize = PRELUDE + 4;
/// Largest message accepted by default (the framing's own limit is 16 MiB).
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Largest headers section the framing allows.
const MAX_HEADERS: usize = 128 * 1024;

/// Why a stream could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The CRC32 of the 8 prelude bytes does not match.
    #[error(
        "eventstream prelude checksum mismatch (expected {expected:#010x}, computed {actual:#010x})"
    )]
    PreludeCrc { expected: u32, actual: u32 },
    /// The CRC32 of the whole message does not match.
    #[error(
        "eventstream message checksum mismatch (expected {expected:#010x}, computed {actual:#010x})"
    )]
    MessageCrc { expected: u32, actual: u32 },
    /// The total length is below the minimum or above the limit.
    #[error("eventstream message length {0} is out of range")]
    BadLength(u32),
    /// The headers length does not fit in the message.
    #[error("eventstream headers length {0} does not fit the message")]
    BadHeadersLength(u32),
    /// A header is truncated, has an unknown value type or a name or string that is not UTF-8.
    #[error("eventstream header at byte {0} is malformed")]
    BadHeader(usize),
    /// The body ended inside a message.
    #[error("eventstream body ended inside a message ({0} bytes pending)")]
    Truncated(usize),
}

/// A typed header value, borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderValue<'a> {
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Bytes(&'a [u8]),
    Str(&'a str),
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
}

/// One decoded message: its (validated) headers section and its payload, both borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    headers: &'a [u8],
    /// The payload bytes (JSON for Bedrock).
    pub payload: &'a [u8],
}

impl<'a> Message<'a> {
    /// The headers in order.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            bytes: self.headers,
            at: 0,
        }
    }

    /// The first header named `name`.
    pub fn header(&self, name: &str) -> Option<HeaderValue<'a>> {
        self.headers().find_map(|(n, v)| (n == name).then_some(v))
    }

    /// The string value of header `name`, if it is a string.
    pub fn header_str(&self, name: &str) -> Option<&'a str> {
        match self.header(name)? {
            HeaderValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Iterator over a validated headers section.
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a str, HeaderValue<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        // The section was validated by `check_headers`, so a failure here only ends the iteration.
        let (name, value, next) = parse_header(self.bytes, self.at).ok()?;
        self.at = next;
        Some((name, value))
    }
}

/// Parses the header at `at`: its name, value and the offset after it.
fn parse_header(b: &[u8], at: usize) -> Result<(&str, HeaderValue<'_>, usize), FrameError> {
    let bad = FrameError::BadHeader(at);
    let take = |from: usize, n: usize| {
        from.checked_add(n)
            .and_then(|end| b.get(from..end))
            .ok_or(bad)
    };
    let name_len = usize::from(*b.get(at).ok_or(bad)?);
    let name = std::str::from_utf8(take(at + 1, name_len)?).map_err(|_| bad)?;
    let ty_at = at + 1 + name_len;
    let ty = *b.get(ty_at).ok_or(bad)?;
    let v = ty_at + 1;
    let fixed = |n: usize| take(v, n);
    let (value, end) = match ty {
        0 => (HeaderValue::Bool(true), v),
        1 => (HeaderValue::Bool(false), v),
        2 => (HeaderValue::Byte(i8::from_be_bytes(arr(fixed(1)?)?)), v + 1),
        3 => (
            HeaderValue::Short(i16::from_be_bytes(arr(fixed(2)?)?)),
            v + 2,
        ),
        4 => (HeaderValue::Int(i32::from_be_bytes(arr(fixed(4)?)?)), v + 4),
        5 => (
            HeaderValue::Long(i64::from_be_bytes(arr(fixed(8)?)?)),
            v + 8,
        ),
        6 | 7 => {
            let len = usize::from(u16::from_be_bytes(arr(fixed(2)?)?));
            let raw = take(v + 2, len)?;
            let value = if ty == 6 {
                HeaderValue::Bytes(raw)
            } else {
                HeaderValue::Str(std::str::from_utf8(raw).map_err(|_| bad)?)
            };
            (value, v + 2 + len)
        }
        8 => (
            HeaderValue::Timestamp(i64::from_be_bytes(arr(fixed(8)?)?)),
            v + 8,
        ),
        9 => (HeaderValue::Uuid(arr(fixed(16)?)?), v + 16),
        _ => return Err(bad),
    };
    Ok((name, value, end))
}

fn arr<const N: usize>(s: &[u8]) -> Result<[u8; N], FrameError> {
    s.try_into().map_err(|_| FrameError::BadHeader(0))
}

fn check_headers(b: &[u8]) -> Result<(), FrameError> {
    let mut at = 0;
    while at < b.len() {
        let (_, _, next) = parse_header(b, at)?;
        at = next;
    }
    Ok(())
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(word)
}

/// Incremental decoder: feed it the body reads in order.
#[derive(Debug)]
pub struct EventStreamDecoder {
    /// The message being assembled across reads (empty when the last read ended on a message boundary).
    pending: Vec<u8>,
    max_message: usize,
    failed: Option<FrameError>,
}

impl Default for EventStreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl EventStreamDecoder {
    /// A decoder accepting messages up to [`DEFAULT_MAX_MESSAGE`] bytes.
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_MESSAGE)
    }

    /// A decoder accepting messages up to `max_message` bytes (at least the 16-byte minimum).
    pub fn with_limit(max_message: usize) -> Self {
        EventStreamDecoder {
            pending: Vec::new(),
            max_message: max_message.max(MIN_MESSAGE),
            failed: None,
        }
    }

    /// The largest message accepted.
    pub fn limit(&self) -> usize {
        self.max_message
    }

    /// Decodes every message completed by `chunk`, calling `on_message` for each in order. After an error the
    /// decoder is stopped and returns that error for every later call.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        on_message: &mut dyn FnMut(Message<'_>),
    ) -> Result<(), FrameError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let result = self.feed_inner(chunk, on_message);
        if let Err(e) = result {
            self.failed = Some(e);
            self.pending = Vec::new();
        }
        result
    }

    /// The body ended: an error if it ended inside a message.
    pub fn finish(&mut self) -> Result<(), FrameError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.pending.is_empty() {
            Ok(())
        } else {
            let e = FrameError::Truncated(self.pending.len());
            self.failed = Some(e);
            Err(e)
        }
    }

    fn feed_inner(
        &mut self,
        mut input: &[u8],
        on_message: &mut dyn FnMut(Message<'_>),
    ) -> Result<(), FrameError> {
        if !self.pending.is_empty() {
            // Complete the prelude first, then the message it announces.
            if self.pending.len() < PRELUDE {
                let n = (PRELUDE - self.pending.len()).min(input.len());
                self.pending.extend_from_slice(&input[..n]);
                input = &input[n..];
                if self.pending.len() < PRELUDE {
                    return Ok(());
                }
            }
            let total = self.prelude(&self.pending)?;
            let n = (total - self.pending.len()).min(input.len());
            self.pending.extend_from_slice(&input[..n]);
            input = &input[n..];
            if self.pending.len() < total {
                return Ok(());
            }
            let whole = mem::take(&mut self.pending);
            let decoded = decode_message(&whole).map(&mut *on_message);
            self.pending = whole;
            self.pending.clear();
            decoded?;
        }
        while input.len() >= PRELUDE {
            let total = self.prelude(input)?;
            if input.len() < total {
                break;
            }
            on_message(decode_message(&input[..total])?);
            input = &input[total..];
        }
        if !input.is_empty() {
            if input.len() >= PRELUDE {
                self.pending.reserve(self.prelude(input)?);
            }
            self.pending.extend_from_slice(input);
        }
        Ok(())
    }

    /// Checks the prelude at the start of `b` (at least 12 bytes) and returns the message's total length.
    fn prelude(&self, b: &[u8]) -> Result<usize, FrameError> {
        let expected = be32(b, 8);
        let actual = crc32fast::hash(&b[..8]);
        if expected != actual {
            return Err(FrameError::PreludeCrc { expected, actual });
        }
        let total = be32(b, 0);
        let headers = be32(b, 4);
        let total_len = usize::try_from(total).map_err(|_| FrameError::BadLength(total))?;
        if !(MIN_MESSAGE..=self.max_message).contains(&total_len) {
            return Err(FrameError::BadLength(total));
        }
        let headers_len =
            usize::try_from(headers).map_err(|_| FrameError::BadHeadersLength(headers))?;
        if headers_len > total_len - MIN_MESSAGE || headers_len > MAX_HEADERS {
            return Err(FrameError::BadHeadersLength(headers));
        }
        Ok(total_len)
    }
}

/// Decodes one whole message whose prelude was already checked.
fn decode_message(b: &[u8]) -> Result<Message<'_>, FrameError> {
    let total = b.len();
    let expected = be32(b, total - 4);
    let actual = crc32fast::hash(&b[..total - 4]);
    if expected != actual {
        return Err(FrameError::MessageCrc { expected, actual });
    }
    let headers_len = be32(b, 4) as usize;
    let headers = &b[PRELUDE..PRELUDE + headers_len];
    check_headers(headers).map_err(|e| match e {
        FrameError::BadHeader(at) => FrameError::BadHeader(PRELUDE + at),
        other => other,
    })?;
    Ok(Message {
        headers,
        payload: &b[PRELUDE + headers_len..total - 4],
    })
}

/// Encodes one message with string headers: what the tests, benches and fixtures use to author streams.
pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        head.push(name.len() as u8);
        head.extend_from_slice(name.as_bytes());
        head.push(7);
        head.extend_from_slice(&(value.len() as u16).to_be_bytes());
        head.extend_from_slice(value.as_bytes());
    }
    let total = (MIN_MESSAGE + head.len() + payload.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(head.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
#[path = "eventstream_tests.rs"]
mod tests;
