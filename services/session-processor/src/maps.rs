//! Maps and sets keyed by ids (sessions, messages, models) that a prompt's path looks up a few dozen times: hashed with
//! foldhash, seeded per map, rather than SipHash, which costs several times as much for ids of this length.

/// A map keyed by ids.
pub type IdMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A set of ids.
pub type IdSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
