//! The Redis connection layer of both services, written once: one [`Conn`] type whatever the deployment mode
//! (standalone, Redis Cluster, Sentinel-managed primaries), ACL credentials and TLS ([`RedisAccess`]), and the
//! `[redis]` keys that choose the target ([`settings`]).
//!
//! - [`target`]: where the data lives ([`RedisTarget`]);
//! - [`conn`]: the connection of each mode behind one `ConnectionLike`, with the split of cross-slot pipelines a
//!   cluster needs;
//! - [`sentinel`]: the primary the sentinels name, followed across a failover;
//! - [`access`]: the clients with credentials and TLS applied, and [`connect`];
//! - [`settings`]: the `[redis]` connection keys validated into a target and its access.

pub mod access;
pub mod conn;
pub mod sentinel;
pub mod settings;
pub mod target;

pub use access::{Opener, RedisAccess, Timeouts, client, connect, url_has_credentials};
pub use conn::Conn;
pub use settings::{ConnectionKeys, SettingError};
pub use target::RedisTarget;
