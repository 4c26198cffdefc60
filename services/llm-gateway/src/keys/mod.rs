//! Caller identity: every token the gateway accepts is a named *key* of a *tenant*, with a role and the models it
//! may use (docs/operations.md, "Gateway keys").
//!
//! - [`file`]: `[keys.<name>]` and `server.auth_tokens` from the configuration, and the optional `[redis]` table;
//! - [`table`]: the keys of the configuration and of Redis, looked up by the SHA-256 of a presented token;
//! - [`caller`]: who a call is from ([`Caller`]): its key, the tenant it is attributed to, the models it may use;
//! - [`store`]: the keys created at run time, kept hashed in Redis with an epoch counter;
//! - [`cache`]: each replica's copy of them, reloaded when the epoch moves, so a lookup never waits on Redis;
//!
//! The admin API over them, `KeysService`, is `crate::admin`.
//!
//! Tokens are never kept, logged or shown: only their SHA-256 is stored and compared, a key's `Debug` shows no
//! digest, and errors name the key, never the token.

pub mod cache;
pub mod caller;
pub mod file;
pub mod store;
pub mod table;

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

pub use caller::{Caller, Refusal};
pub use table::KeyTable;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Calls (generations, embeddings, token counts, the catalog) for its own tenant.
    Caller,
    /// A caller that may name the tenant a call belongs to (`x-tenant`): the session-processor's key.
    Processor,
    /// A caller that may also manage keys.
    Admin,
}

impl Role {
    /// The role as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Caller => "caller",
            Role::Processor => "processor",
            Role::Admin => "admin",
        }
    }
}

/// Where a key is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The configuration file: changed only there (and by a reload).
    Config,
    /// Created through the admin API, kept in Redis.
    Api,
}

/// A key, without its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// Unique within its tenant.
    pub name: String,
    /// The tenant its calls belong to; `""` is the unnamed tenant.
    pub tenant: String,
    pub role: Role,
    /// The model names (ids or aliases) it may use; every served model when `None`.
    pub models: Option<BTreeSet<String>>,
    pub source: Source,
    /// Unix milliseconds (API keys; 0 for configuration keys).
    pub created_ms: i64,
    /// Unix milliseconds of the last rotation; 0 when never.
    pub rotated_ms: i64,
}

/// The SHA-256 of a token: what the gateway keeps and compares instead of the token.
pub type Digest32 = [u8; 32];

/// The SHA-256 of `token`.
pub fn digest(token: &str) -> Digest32 {
    Sha256::digest(token.as_bytes()).into()
}

/// `digest` as 64 lower-case hex digits (`token_sha256` in the configuration, the records in Redis).
pub fn to_hex(d: &Digest32) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64 hex digits (either case) back to a digest.
pub fn from_hex(hex: &str) -> Option<Digest32> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A new token: `gk_` and 64 hex digits from 32 random bytes (256 bits, so the SHA-256 alone protects it).
pub fn mint_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("gk_{}", to_hex(&bytes))
}

/// The rule for key and tenant names: 1 to 64 characters of `[A-Za-z0-9._-]`, starting with a letter or digit (the
/// processor's tenant-name rule, so a tenant is spelled the same on both services).
pub fn valid_name(name: &str) -> bool {
    service_kit::names::valid_tenant_name(name)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
