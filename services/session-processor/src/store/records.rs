//! What this replica last knew of each session's record and prompt model: a `Prompt` starts from it instead of
//! reading Redis, and the begin script checks it is still what Redis holds (else nothing is written and the prompt
//! reads afresh: `Begin::Stale`). So a stale entry costs one round trip and is never acted upon.
//!
//! The store keeps an entry current with every write of the record it makes (creation, updates, the loop's totals)
//! and every prompt model it stores; a write by another replica is what makes an entry stale. Bounded: past
//! [`CAPACITY`] entries, one is dropped for each added.

use std::sync::Mutex;

use crate::maps::IdMap;

/// Sessions remembered at most (a few hundred bytes each).
pub const CAPACITY: usize = 16_384;

/// A session's record as stored and its prompt model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// The record's stored bytes.
    pub bytes: Vec<u8>,
    /// The model the session's latest prompt ran with (`{sess:<id>}:model`); `None` before any.
    pub model: Option<String>,
}

/// The remembered records, by session id.
#[derive(Debug)]
pub struct Records {
    map: Mutex<IdMap<String, Known>>,
    capacity: usize,
}

impl Default for Records {
    fn default() -> Self {
        Records::with_capacity(CAPACITY)
    }
}

impl Records {
    /// At most `capacity` entries (at least one).
    pub fn with_capacity(capacity: usize) -> Records {
        Records {
            map: Mutex::new(IdMap::default()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IdMap<String, Known>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is known of `id`.
    pub fn get(&self, id: &str) -> Option<Known> {
        self.lock().get(id).cloned()
    }

    /// Remembers `id`'s record and prompt model.
    pub fn put(&self, id: &str, known: Known) {
        let mut map = self.lock();
        if !map.contains_key(id)
            && map.len() >= self.capacity
            && let Some(evicted) = map.keys().next().cloned()
        {
            map.remove(&evicted);
        }
        map.insert(id.to_string(), known);
    }

    /// The record of `id` was written as `bytes` (its prompt model unchanged); a session not remembered stays so.
    pub fn record_written(&self, id: &str, bytes: &[u8]) {
        if let Some(k) = self.lock().get_mut(id) {
            bytes.clone_into(&mut k.bytes);
        }
    }

    /// The prompt model of `id` was set to `model`; a session not remembered stays so.
    pub fn model_written(&self, id: &str, model: &str) {
        if let Some(k) = self.lock().get_mut(id) {
            k.model = Some(model.to_string());
        }
    }

    /// Forgets `id` (deleted, or found stale).
    pub fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Entries held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
