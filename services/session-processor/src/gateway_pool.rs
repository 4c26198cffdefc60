//! How the processor reaches llm-gateway replicas.
//!
//! gRPC runs many calls over one long-lived HTTP/2 connection, and a Kubernetes ClusterIP Service balances
//! connections, not calls: with one connection per processor replica, every step of that replica goes to one gateway
//! pod. `gateway.balance = "dns"` spreads calls instead: the processor resolves the gateway URL's host name (a
//! headless Service gives one address per ready pod) every `gateway.resolve_interval_ms`, keeps one connection per
//! address, and sends each step to the less loaded of two addresses picked at random (tower's power-of-two-choices
//! balancer inside tonic). Addresses that disappear from DNS are dropped (their streams in flight finish); new ones
//! take calls from the next step on. `gateway.url` may then also be a comma-separated list of URLs, each resolved.
//! Where DNS cannot list the pods, `gateway.connections` opens several connections to the one URL, which a
//! connection-balancing Service spreads over several pods, each step going to the less loaded of two.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use service_kit::tls::ClientTls;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

/// How calls are spread over gateway replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// A fixed number of HTTP/2 connections to the URL (one by default), each call on the less loaded of two picked
    /// at random. Behind a Service that balances connections, several connections reach several gateway pods; and
    /// each connection has its own budget for events the replica has not read yet (docs/operations.md, "A replica
    /// that falls far behind its gateway streams").
    Connection {
        /// How many (at least one).
        connections: usize,
    },
    /// Resolve the URL's host regularly and balance each call over every address.
    Dns {
        /// How often the host names are resolved again.
        interval: Duration,
    },
}

impl Default for Balance {
    fn default() -> Self {
        Balance::Connection { connections: 1 }
    }
}

/// The most connections `Balance::Connection` opens.
pub const MAX_CONNECTIONS: usize = 64;

/// One gateway URL split into what resolution needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    scheme: String,
    host: String,
    port: u16,
}

impl Target {
    /// Parses `http(s)://host[:port][/]`; the default port is the scheme's.
    pub fn parse(url: &str) -> Result<Target, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("`{url}`: {e}"))?;
        let scheme = uri
            .scheme_str()
            .filter(|s| *s == "http" || *s == "https")
            .ok_or_else(|| format!("`{url}`: must be an http(s) URL"))?
            .to_string();
        let host = uri
            .host()
            .ok_or_else(|| format!("`{url}`: no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        Ok(Target { scheme, host, port })
    }

    /// The host name (or address) of the URL.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port of the URL (the scheme's when it names none).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The endpoint of one resolved address. Over TLS the certificate is checked against the target's host name
    /// (or the configured server name), not the address.
    fn endpoint(
        &self,
        addr: SocketAddr,
        tls: Option<&ClientTls>,
    ) -> Result<Endpoint, tonic::transport::Error> {
        let url = format!("{}://{addr}", self.scheme);
        let endpoint = Endpoint::from_shared(url)?.tcp_nodelay(true);
        match tls {
            Some(tls) if self.scheme == "https" => {
                endpoint.tls_config(tls.tonic_config(Some(&self.host)))
            }
            _ => Ok(endpoint),
        }
    }
}

/// Parses a comma-separated list of gateway URLs.
pub fn parse_targets(urls: &str) -> Result<Vec<Target>, String> {
    let targets: Vec<Target> = urls
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(Target::parse)
        .collect::<Result<_, _>>()?;
    if targets.is_empty() {
        return Err("no URL".into());
    }
    Ok(targets)
}

/// A channel for `url` under `balance`, over TLS with `tls` for `https://` URLs. In DNS mode a background task keeps
/// the set of addresses current; it stops when the channel (every clone) is dropped.
pub fn channel(url: &str, balance: Balance, tls: Option<ClientTls>) -> Result<Channel, String> {
    match balance {
        Balance::Connection { connections } => {
            let endpoint = Endpoint::from_shared(url.to_string())
                .map_err(|e| format!("`{url}`: {e}"))?
                .tcp_nodelay(true);
            let endpoint = match &tls {
                Some(tls) if url.starts_with("https://") => endpoint
                    .tls_config(tls.tonic_config(None))
                    .map_err(|e| format!("`{url}`: TLS: {e}"))?,
                _ => endpoint,
            };
            if connections <= 1 {
                return Ok(endpoint.connect_lazy());
            }
            // The same endpoint under n keys: n connections, each call balanced over them (a list keyed by the
            // endpoint's URI would keep one).
            let (channel, tx) = Channel::balance_channel::<usize>(connections);
            for key in 0..connections {
                tx.try_send(Change::Insert(key, endpoint.clone()))
                    .map_err(|e| format!("`{url}`: {e}"))?;
            }
            Ok(channel)
        }
        Balance::Dns { interval } => {
            let targets = parse_targets(url)?;
            let (channel, tx) = Channel::balance_channel::<SocketAddr>(64);
            tokio::spawn(async move {
                let mut known = BTreeMap::new();
                loop {
                    let resolved = resolve_all(&targets).await;
                    for change in diff(&known, &resolved) {
                        let sent = match change {
                            Diff::Add(addr, i) => match targets[i].endpoint(addr, tls.as_ref()) {
                                Ok(endpoint) => {
                                    tracing::info!(message = "gateway address added", %addr);
                                    tx.send(Change::Insert(addr, endpoint)).await
                                }
                                Err(e) => {
                                    tracing::warn!(message = "gateway address unusable", %addr, error = %e);
                                    continue;
                                }
                            },
                            Diff::Remove(addr) => {
                                tracing::info!(message = "gateway address removed", %addr);
                                tx.send(Change::Remove(addr)).await
                            }
                        };
                        if sent.is_err() {
                            return; // the channel is gone
                        }
                    }
                    known = resolved;
                    tokio::time::sleep(interval).await;
                    if tx.is_closed() {
                        return;
                    }
                }
            });
            Ok(channel)
        }
    }
}

/// Every address of every target, with the index of the target it came from. A target that fails to resolve keeps
/// nothing this round (logged); the others are unaffected.
async fn resolve_all(targets: &[Target]) -> BTreeMap<SocketAddr, usize> {
    let mut out = BTreeMap::new();
    for (i, t) in targets.iter().enumerate() {
        match tokio::net::lookup_host((t.host.as_str(), t.port)).await {
            Ok(addrs) => {
                for a in addrs {
                    out.entry(a).or_insert(i);
                }
            }
            Err(e) => {
                tracing::warn!(message = "resolving the gateway failed", host = %t.host, error = %e);
            }
        }
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Diff {
    Add(SocketAddr, usize),
    Remove(SocketAddr),
}

/// What changes turn `known` into `resolved`. An empty resolution (DNS down, or every pod gone for a moment)
/// removes nothing: calls keep going to the last known addresses rather than to none.
fn diff(known: &BTreeMap<SocketAddr, usize>, resolved: &BTreeMap<SocketAddr, usize>) -> Vec<Diff> {
    if resolved.is_empty() {
        return Vec::new();
    }
    let old: BTreeSet<_> = known.keys().collect();
    let new: BTreeSet<_> = resolved.keys().collect();
    let mut out: Vec<Diff> = new
        .difference(&old)
        .map(|a| Diff::Add(**a, resolved[*a]))
        .collect();
    out.extend(old.difference(&new).map(|a| Diff::Remove(**a)));
    out
}

#[cfg(test)]
#[path = "gateway_pool_tests.rs"]
mod tests;
