//! Doom-loop detection: a model stuck repeating the same tool call, or cycling through a few.
//!
//! Every call is reduced to a fingerprint of its tool name and canonical input (object keys sorted, no
//! whitespace), so key order and formatting do not hide a repeat. Over the most recent calls the detector looks
//! for:
//! - a repeat: the last [`REPEAT_COUNT`] calls are identical;
//! - a cycle of period `p` in 2..=4: the last `2p` calls are the same `p`-call sequence twice, where that sequence
//!   is primitive (not itself a repetition of a shorter one, so `A A` is a repeat's business and `A B A B` is
//!   reported as period 2, never 4).
//!
//! The detector is plain data, persisted with the session by the run loop, so it sees calls across turns and
//! across replicas. Once a loop is reported it is reported again on every call that continues it, until the agent's
//! policy allows it: [`DoomLoopDetector::allow_pattern`] silences that one pattern while the model keeps repeating
//! it (a cycle counts as the same pattern whatever call of it comes last). The first call that does not continue
//! the allowed pattern ends the allowance, so falling back into it later is reported afresh.

use std::collections::VecDeque;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::permissions::Decision;

/// Identical calls in a row that make a repeat.
pub const REPEAT_COUNT: usize = 3;

/// Shortest and longest cycle periods detected.
const MIN_PERIOD: usize = 2;
const MAX_PERIOD: usize = 4;

/// Calls remembered; enough for two turns of the longest cycle, with room to spare.
const HISTORY: usize = 16;

/// What the agent does when a loop is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DoomPolicy {
    /// Ask the caller (a permission request; no answer in time means deny). The default.
    #[default]
    Ask,
    /// Let the call run anyway.
    Allow,
    /// Refuse the call with a tool error explaining the loop.
    Deny,
}

impl DoomPolicy {
    /// The permission decision this policy amounts to.
    pub fn decision(self) -> Decision {
        match self {
            DoomPolicy::Ask => Decision::Ask,
            DoomPolicy::Allow => Decision::Allow,
            DoomPolicy::Deny => Decision::Deny,
        }
    }
}

/// The shape of a detected loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DoomLoopKind {
    /// The same call [`REPEAT_COUNT`] times in a row.
    Repeat,
    /// The same sequence of `period` calls twice in a row.
    Cycle {
        /// Calls in one round of the cycle (2..=4).
        period: usize,
    },
}

/// A detected loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoomLoop {
    /// Repeat or cycle.
    pub kind: DoomLoopKind,
    /// The tools involved, in call order: one name for a repeat, one per call of the cycle's round.
    pub tools: Vec<String>,
    /// Identity of the pattern, independent of which call of a cycle came last; what an allowance remembers.
    signature: String,
}

impl DoomLoop {
    /// Identity of the pattern (equal for every report of the same loop, including rotations of a cycle).
    pub fn signature(&self) -> &str {
        &self.signature
    }
}

impl fmt::Display for DoomLoop {
    /// A sentence for the permission request and for the tool error the model sees when the loop is denied.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DoomLoopKind::Repeat => write!(
                f,
                "possible doom loop: `{}` was called {REPEAT_COUNT} times in a row with identical input",
                self.tools.join("")
            ),
            DoomLoopKind::Cycle { period } => write!(
                f,
                "possible doom loop: the same {period} calls ({}) were repeated with identical input",
                self.tools
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(" → ")
            ),
        }
    }
}

/// One remembered call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Call {
    tool: String,
    /// Hex SHA-256 (first 128 bits) of the tool name and canonical input.
    fingerprint: String,
}

/// Watches a session's tool calls for loops; see the module docs. Serializable so it can be stored with the
/// session and survive turns and replicas.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DoomLoopDetector {
    /// The most recent calls, oldest first, at most [`HISTORY`].
    history: VecDeque<Call>,
    /// Signature of the loop the policy allowed, while the model keeps to it.
    allowed: Option<String>,
}

