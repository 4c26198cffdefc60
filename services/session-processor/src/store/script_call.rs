//! One call of a Lua script, written straight into the `EVALSHA` command that carries it.
//!
//! `redis::ScriptInvocation` keeps every key and argument as a `Vec` of its own and copies them all into the command
//! when it is sent, so a call held two copies of its arguments until Redis answered (three with the packed request),
//! and a prompt's window writes and begin script allocated a buffer per argument. Here the keys come first (Redis reads
//! their count before them), every argument is written once into the command's one buffer, and protobuf arguments
//! are encoded into a scratch buffer of the thread's and copied in whole. Like `ScriptInvocation`, a node that does
//! not know the script (`NOSCRIPT`: a restart, a failover) is sent its body and the call is sent again; on Redis
//! Cluster the command routes by its first key, as any `EVALSHA` does.

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisResult, RedisWrite, Script, ToRedisArgs};

/// The largest scratch buffer a thread keeps for [`ScriptCall::message`] between calls (a larger message's is freed).
const SCRATCH_KEPT: usize = 64 * 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A script's call (module docs).
pub(super) struct ScriptCall<'s> {
    script: &'s Script,
    cmd: Cmd,
}

impl<'s> ScriptCall<'s> {
    /// A call of `script` on `keys`, all of them: arguments follow with [`ScriptCall::arg`].
    pub(super) fn new<I>(script: &'s Script, keys: I) -> Self
    where
        I: IntoIterator,
        I::IntoIter: ExactSizeIterator,
        I::Item: AsRef<[u8]>,
    {
        Self::write_keys(script, Cmd::new(), keys)
    }

    /// [`ScriptCall::new`] with room for the keys and `args` arguments of `bytes` in all allocated at once, for a
    /// large call whose size is known: grown argument by argument, its buffer doubles, and a call holds its
    /// command until Redis answers (with up to half of it unused, for every session's window write in flight).
    pub(super) fn with_room(
        script: &'s Script,
        keys: &[String],
        args: usize,
        bytes: usize,
    ) -> Self {
        let key_bytes: usize = keys.iter().map(String::len).sum();
        let count = keys.len().to_string();
        let head_bytes = "EVALSHA".len() + script.get_hash().len() + count.len();
        let cmd = Cmd::with_capacity(3 + keys.len() + args, head_bytes + key_bytes + bytes);
        Self::write_keys(script, cmd, keys)
    }

    fn write_keys<I>(script: &'s Script, mut cmd: Cmd, keys: I) -> Self
    where
        I: IntoIterator,
        I::IntoIter: ExactSizeIterator,
        I::Item: AsRef<[u8]>,
    {
        let keys = keys.into_iter();
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
        for key in keys {
            cmd.write_arg(key.as_ref());
        }
        ScriptCall { script, cmd }
    }

    /// Appends an argument.
    pub(super) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// Appends a protobuf message's encoding as one argument: encoded into this thread's scratch buffer, then copied
    /// into the command at once (the command's own argument writer takes every varint byte as a call of its own).
    pub(super) fn message<M: prost::Message>(&mut self, message: &M) -> &mut Self {
        SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            message.encode_raw(buf);
            self.cmd.arg(buf.as_slice());
            if buf.capacity() > SCRATCH_KEPT {
                *buf = Vec::new();
            }
        });
        self
    }

    /// The command as it goes out (for a pipeline).
    pub(super) fn cmd(&self) -> &Cmd {
        &self.cmd
    }

    /// The script and the command, for a pipeline that takes the command.
    pub(super) fn into_parts(self) -> (&'s Script, Cmd) {
        (self.script, self.cmd)
    }

    /// The script this calls.
    pub(super) fn script(&self) -> &Script {
        self.script
    }

    /// Runs the call; a node that does not know the script is sent its body first and asked again.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        conn: &mut impl ConnectionLike,
    ) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if no_script(&e) => {
                self.script.load_async(conn).await?;
                self.cmd.query_async(conn).await
            }
            other => other,
        }
    }
}

/// Sends `pipe`, which carries a call of `script`, as [`ScriptCall::invoke`] sends a lone call: a node that does not
/// know the script is sent its body first and the pipeline again.
pub(super) async fn query_loading<T: FromRedisValue>(
    script: &Script,
    pipe: &redis::Pipeline,
    conn: &mut impl ConnectionLike,
) -> RedisResult<T> {
    match pipe.query_async(conn).await {
        Err(e) if no_script(&e) => {
            script.load_async(conn).await?;
            pipe.query_async(conn).await
        }
        other => other,
    }
}

fn no_script(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "script_call_tests.rs"]
mod tests;
