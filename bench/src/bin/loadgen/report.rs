//! The text report and the JSON document of a run.

use super::*;

/// Per-concurrency results of every path.
pub(super) struct Level {
    pub(super) c: usize,
    pub(super) rounds: usize,
    pub(super) paths: Vec<(Route, Agg)>,
}

pub(super) fn summaries(agg: &mut Agg) -> (Summary, Summary) {
    (summarize(&mut agg.ttft), summarize(&mut agg.gaps))
}

pub(super) fn ratio(gw: f64, floor: f64) -> String {
    if floor <= 0.0 {
        "n/a".into()
    } else {
        format!("{:.2}", gw / floor)
    }
}

/// A path's percentiles at one concurrency, and its streams' outcome.
#[derive(Debug, Clone, Copy)]
pub(super) struct PathSums {
    pub(super) route: Route,
    pub(super) ttft: Summary,
    pub(super) gap: Summary,
    pub(super) streams: usize,
    pub(super) completed: usize,
    pub(super) errors: usize,
}

/// Added TTFT (path − direct, nanoseconds, signed) at p50 and p99.
pub(super) fn added_ttft(path: &PathSums, direct: &PathSums) -> (f64, f64) {
    (
        path.ttft.p50 as f64 - direct.ttft.p50 as f64,
        path.ttft.p99 as f64 - direct.ttft.p99 as f64,
    )
}

/// The best peer's added TTFT ÷ the gateway's on route `ours` (gRPC or HTTP), at p50 and p99 (each percentile's
/// best peer separately), with the notes that qualify it (a peer with errors, one that completed nothing). `None`
/// without that route, the direct path or any measured peer.
pub(super) fn peer_ratio(
    sums: &[PathSums],
    ours: Route,
) -> Option<(Option<f64>, Option<f64>, Vec<String>)> {
    let direct = sums.iter().find(|s| s.route == Route::Direct)?;
    let gateway = sums.iter().find(|s| s.route == ours)?;
    let mut notes = Vec::new();
    let mut best: Option<(f64, f64)> = None;
    for peer in sums.iter().filter(|s| s.route.is_peer()) {
        if peer.errors > 0 {
            notes.push(format!(
                "{} failed {} of {} streams",
                peer.route.name(),
                peer.errors,
                peer.streams
            ));
        }
        if peer.completed == 0 {
            continue;
        }
        let (p50, p99) = added_ttft(peer, direct);
        best = Some(match best {
            None => (p50, p99),
            Some((b50, b99)) => (b50.min(p50), b99.min(p99)),
        });
    }
    if best.is_none() && notes.is_empty() {
        return None;
    }
    let (g50, g99) = added_ttft(gateway, direct);
    let div = |peer: f64, gw: f64| (gw > 0.0).then(|| peer / gw);
    match best {
        Some((b50, b99)) => Some((div(b50, g50), div(b99, g99), notes)),
        None => Some((None, None, notes)),
    }
}

pub(super) fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("{r:.1}×"))
}

pub(super) fn report(
    levels: &mut [Level],
    args: &Args,
    procs: &Procs,
    baseline_rss: &[u64],
    peers: &[String],
    load: &(String, String),
    out: &mut String,
) {
    use std::fmt::Write as _;
    run_header(out, "loadgen", &load.0, &load.1);
    let _ = writeln!(
        out,
        "- provider: {}; gRPC connections per relay: {}; {} streams back to back per worker; worker starts spread over max(stream length, C × {} µs)",
        schedule(args.chunks, args.interval_ms),
        args.grpc_conns,
        args.per_worker,
        args.ramp_us
    );
    for peer in peers {
        let _ = writeln!(out, "- peer {peer}");
    }
    let idle: Vec<String> = procs.0[..procs.loadgen()]
        .iter()
        .zip(baseline_rss)
        .map(|(p, rss)| format!("{} {rss} KiB", p.name))
        .collect();
    let _ = writeln!(out, "- idle RSS after warm-up: {}", idle.join(", "));
    for level in levels.iter_mut() {
        let sums = latency_table(level, out);
        added_table(level.c, &sums, out);
        resources_table(level, args, procs, baseline_rss, out);
        for (route, agg) in level.paths.iter() {
            for e in &agg.error_samples {
                let _ = writeln!(out, "\n- {} error: {e}", route.name());
            }
        }
    }
}