impl DoomLoopDetector {
    /// A detector with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a call (before it runs) and returns the loop it completes or continues, if any, unless that loop
    /// was allowed with [`allow_pattern`](Self::allow_pattern). `input_json` is the raw tool input; text that is
    /// not JSON is compared as it is (trimmed), and empty input counts as `{}`.
    pub fn record(&mut self, tool: &str, input_json: &str) -> Option<DoomLoop> {
        self.history.push_back(Call {
            tool: tool.to_owned(),
            fingerprint: fingerprint(tool, input_json),
        });
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
        let found = self.detect();
        match found {
            Some(ref detected) if self.allowed.as_deref() == Some(detected.signature.as_str()) => {
                None
            }
            other => {
                // Either no loop or a different one: the model left the allowed pattern.
                self.allowed = None;
                other
            }
        }
    }

    /// Lets `detected` continue unreported; the allowance ends at the first call that does not continue it.
    pub fn allow_pattern(&mut self, detected: &DoomLoop) {
        self.allowed = Some(detected.signature.clone());
    }

    /// Forgets all history and any allowance. Not meant for turn boundaries (loops across turns must still be
    /// caught); for when the conversation is reset, for example after a fork or an explicit user override.
    pub fn reset(&mut self) {
        self.history.clear();
        self.allowed = None;
    }

    fn detect(&self) -> Option<DoomLoop> {
        let calls: Vec<&Call> = self.history.iter().collect();
        let n = calls.len();
        if n >= REPEAT_COUNT {
            let last = &calls[n - 1].fingerprint;
            if calls[n - REPEAT_COUNT..]
                .iter()
                .all(|c| &c.fingerprint == last)
            {
                return Some(DoomLoop {
                    kind: DoomLoopKind::Repeat,
                    tools: vec![calls[n - 1].tool.clone()],
                    signature: signature("repeat", &[last.as_str()]),
                });
            }
        }
        for period in MIN_PERIOD..=MAX_PERIOD {
            if n < 2 * period {
                break;
            }
            let round = &calls[n - period..];
            let previous = &calls[n - 2 * period..n - period];
            let same = round
                .iter()
                .zip(previous)
                .all(|(a, b)| a.fingerprint == b.fingerprint);
            if !same || !is_primitive(round) {
                continue;
            }
            return Some(DoomLoop {
                kind: DoomLoopKind::Cycle { period },
                tools: round.iter().map(|c| c.tool.clone()).collect(),
                signature: signature("cycle", &least_rotation(round)),
            });
        }
        None
    }
}

/// True when `round` is not a shorter sequence repeated (`A B A B` is not primitive, `A A B` is).
fn is_primitive(round: &[&Call]) -> bool {
    let n = round.len();
    !(1..n).any(|p| {
        n.is_multiple_of(p) && (p..n).all(|i| round[i].fingerprint == round[i - p].fingerprint)
    })
}

/// The lexicographically least rotation of the round's fingerprints, so `A B` and `B A` name the same cycle.
fn least_rotation<'a>(round: &[&'a Call]) -> Vec<&'a str> {
    let prints: Vec<&str> = round.iter().map(|c| c.fingerprint.as_str()).collect();
    (0..prints.len())
        .map(|start| {
            prints[start..]
                .iter()
                .chain(&prints[..start])
                .copied()
                .collect::<Vec<_>>()
        })
        .min()
        .unwrap_or(prints)
}

fn signature(kind: &str, fingerprints: &[&str]) -> String {
    format!("{kind}:{}", fingerprints.join(","))
}

fn fingerprint(tool: &str, input_json: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    // A separator that cannot occur in a tool name keeps ("ab", "c…") and ("a", "bc…") apart.
    hasher.update([0u8]);
    hasher.update(canonical_input(input_json).as_bytes());
    let digest = hasher.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// Canonical text of a tool input: parsed JSON re-serialized with sorted keys and no whitespace.
fn canonical_input(input_json: &str) -> String {
    let text = input_json.trim();
    if text.is_empty() {
        return "{}".to_owned();
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => {
            let mut out = String::new();
            write_canonical(&value, &mut out);
            out
        }
        Err(_) => text.to_owned(),
    }
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            // serde_json keeps insertion order in this workspace (preserve_order), so sort explicitly.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
#[path = "doom_loop_tests.rs"]
mod tests;
