//! Redis's own account of what a test's processes asked of it: a `MONITOR` connection that records every command
//! the server runs (the commands a Lua script runs included, marked as the script's), and `INFO commandstats`
//! counts, for tests that bound what an operation costs in Redis commands.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One command as `MONITOR` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitored {
    /// When Redis ran it (its clock, microseconds since the epoch: the machine's clock on loopback).
    pub at_us: u64,
    /// Sent by a client (a request, one round trip or part of a pipelined one), not run by a script.
    pub client: bool,
    /// Its name, lower case (`evalsha`, `get`, `hset`).
    pub name: String,
    /// A short form: the name and what its keys are (the part after the session's hash tag, `:lease`), for
    /// reports; an `evalsha` also names its script by the first 8 digits of its hash.
    pub short: String,
}

/// A `MONITOR` connection recording every command the server runs until dropped.
pub struct Monitor {
    seen: Arc<Mutex<Vec<Monitored>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Monitor {
    /// Starts monitoring the Redis on `127.0.0.1:<port>`; returns once Redis confirmed, so every command after
    /// this returns is recorded.
    pub async fn start(port: u16) -> Monitor {
        let mut reader = send(port, b"*1\r\n$7\r\nMONITOR\r\n").await;
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("MONITOR's reply");
        assert_eq!(line.trim_end(), "+OK", "MONITOR refused: {line}");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if let Some(m) = parse(line.trim_end()) {
                    sink.lock().expect("monitor lock").push(m);
                }
            }
        });
        Monitor { seen, task }
    }

    /// Everything recorded so far (and forgets it).
    pub fn take(&self) -> Vec<Monitored> {
        std::mem::take(&mut *self.seen.lock().expect("monitor lock"))
    }
}

/// A `MONITOR` line: `+<secs>.<micros> [<db> <addr>|lua] "<name>" "<arg>"...`.
fn parse(line: &str) -> Option<Monitored> {
    let rest = line.strip_prefix('+')?;
    let (at, rest) = rest.split_once(" [")?;
    let (secs, micros) = at.split_once('.')?;
    let at_us = secs.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?;
    let (source, rest) = rest.split_once("] ")?;
    let args: Vec<&str> = rest.split("\" \"").map(|a| a.trim_matches('"')).collect();
    let name = args.first()?.to_lowercase();
    let mut short = name.clone();
    if name == "evalsha"
        && let Some(sha) = args.get(1)
    {
        short.push(' ');
        short.push_str(sha.get(..8).unwrap_or(sha));
    }
    for arg in &args[1..] {
        // A key: `<prefix>{sess:<id>}:<what>` (the session's own keys) or `<prefix><what>` (global ones).
        if let Some((_, what)) = arg.rsplit_once('}') {
            short.push(' ');
            short.push_str(what.split(':').nth(1).unwrap_or(what));
        } else if arg.starts_with("e2e:") {
            short.push(' ');
            short.push_str(arg.rsplit(':').next().unwrap_or(arg));
        }
    }
    Some(Monitored {
        at_us,
        client: !source.ends_with(" lua"),
        name,
        short,
    })
}

/// `INFO commandstats` of the Redis on `127.0.0.1:<port>`: calls by command name (lower case). The `INFO` itself
/// counts as one call of `info`.
pub async fn command_calls(port: u16) -> BTreeMap<String, u64> {
    let mut reader = send(port, b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n").await;
    let mut header = String::new();
    reader.read_line(&mut header).await.expect("INFO's reply");
    let len: usize = header
        .trim_end()
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("INFO's reply is a bulk string: {header:?}"));
    let mut body = vec![0; len + 2];
    tokio::io::AsyncReadExt::read_exact(&mut reader, &mut body)
        .await
        .expect("INFO's text");
    let text = String::from_utf8_lossy(&body[..len]);
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        // cmdstat_get:calls=3,usec=12,...
        let Some((name, stats)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let n = stats
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        calls.insert(name.to_lowercase(), n);
    }
    calls
}

/// A new connection to the Redis on `127.0.0.1:<port>` that has sent `command` (RESP), ready to read the reply.
async fn send(port: u16, command: &[u8]) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to Redis");
    let mut reader = BufReader::new(stream);
    reader
        .get_mut()
        .write_all(command)
        .await
        .expect("send a command to Redis");
    reader
}

/// What `after` counts beyond `before`, by command (commands that did not run are left out).
pub fn calls_since(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(name, n)| {
            let d = n.saturating_sub(before.get(name).copied().unwrap_or(0));
            (d > 0).then(|| (name.clone(), d))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn monitor_lines_name_their_command_and_source() {
        let m = parse(
            r#"+1700000000.123456 [0 127.0.0.1:6000] "EVALSHA" "0123456789abcdef" "2" "e2e:t:{sess:s}:lease" "e2e:t:active""#,
        )
        .unwrap();
        assert!(m.client);
        assert_eq!(m.at_us, 1_700_000_000_123_456);
        assert_eq!(m.name, "evalsha");
        assert_eq!(m.short, "evalsha 01234567 lease active");
        let m = parse(r#"+1700000000.123457 [0 lua] "HSET" "e2e:t:{sess:s}:parts:m1" "f" "\x00v""#)
            .unwrap();
        assert!(!m.client);
        assert_eq!(m.name, "hset");
        assert_eq!(m.short, "hset parts");
        assert!(parse("+OK").is_none());
    }
}
