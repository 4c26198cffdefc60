//! The `_sum` / `_count` of a histogram family per label value, and a single series' value, in a Prometheus
//! `/metrics` text (read with `llm_telemetry::metrics_http::scrape`), so a benchmark can take the mean of what a
//! service timed itself, or what it counted, between two scrapes.

use std::collections::BTreeMap;

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

/// The value of one series, named exactly as the text writes it (`name` or `name{label="value"}`); 0 when absent
/// (a counter not yet exported has counted nothing).
pub fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
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