/// The level's heading and its latency table; the figures of each path.
fn latency_table(level: &mut Level, out: &mut String) -> Vec<PathSums> {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "\n### concurrency {} ({} rounds per path)\n",
        level.c, level.rounds
    );
    let _ = writeln!(
        out,
        "| path | streams | completed | errors | TTFT p50 ms | p99 | max | gap p50 ms | p99 | max |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    let mut sums = Vec::new();
    for (route, agg) in level.paths.iter_mut() {
        let (t, g) = summaries(agg);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            route.name(),
            agg.streams,
            agg.completed,
            agg.errors,
            ms(t.p50),
            ms(t.p99),
            ms(t.max),
            ms(g.p50),
            ms(g.p99),
            ms(g.max)
        );
        sums.push(PathSums {
            route: *route,
            ttft: t,
            gap: g,
            streams: agg.streams,
            completed: agg.completed,
            errors: agg.errors,
        });
    }
    sums
}

/// What each path adds over the direct one, and the ratios between the added figures.
fn added_table(c: usize, sums: &[PathSums], out: &mut String) {
    use std::fmt::Write as _;
    let find = |r: Route| sums.iter().find(|s| s.route == r).copied();
    if let Some(d) = find(Route::Direct) {
        let (dt, dg) = (d.ttft, d.gap);
        let _ = writeln!(
            out,
            "\n| added over direct | TTFT p50 ms | p99 | max | gap p50 ms | p99 | max |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for s in sums.iter().filter(|s| s.route != Route::Direct) {
            let (t, g) = (s.ttft, s.gap);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                s.route.name(),
                ms_diff(t.p50, dt.p50),
                ms_diff(t.p99, dt.p99),
                ms_diff(t.max, dt.max),
                ms_diff(g.p50, dg.p50),
                ms_diff(g.p99, dg.p99),
                ms_diff(g.max, dg.max)
            );
        }
        let add = |a: u64, b: u64| a as f64 - b as f64;
        // `num ÷ den` of the added figures, all six columns.
        let ratio_row = |label: String, num: &PathSums, den: &PathSums| {
            let (nt, ng, et, eg) = (num.ttft, num.gap, den.ttft, den.gap);
            format!(
                "| {label} | {} | {} | {} | {} | {} | {} |",
                ratio(add(nt.p50, dt.p50), add(et.p50, dt.p50)),
                ratio(add(nt.p99, dt.p99), add(et.p99, dt.p99)),
                ratio(add(nt.max, dt.max), add(et.max, dt.max)),
                ratio(add(ng.p50, dg.p50), add(eg.p50, dg.p50)),
                ratio(add(ng.p99, dg.p99), add(eg.p99, dg.p99)),
                ratio(add(ng.max, dg.max), add(eg.max, dg.max)),
            )
        };
        if let (Some(f), Some(g)) = (find(Route::Floor), find(Route::Gateway)) {
            let _ = writeln!(
                out,
                "{}",
                ratio_row("gateway ÷ floor (added)".into(), &g, &f)
            );
        }
        for door in [Route::GatewayHttp, Route::GatewayResponses] {
            if let (Some(h), Some(g)) = (find(door), find(Route::Gateway))
                && h.completed > 0
            {
                let label = format!("{} ÷ gateway (added; target ≤ 1.25×)", door.name());
                let _ = writeln!(out, "{}", ratio_row(label, &h, &g));
            }
        }
        if let Some(g) = find(Route::Gateway) {
            for peer in PEERS.iter().filter_map(|&r| find(r)) {
                if peer.completed > 0 {
                    let label = format!("{} ÷ gateway (added)", peer.route.name());
                    let _ = writeln!(out, "{}", ratio_row(label, &peer, &g));
                }
            }
        }
        best_peer_lines(c, sums, out);
    }
}

/// The best peer's added TTFT over ours, for each of our routes that ran, against the ≥ 30× target.
fn best_peer_lines(c: usize, sums: &[PathSums], out: &mut String) {
    use std::fmt::Write as _;
    for (ours, over) in [
        (Route::Gateway, "gateway's"),
        (Route::GatewayHttp, "gateway-http's"),
        (Route::GatewayResponses, "gateway-responses'"),
    ] {
        let Some((p50, p99, notes)) = peer_ratio(sums, ours) else {
            continue;
        };
        let _ = writeln!(
            out,
            "\n- best peer's added TTFT ÷ {over} added TTFT at concurrency {}: p50 **{}**, p99 **{}** (target ≥ 30×){}",
            c,
            times(p50),
            times(p99),
            if notes.is_empty() {
                String::new()
            } else {
                format!("; {}", notes.join(", "))
            }
        );
    }
}

