//! Event ids: `<ms>-<seq>`, the same shape as Redis Stream entry ids, ordered by `(ms, seq)`.

use std::fmt;
use std::str::FromStr;

/// A session event's id. The loop's publisher assigns them in strictly increasing order; a stream entry carrying
/// several events is written under the id of its last one, so "entries after E" never skips an event after E.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EventId {
    /// Milliseconds (Redis server time, as the publisher estimates it).
    pub ms: u64,
    /// Sequence within the millisecond.
    pub seq: u64,
}

impl EventId {
    /// The id before every event: `0-0`.
    pub const ZERO: EventId = EventId { ms: 0, seq: 0 };

    /// The next id at `now_ms`: `now_ms-0` when the clock moved past `self`, otherwise `self` with the next
    /// sequence, so ids keep increasing when the clock stands still or goes back.
    pub fn next_at(self, now_ms: u64) -> EventId {
        if now_ms > self.ms {
            EventId { ms: now_ms, seq: 0 }
        } else {
            EventId {
                ms: self.ms,
                seq: self.seq.saturating_add(1),
            }
        }
    }
}

impl EventId {
    /// The id as a string (what `to_string` makes, in one allocation of the longest id's size instead of growing
    /// a string as it is written): a followed stream makes one per event it sends.
    pub fn to_id_string(self) -> String {
        use fmt::Write as _;
        // Two u64s in decimal and the dash.
        let mut s = String::with_capacity(41);
        let _ = write!(s, "{}-{}", self.ms, self.seq);
        s
    }
}

impl EventId {
    /// The id as text, made on the stack: what a stream writes into each event it sends.
    pub fn text(self) -> IdText {
        let mut text = IdText {
            bytes: [0; ID_TEXT_MAX],
            len: 0,
        };
        let mut digits = [0; 20];
        for part in [
            decimal(self.ms, &mut digits),
            b"-",
            decimal(self.seq, &mut [0; 20]),
        ] {
            let at = usize::from(text.len);
            text.bytes[at..at + part.len()].copy_from_slice(part);
            text.len += part.len() as u8;
        }
        text
    }
}

/// `n` in decimal, written at the end of `buf` (a u64 has at most 20 digits).
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// The longest id's text: two u64s in decimal and the dash.
const ID_TEXT_MAX: usize = 41;

/// An id's text ([`EventId::text`]).
#[derive(Debug, Clone, Copy)]
pub struct IdText {
    bytes: [u8; ID_TEXT_MAX],
    len: u8,
}

impl IdText {
    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and a dash were written.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An id that is not `<ms>` or `<ms>-<seq>` (decimal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event id {0:?}: expected `<ms>` or `<ms>-<seq>` (\"0\" for the start)")]
pub struct BadEventId(pub String);

impl FromStr for EventId {
    type Err = BadEventId;

    /// Parses `<ms>-<seq>`, or `<ms>` alone meaning `<ms>-0` (as XREAD reads it).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |x: &str| {
            (!x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
                .then(|| x.parse::<u64>().ok())
                .flatten()
        };
        let parsed = match s.split_once('-') {
            Some((ms, seq)) => number(ms).zip(number(seq)),
            None => number(s).map(|ms| (ms, 0)),
        };
        parsed
            .map(|(ms, seq)| EventId { ms, seq })
            .ok_or_else(|| BadEventId(s.to_string()))
    }
}

#[cfg(test)]
#[path = "id_tests.rs"]
mod tests;
