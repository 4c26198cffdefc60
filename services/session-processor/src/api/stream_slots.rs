//! How many streams (`Prompt`, `Subscribe`, `Compact`) each tenant has open on this replica, bounded by
//! `server.max_streams_per_tenant`: every open stream holds memory here (its follower, its response buffers) and,
//! while it follows a session whose loop runs elsewhere, a share of Redis's blocking reads, so one tenant opening
//! streams without end would otherwise take them from every other tenant. The count is per replica: the bound a
//! deployment gives a tenant is this times its replicas.

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::gauge::Gauge;
use tonic::Status;

use super::status;
use crate::config::Caller;
use crate::maps::IdMap;

/// The open streams per tenant.
#[derive(Debug)]
pub struct StreamSlots {
    limit: usize,
    open: Mutex<IdMap<String, usize>>,
    /// Every tenant's open streams together, exported.
    gauge: Gauge,
}

/// One open stream's place in its tenant's count; dropping it (with the stream) frees the place.
#[derive(Debug)]
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    key: String,
}

impl StreamSlots {
    /// At most `limit` open streams per tenant; `gauge` follows the total.
    pub fn new(limit: usize, gauge: Gauge) -> Arc<StreamSlots> {
        Arc::new(StreamSlots {
            limit,
            open: Mutex::new(IdMap::default()),
            gauge,
        })
    }

    /// A place for one more stream of `caller`'s tenant (operators count together, as one more tenant), or
    /// `RESOURCE_EXHAUSTED` when it has `limit` open.
    pub fn take(self: &Arc<Self>, caller: &Caller) -> Result<StreamSlot, Status> {
        let key = key(caller).to_string();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let count = open.entry(key.clone()).or_insert(0);
        if *count >= self.limit {
            return Err(status::too_many_streams(self.limit));
        }
        *count += 1;
        self.gauge.inc();
        Ok(StreamSlot {
            slots: Arc::clone(self),
            key,
        })
    }
}

/// The count a caller's streams go to.
fn key(caller: &Caller) -> &str {
    match caller {
        Caller::Tenant(name) => name,
        // Not a tenant name: tenant names never contain a NUL.
        Caller::Operator => "\0operators",
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            self.slots.gauge.dec();
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
#[path = "stream_slots_tests.rs"]
mod tests;
