//! Ascending, sortable ids: `<prefix>_<12 hex ms><4 hex sequence><8 hex random>`.
//!
//! Ids from one process are strictly increasing (the sequence breaks ties within a millisecond and carries over when
//! the clock stalls or steps back), so sorting ids sorts messages and parts chronologically; ids from different
//! replicas sort by millisecond. Fixed-width hex keeps lexicographic order equal to numeric order.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Last (millisecond, sequence) handed out, so ids never go backwards within a process.
static LAST: Mutex<(u64, u16)> = Mutex::new((0, 0));

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A new id with `prefix` (`ses`, `msg`, `prt`, `per`).
pub fn new(prefix: &str) -> String {
    let (ms, seq) = {
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        let now = now_ms();
        if now > last.0 {
            *last = (now, 0);
        } else if last.1 == u16::MAX {
            *last = (last.0 + 1, 0);
        } else {
            last.1 += 1;
        }
        *last
    };
    let random: u32 = rand::random();
    // Written digit by digit: `format!` with padded hex costs several times as much, and a prompt makes a few ids.
    let mut id = String::with_capacity(prefix.len() + 1 + 24);
    id.push_str(prefix);
    id.push('_');
    push_hex(&mut id, ms, 12);
    push_hex(&mut id, u64::from(seq), 4);
    push_hex(&mut id, u64::from(random), 8);
    id
}

/// Appends the low `digits` hex digits of `value`, zero-padded, lowercase.
fn push_hex(out: &mut String, value: u64, digits: u32) {
    for shift in (0..digits).rev() {
        let nibble = (value >> (shift * 4)) & 0xf;
        out.push(char::from(b"0123456789abcdef"[nibble as usize]));
    }
}

/// The millisecond timestamp encoded in an id, if it is one of ours.
pub fn millis(id: &str) -> Option<u64> {
    let (_, rest) = id.split_once('_')?;
    u64::from_str_radix(rest.get(..12)?, 16).ok()
}

#[cfg(test)]
#[path = "ids_tests.rs"]
mod tests;
