//! Removing the snapshot repositories of deleted sessions.

use std::io;
use std::time::Duration;

use crate::config::SnapshotConfig;
use crate::store::Store;

use super::{SnapshotError, valid_session_id};

/// Deletes the snapshot repositories of sessions that no longer exist; returns how many went. Only directories
/// named like session ids are considered, so anything else under the root is left alone.
pub async fn sweep(config: &SnapshotConfig, store: &Store) -> Result<usize, SnapshotError> {
    let root = &config.root;
    let mut entries = match tokio::fs::read_dir(root).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut removed = 0;
    while let Some(entry) = entries.next_entry().await? {
        let Some(name) = entry.file_name().to_str().map(String::from) else {
            continue;
        };
        if !valid_session_id(&name) || !entry.file_type().await?.is_dir() {
            continue;
        }
        match store.sessions().get_session(&name).await {
            Ok(None) => {
                tokio::fs::remove_dir_all(entry.path()).await?;
                removed += 1;
            }
            Ok(Some(_)) => {}
            Err(e) => {
                // Unsure: keep it; the next sweep decides.
                tracing::warn!(message = "snapshot sweep cannot read a session", session_id = %name, error = %e);
            }
        }
    }
    Ok(removed)
}

/// Runs [`sweep`] every `interval` until `stop` is cancelled, so a deleted session's snapshots go from every
/// replica's snapshot root, including roots that are not shared.
pub async fn sweep_forever(
    config: SnapshotConfig,
    store: Store,
    interval: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match sweep(&config, &store).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(message = "removed snapshots of deleted sessions", count = n),
            Err(e) => tracing::warn!(message = "snapshot sweep failed", error = %e),
        }
    }
}
