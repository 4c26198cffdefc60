//! Where a service's Redis data lives: one node, a cluster found through its seeds, or the primary a set of
//! sentinels names.

/// Where the data lives, chosen by `[redis] mode` (see docs/operations.md).
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis node.
    Standalone {
        /// `redis://` or `rediss://` URL of the node.
        url: String,
    },
    /// A Redis Cluster, found through any of its nodes.
    Cluster {
        /// URLs of some cluster nodes (seeds); the client learns the rest from them.
        seeds: Vec<String>,
    },
    /// A primary with replicas whose failover Redis Sentinel manages.
    Sentinel {
        /// URLs of the sentinels (not of the data nodes).
        sentinels: Vec<String>,
        /// The name the sentinels monitor the primary under (`sentinel monitor <name> ...`).
        master: String,
    },
}

impl RedisTarget {
    /// A standalone node at `url`.
    pub fn standalone(url: impl Into<String>) -> Self {
        Self::Standalone { url: url.into() }
    }

    /// The mode's name as the configuration spells it.
    pub fn mode(&self) -> &'static str {
        match self {
            Self::Standalone { .. } => "standalone",
            Self::Cluster { .. } => "cluster",
            Self::Sentinel { .. } => "sentinel",
        }
    }

    /// Every URL the target names.
    pub fn urls(&self) -> &[String] {
        match self {
            Self::Standalone { url } => std::slice::from_ref(url),
            Self::Cluster { seeds } => seeds,
            Self::Sentinel { sentinels, .. } => sentinels,
        }
    }
}

/// URLs may carry passwords, so only the mode and the number of addresses are shown.
impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("RedisTarget");
        d.field("mode", &self.mode())
            .field("addresses", &self.urls().len());
        if let Self::Sentinel { master, .. } = self {
            d.field("master", master);
        }
        d.finish()
    }
}
