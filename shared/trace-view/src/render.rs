//! Traces as text: a list of recent traces, one line each, and one trace as an indented tree of its spans, children
//! in start order, each with its service, duration and the attributes a reader of a generation looks for.

use std::collections::HashMap;
use std::fmt::Write;

use crate::store::SpanRecord;

/// The attributes shown beside a span's name, when present, in this order.
const SHOWN: &[&str] = &[
    "gen_ai.conversation.id",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "gen_ai.tool.name",
    "rpc.grpc.status_code",
    "http.response.status_code",
    "error.type",
];

/// One line per trace: id, root span, services, span count, duration, and the session it belongs to.
pub fn list(traces: &[&[SpanRecord]]) -> String {
    if traces.is_empty() {
        return "no traces yet: send a prompt, then look again\n".to_string();
    }
    let mut out = String::new();
    for spans in traces {
        let Some(root) = roots(spans).into_iter().next() else {
            continue;
        };
        let session = spans
            .iter()
            .find_map(|s| s.attribute("gen_ai.conversation.id"))
            .unwrap_or("-");
        let mut services: Vec<&str> = spans.iter().map(|s| s.service.as_str()).collect();
        services.sort_unstable();
        services.dedup();
        let _ = writeln!(
            out,
            "{}  {}  {} spans  {}  session {}  ({})",
            root.trace_id,
            root.name,
            spans.len(),
            duration(root),
            session,
            services.join(", ")
        );
    }
    out
}

/// A trace as a tree: each span on its line, indented under its parent; spans whose parent was not received are
/// roots of their own.
pub fn tree(spans: &[SpanRecord]) -> String {
    let mut children: HashMap<&str, Vec<&SpanRecord>> = HashMap::new();
    for s in spans {
        children.entry(s.parent_id.as_str()).or_default().push(s);
    }
    for list in children.values_mut() {
        list.sort_by_key(|s| s.start_ns);
    }
    let mut out = String::new();
    if let Some(first) = spans.first() {
        let _ = writeln!(out, "trace {}", first.trace_id);
    }
    let mut stack: Vec<(&SpanRecord, usize)> =
        roots(spans).into_iter().rev().map(|s| (s, 0)).collect();
    while let Some((span, depth)) = stack.pop() {
        line(&mut out, span, depth);
        if let Some(kids) = children.get(span.span_id.as_str()) {
            stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
        }
    }
    out
}

/// The spans whose parent is not in the trace, in start order.
fn roots(spans: &[SpanRecord]) -> Vec<&SpanRecord> {
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut roots: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| !ids.contains(s.parent_id.as_str()))
        .collect();
    roots.sort_by_key(|s| s.start_ns);
    roots
}

fn line(out: &mut String, span: &SpanRecord, depth: usize) {
    let _ = write!(
        out,
        "{:indent$}{}  [{}] {}",
        "",
        span.name,
        span.service,
        duration(span),
        indent = depth * 2
    );
    if span.error {
        out.push_str("  ERROR");
    }
    for key in SHOWN {
        if let Some(value) = span.attribute(key) {
            let _ = write!(out, "  {}={value}", key.trim_start_matches("gen_ai."));
        }
    }
    out.push('\n');
}

/// A span's duration in milliseconds, three decimals.
fn duration(span: &SpanRecord) -> String {
    let ns = span.end_ns.saturating_sub(span.start_ns);
    format!("{}.{:03} ms", ns / 1_000_000, (ns / 1_000) % 1_000)
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
