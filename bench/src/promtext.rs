//! A Prometheus `/metrics` listener read over plain HTTP/1.1, and the `_sum` / `_count` of a histogram family per
//! label value in its text, so a benchmark can take the mean of what a service timed itself between two scrapes.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The body of `GET /metrics` at `addr`.
pub async fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut sock = tokio::net::TcpStream::connect(addr).await?;
    sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: metrics\r\nconnection: close\r\n\r\n")
        .await?;
    let mut reply = String::new();
    sock.read_to_string(&mut reply).await?;
    match reply.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(std::io::Error::other(format!(
            "not a 200 from {addr}: {}",
            reply.lines().next().unwrap_or("")
        ))),
    }
}

/// Sum (seconds) and count of one histogram family, by the value of `label`.
pub type Totals = BTreeMap<String, (f64, u64)>;

/// The `<family>_sum` and `<family>_count` series of a histogram in OpenMetrics text, keyed by `label`'s value.
pub fn histogram_totals(text: &str, family: &str, label: &str) -> Totals {
    let mut totals = Totals::new();
    let label_start = format!("{label}=\"");
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(family) else {
            continue;
        };
        let (is_sum, rest) = if let Some(r) = rest.strip_prefix("_sum{") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("_count{") {
            (false, r)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let Some(key) = labels
            .split_once(&label_start)
            .and_then(|(_, v)| v.split_once('"'))
            .map(|(v, _)| v.to_string())
        else {
            continue;
        };
        let entry = totals.entry(key).or_default();
        if is_sum {
            entry.0 = value.trim().parse().unwrap_or(0.0);
        } else {
            entry.1 = value.trim().parse::<f64>().map(|v| v as u64).unwrap_or(0);
        }
    }
    totals
}

/// What was added between two readings, per label value.
pub fn since(after: &Totals, before: &Totals) -> Totals {
    after
        .iter()
        .map(|(k, (sum, count))| {
            let (s0, c0) = before.get(k).copied().unwrap_or_default();
            (k.clone(), (sum - s0, count.saturating_sub(c0)))
        })
        .collect()
}

#[cfg(test)]
#[path = "promtext_tests.rs"]
mod tests;