/// CPU and memory of the processes while each path ran.
fn resources_table(
    level: &Level,
    args: &Args,
    procs: &Procs,
    baseline_rss: &[u64],
    out: &mut String,
) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "\n| rounds of | process | CPU ms | CPU µs per stream | CPU µs per text delta | text deltas per CPU-second | peak RSS KiB | RSS per open stream KiB |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for (route, agg) in level.paths.iter() {
        let relay = route.process().and_then(|name| procs.index(name));
        let deltas = (agg.completed * args.chunks) as f64;
        let rows = std::iter::once(0)
            .chain(relay)
            .chain(std::iter::once(procs.loadgen()));
        for k in rows {
            let cpu = agg.cpu.get(k).copied().unwrap_or(0) as f64;
            let rss_peak = agg.rss_peak.get(k).copied().unwrap_or(0);
            let per_stream = if agg.completed > 0 {
                format!("{:.1}", cpu / 1e3 / agg.completed as f64)
            } else {
                "-".into()
            };
            let (per_delta, per_sec) = if deltas > 0.0 && cpu > 0.0 {
                (
                    format!("{:.2}", cpu / 1e3 / deltas),
                    format!("{:.0}", deltas / (cpu / 1e9)),
                )
            } else {
                ("-".into(), "-".into())
            };
            let per_open = if k < procs.loadgen() {
                format!(
                    "{:.1}",
                    rss_peak.saturating_sub(baseline_rss.get(k).copied().unwrap_or(0)) as f64
                        / level.c as f64
                )
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                route.name(),
                procs.0[k].name,
                cpu / 1e6,
                per_stream,
                per_delta,
                per_sec,
                rss_peak,
                per_open
            );
        }
    }
}

pub(super) fn to_json(
    levels: &mut [Level],
    args: &Args,
    procs: &Procs,
    peers: &[String],
) -> serde_json::Value {
    let per_proc = |values: &[u64]| -> serde_json::Value {
        procs
            .0
            .iter()
            .zip(values)
            .map(|(p, v)| (p.name.to_owned(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let levels: Vec<serde_json::Value> = levels
        .iter_mut()
        .map(|l| {
            let mut sums = Vec::new();
            let paths: Vec<serde_json::Value> = l
                .paths
                .iter_mut()
                .map(|(p, agg)| {
                    let (t, g) = summaries(agg);
                    sums.push(PathSums {
                        route: *p,
                        ttft: t,
                        gap: g,
                        streams: agg.streams,
                        completed: agg.completed,
                        errors: agg.errors,
                    });
                    serde_json::json!({
                        "path": p.name(),
                        "streams": agg.streams,
                        "completed": agg.completed,
                        "errors": agg.errors,
                        "errors_sample": agg.error_samples,
                        "ttft_ns": {"n": t.n, "p50": t.p50, "p99": t.p99, "max": t.max},
                        "gap_ns": {"n": g.n, "p50": g.p50, "p99": g.p99, "max": g.max},
                        "cpu_ns": per_proc(&agg.cpu),
                        "rss_peak_kib": per_proc(&agg.rss_peak),
                        "wall_ns": agg.wall,
                    })
                })
                .collect();
            let mut level =
                serde_json::json!({"concurrency": l.c, "rounds": l.rounds, "paths": paths});
            for (ours, key) in [
                (Route::Gateway, "best_peer_added_ttft_over_gateway"),
                (Route::GatewayHttp, "best_peer_added_ttft_over_gateway_http"),
                (
                    Route::GatewayResponses,
                    "best_peer_added_ttft_over_gateway_responses",
                ),
            ] {
                if let Some((p50, p99, notes)) = peer_ratio(&sums, ours) {
                    level[key] = serde_json::json!({"p50": p50, "p99": p99, "notes": notes});
                }
            }
            level
        })
        .collect();
    serde_json::json!({
        "machine": machine(),
        "loadavg_end": loadavg(),
        "chunks": args.chunks,
        "interval_ms": args.interval_ms,
        "grpc_conns": args.grpc_conns,
        "per_worker": args.per_worker,
        "plan": args.plan,
        "peers": peers,
        "levels": levels,
    })
}
