//! How times, amounts and JSON print for people.

/// Nano-USD as dollars.
pub(super) fn usd(nano: i64) -> String {
    format!("${:.6}", nano as f64 / 1e9)
}

/// JSON indented for reading; the text as is when it is not JSON.
pub(super) fn pretty_json(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| json.to_string())
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub(super) fn rfc3339(t: prost_types::Timestamp) -> String {
    std::time::SystemTime::try_from(t)
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_default()
}

pub(super) fn first_line(s: &str) -> &str {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(100) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}
