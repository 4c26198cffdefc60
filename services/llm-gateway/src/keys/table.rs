//! A set of keys looked up by the SHA-256 of a presented token: the configuration's (rebuilt on reload) and each
//! replica's copy of the keys in Redis ([`super::cache`]).
//!
//! The lookup hashes the presented token and finds the digest in a map. Comparing digests rather than tokens means
//! the time a lookup takes depends on the digest of what was presented, never on how much of a real token it
//! matched, so it cannot be used to guess a token byte by byte.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{Digest32, Key};

/// Keys by token digest, and by tenant and name. `Debug` shows the keys' tenants and names, no digest.
#[derive(Default, Clone)]
pub struct KeyTable {
    by_digest: HashMap<Digest32, Arc<Key>>,
    by_name: BTreeMap<(String, String), Arc<Key>>,
}

/// Why a set of keys cannot form a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clash {
    /// Two keys of one tenant share a name (tenant, name).
    Name(String, String),
    /// Two keys share a token: the second key's (tenant, name).
    Token(String, String),
}

impl std::fmt::Debug for KeyTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl KeyTable {
    /// A table of `keys`, each with its token's digest.
    pub fn build(keys: impl IntoIterator<Item = (Digest32, Key)>) -> Result<KeyTable, Clash> {
        let mut table = KeyTable::default();
        for (digest, key) in keys {
            let id = (key.tenant.clone(), key.name.clone());
            if table.by_name.contains_key(&id) {
                return Err(Clash::Name(id.0, id.1));
            }
            if table.by_digest.contains_key(&digest) {
                return Err(Clash::Token(id.0, id.1));
            }
            table.insert(digest, id, key);
        }
        Ok(table)
    }

    /// The key whose token has this digest.
    pub fn lookup(&self, digest: &Digest32) -> Option<&Arc<Key>> {
        self.by_digest.get(digest)
    }

    /// The key `name` of `tenant`.
    pub fn find(&self, tenant: &str, name: &str) -> Option<&Arc<Key>> {
        self.by_name.get(&(tenant.to_owned(), name.to_owned()))
    }

    /// Every key, ordered by tenant then name.
    pub fn keys(&self) -> impl Iterator<Item = &Arc<Key>> {
        self.by_name.values()
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

impl KeyTable {
    /// Like [`KeyTable::build`], leaving out (and logging, by name) a key that clashes with one before it: for the
    /// keys read from Redis, where one bad record must not hide every other key.
    pub fn build_lenient(keys: impl IntoIterator<Item = (Digest32, Key)>) -> KeyTable {
        let mut table = KeyTable::default();
        for (digest, key) in keys {
            let id = (key.tenant.clone(), key.name.clone());
            if table.by_name.contains_key(&id) || table.by_digest.contains_key(&digest) {
                tracing::warn!(message = "keys: leaving out a clashing key", tenant = %id.0, key = %id.1);
                continue;
            }
            table.insert(digest, id, key);
        }
        table
    }

    fn insert(&mut self, digest: Digest32, id: (String, String), key: Key) {
        let key = Arc::new(key);
        self.by_digest.insert(digest, key.clone());
        self.by_name.insert(id, key);
    }
}
