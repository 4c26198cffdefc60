//! The keys created at run time, in Redis. Two keys, in one hash slot (`{keys}`), so a write and the epoch's step
//! are one script on a cluster too (`<P>` is `[redis] prefix`):
//!
//! | key | type | content |
//! |---|---|---|
//! | `<P>{keys}:table` | HASH | `<tenant>/<name>` → the key's record (JSON: name, tenant, role, models, `sha256` of its token, created and rotated ms) |
//! | `<P>{keys}:epoch` | STRING | a counter every change increments, in the same script as the change |
//!
//! Replicas poll the epoch and reload the table when it moved ([`super::cache`]). The table holds token digests
//! only: reading it gives no token.

use std::collections::BTreeSet;

use redis::{AsyncCommands, Script};
use serde::{Deserialize, Serialize};

use super::{Digest32, Key, Role, Source, from_hex, to_hex};

/// Adds a record unless its field exists; steps the epoch when it did.
const CREATE: &str = r"
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
return 1";

/// Replaces a record if it still is what the caller read; steps the epoch when it did.
const REPLACE: &str = r"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('INCR', KEYS[2])
return 1";

/// Deletes a record; steps the epoch when there was one.
const DELETE: &str = r"
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
return 1";

/// A key as Redis keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub tenant: String,
    pub role: Role,
    /// `None`: every model.
    pub models: Option<Vec<String>>,
    /// The token's SHA-256, hex.
    pub sha256: String,
    pub created_ms: i64,
    pub rotated_ms: i64,
}

impl Record {
    /// The key it describes, with its token's digest (`None` when the digest is not one).
    pub fn key(&self) -> Option<(Digest32, Key)> {
        let digest = from_hex(&self.sha256)?;
        Some((
            digest,
            Key {
                name: self.name.clone(),
                tenant: self.tenant.clone(),
                role: self.role,
                models: self
                    .models
                    .as_ref()
                    .map(|m| m.iter().cloned().collect::<BTreeSet<_>>()),
                source: Source::Api,
                created_ms: self.created_ms,
                rotated_ms: self.rotated_ms,
            },
        ))
    }

    /// The same record with the token whose digest is `digest`, rotated at `now_ms`.
    pub fn rotated(&self, digest: &Digest32, now_ms: i64) -> Record {
        Record {
            sha256: to_hex(digest),
            rotated_ms: now_ms,
            ..self.clone()
        }
    }
}

/// The hash field of a key: `/` is in no tenant or key name, so the field is unambiguous.
pub fn field(tenant: &str, name: &str) -> String {
    format!("{tenant}/{name}")
}

/// What a replace found.
#[derive(Debug, PartialEq, Eq)]
pub enum Replaced {
    Done,
    /// Another change came between the read and the write.
    Raced,
}

/// The keys in Redis, over one connection (any mode).
#[derive(Clone)]
pub struct KeyStore {
    conn: redis_kit::Conn,
    table: String,
    epoch: String,
}

impl KeyStore {
    /// The store under `prefix` on `conn`.
    pub fn new(conn: redis_kit::Conn, prefix: &str) -> KeyStore {
        KeyStore {
            conn,
            table: format!("{prefix}{{keys}}:table"),
            epoch: format!("{prefix}{{keys}}:epoch"),
        }
    }

    /// The epoch: 0 before the first change.
    pub async fn epoch(&self) -> redis::RedisResult<u64> {
        let v: Option<u64> = self.conn.clone().get(&self.epoch).await?;
        Ok(v.unwrap_or(0))
    }

    /// Every record, the ones that do not parse left out (and logged, by name only).
    pub async fn load(&self) -> redis::RedisResult<Vec<Record>> {
        let all: Vec<(String, String)> = self.conn.clone().hgetall(&self.table).await?;
        Ok(all
            .into_iter()
            .filter_map(|(field, json)| match serde_json::from_str::<Record>(&json) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(message = "skipping an unreadable key record", field = %field, error = %e);
                    None
                }
            })
            .collect())
    }

    /// One record.
    pub async fn get(
        &self,
        tenant: &str,
        name: &str,
    ) -> redis::RedisResult<Option<(String, Record)>> {
        let raw: Option<String> = self
            .conn
            .clone()
            .hget(&self.table, field(tenant, name))
            .await?;
        Ok(raw.and_then(|json| serde_json::from_str(&json).ok().map(|r| (json, r))))
    }

    /// Adds `record`; false when its tenant already has a key of its name.
    pub async fn create(&self, record: &Record) -> redis::RedisResult<bool> {
        let json = encode(record)?;
        let done: i64 = self
            .run(CREATE, &[field(&record.tenant, &record.name), json])
            .await?;
        Ok(done == 1)
    }

    /// Replaces the record that read as `old` with `new`.
    pub async fn replace(&self, old: &str, new: &Record) -> redis::RedisResult<Replaced> {
        let json = encode(new)?;
        let done: i64 = self
            .run(
                REPLACE,
                &[field(&new.tenant, &new.name), old.to_owned(), json],
            )
            .await?;
        Ok(if done == 1 {
            Replaced::Done
        } else {
            Replaced::Raced
        })
    }

    /// Deletes a key; false when there was none.
    pub async fn delete(&self, tenant: &str, name: &str) -> redis::RedisResult<bool> {
        let done: i64 = self.run(DELETE, &[field(tenant, name)]).await?;
        Ok(done == 1)
    }

    async fn run(&self, source: &str, args: &[String]) -> redis::RedisResult<i64> {
        let mut conn = self.conn.clone();
        let script = Script::new(source);
        let mut invocation = script.key(&self.table);
        invocation.key(&self.epoch);
        for a in args {
            invocation.arg(a);
        }
        invocation.invoke_async(&mut conn).await
    }

    /// Checks that Redis answers.
    pub async fn ping(&self) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map(|_| ())
    }
}

fn encode(record: &Record) -> redis::RedisResult<String> {
    serde_json::to_string(record).map_err(|e| {
        redis::RedisError::from((
            redis::ErrorKind::Client,
            "cannot encode a key record",
            e.to_string(),
        ))
    })
}
