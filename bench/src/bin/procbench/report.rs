//! The text report and the JSON document of a run.

use super::*;

/// One line of the report: the mean time from a prompt reaching the processor's engine to the end of each phase.
pub(super) fn phases_line(phases: &promtext::Totals) -> String {
    let mean = |phase: &str| match phases.get(phase) {
        Some((sum, n)) if *n > 0 => format!("{:.3} ms", sum * 1e3 / *n as f64),
        _ => "-".into(),
    };
    let prompts = phases.get("begun").map_or(0, |(_, n)| *n);
    format!(
        "Critical path, the processor's own clock (mean over {prompts} prompts, from the prompt reaching the engine): lease, user message and history stored/read **{}**; gateway call started **{}**; first gateway event **{}**",
        mean("begun"),
        mean("gateway_called"),
        mean("first_event")
    )
}

pub(super) fn per_thousand(n: u64, deltas: u64) -> String {
    if deltas == 0 {
        "-".into()
    } else {
        format!("{:.1}", n as f64 * 1000.0 / deltas as f64)
    }
}

pub(super) fn per_unit(n: u64, units: usize) -> String {
    if units == 0 {
        "-".into()
    } else {
        format!("{:.2}", n as f64 / units as f64)
    }
}

/// Header facts of the run.
pub(super) struct RunInfo {
    /// The deployment, as `--redis` names it.
    pub(super) setup: String,
    pub(super) redis: String,
    pub(super) baseline_rss: [u64; 5],
    /// The processor's anonymous RSS (KiB) after the warm-up.
    pub(super) baseline_anon: u64,
    pub(super) load_start: String,
    pub(super) load_end: String,
}

pub(super) fn summaries(agg: &mut Agg) -> (Summary, Summary, Summary) {
    (
        summarize(&mut agg.ttft),
        summarize(&mut agg.gaps),
        summarize(&mut agg.last),
    )
}

pub(super) fn report(levels: &mut [Level], args: &Args, run: &RunInfo, out: &mut String) {
    use std::fmt::Write as _;
    run_header(
        out,
        &format!("procbench ({})", run.setup),
        &run.load_start,
        &run.load_end,
    );
    let _ = writeln!(
        out,
        "- provider: {}; {} prompts (session workers) or streams (direct workers) back to back per worker; {} gRPC connections per client; worker starts spread over max(stream length, 2·S × {} µs)",
        schedule(args.chunks, args.interval_ms),
        args.per_worker,
        args.grpc_conns,
        args.ramp_us
    );
    let _ = writeln!(out, "- Redis: {}", run.redis);
    let _ = writeln!(
        out,
        "- idle RSS after warm-up: session-processor {} KiB, redis-server {} KiB, llm-gateway {} KiB",
        run.baseline_rss[PROCESSOR], run.baseline_rss[REDIS], run.baseline_rss[2]
    );
    for level in levels.iter_mut() {
        latency_table(level, out);
        let deltas = level.session_deltas(args.chunks);
        let _ = writeln!(
            out,
            "\nThroughput: **{:.1} prompts/s**, {:.1} sessions/s ({} completed prompts of {} sessions in {:.2} s{})",
            level.prompts_per_second(),
            level.sessions_per_second(),
            level.session.completed,
            level.s * level.rounds,
            level.wall as f64 / 1e9,
            if args.no_direct {
                ", no direct streams beside them"
            } else {
                ", beside as many direct gateway streams"
            }
        );
        resources_table(level, args, run, deltas, out);
        redis_table(level, deltas, out);
        for (name, agg) in [("session", &level.session), ("direct", &level.direct)] {
            for e in &agg.error_samples {
                let _ = writeln!(out, "\n- {name} error: {e}");
            }
        }
    }
}

/// The level's heading and the latencies of both halves, with what the processor adds.
fn latency_table(level: &mut Level, out: &mut String) {
    use std::fmt::Write as _;
    let beside = if level.direct.streams == 0 {
        " (no direct gateway streams beside them)".to_owned()
    } else {
        format!(" + {} direct gateway streams", level.s)
    };
    let _ = writeln!(
        out,
        "\n### {} concurrent sessions{beside} ({} round{}, {:.1} s)\n",
        level.s,
        level.rounds,
        if level.rounds == 1 { "" } else { "s" },
        level.wall as f64 / 1e9
    );
    let _ = writeln!(
        out,
        "| path | streams | completed | errors | text events per stream | first text p50 ms | p99 | max | gap p50 ms | p99 | max | last text p50 ms | p99 | max |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut sums = Vec::new();
    for (name, agg) in [
        ("session (processor)", &mut level.session),
        ("direct (gateway)", &mut level.direct),
    ] {
        let (t, g, l) = summaries(agg);
        sums.push((t, g, l));
        if agg.streams == 0 {
            continue;
        }
        let per_stream = if agg.completed > 0 {
            format!("{:.1}", agg.events as f64 / agg.completed as f64)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {per_stream} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            agg.streams,
            agg.completed,
            agg.errors,
            ms(t.p50),
            ms(t.p99),
            ms(t.max),
            ms(g.p50),
            ms(g.p99),
            ms(g.max),
            ms(l.p50),
            ms(l.p99),
            ms(l.max)
        );
    }
    let ((st, sg, sl), (dt, dg, dl)) = (sums[0], sums[1]);
    if level.direct.streams == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "| **added by the processor** | | | | | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        ms_diff(st.p50, dt.p50),
        ms_diff(st.p99, dt.p99),
        ms_diff(st.max, dt.max),
        ms_diff(sg.p50, dg.p50),
        ms_diff(sg.p99, dg.p99),
        ms_diff(sg.max, dg.max),
        ms_diff(sl.p50, dl.p50),
        ms_diff(sl.p99, dl.p99),
        ms_diff(sl.max, dl.max)
    );
}

/// CPU and memory of each process over the level.
fn resources_table(level: &Level, args: &Args, run: &RunInfo, deltas: u64, out: &mut String) {
    use std::fmt::Write as _;
    let all_deltas = deltas + (level.direct.completed * args.chunks) as u64;
    let _ = writeln!(
        out,
        "\n| process | CPU ms | CPU µs per delta | peak RSS KiB | RSS growth per open session KiB |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (k, name) in PROCS.iter().enumerate() {
        // The processor and Redis serve the session half only; the others serve (or read) both halves.
        let d = if k <= REDIS { deltas } else { all_deltas };
        let per_delta = if d > 0 && level.cpu[k] > 0 {
            format!("{:.2}", level.cpu[k] as f64 / 1e3 / d as f64)
        } else {
            "-".into()
        };
        // Redis keeps what the sessions stored, so its growth is taken from the level's start; the processes
        // that keep nothing per session are measured from their idle RSS after the warm-up.
        let base = if k == REDIS {
            level.rss_start[k]
        } else {
            run.baseline_rss[k]
        };
        let growth = if k <= REDIS && level.rss_peak[k] > 0 {
            format!(
                "{:.1}",
                level.rss_peak[k].saturating_sub(base) as f64 / level.s as f64
            )
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "| {name} | {:.1} | {per_delta} | {} | {growth} |",
            level.cpu[k] as f64 / 1e6,
            if level.rss_peak[k] > 0 {
                level.rss_peak[k].to_string()
            } else {
                "-".into()
            }
        );
    }
    if level.anon_peak > 0 {
        let _ = writeln!(
            out,
            "\nThe processor's own memory (`RssAnon`: heap and stacks, without the executable's pages that `VmRSS` counts as code runs): idle {} KiB, peak {} KiB, **{:.1} KiB per open session**",
            run.baseline_anon,
            level.anon_peak,
            level.anon_peak.saturating_sub(run.baseline_anon) as f64 / level.s as f64
        );
    }
}

/// The Redis commands the level caused, by command, and the prompt phases.
fn redis_table(level: &Level, deltas: u64, out: &mut String) {
    use std::fmt::Write as _;
    let total = level.redis.total();
    let prompts = level.session.streams;
    let _ = writeln!(
        out,
        "\nRedis: {total} commands executed for {deltas} text deltas delivered in {} completed prompts ({} sessions): **{} per 1 000 deltas**, {} per prompt; of them {} script calls (EVALSHA/EVAL/FCALL; the commands a script runs are counted as well)\n",
        level.session.completed,
        level.s * level.rounds,
        per_thousand(total, deltas),
        per_unit(total, prompts),
        level.redis.script_calls()
    );
    let st = &level.store;
    let _ = writeln!(
        out,
        "The processor's own count: {} Redis requests (a command or a pipeline: one round trip each), **{} per prompt**; replica waits: {} acknowledged, {} short, {} skipped\n",
        st.requests,
        per_unit(st.requests, prompts),
        st.acknowledged,
        st.short,
        st.skipped
    );
    let _ = writeln!(out, "{}\n", phases_line(&level.phases));
    let _ = writeln!(out, "| command | calls | per prompt | per 1 000 deltas |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (name, n) in level.redis.ranked() {
        let _ = writeln!(
            out,
            "| {name} | {n} | {} | {} |",
            per_unit(n, prompts),
            per_thousand(n, deltas)
        );
    }
}

pub(super) fn to_json(levels: &mut [Level], args: &Args, run: &RunInfo) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = levels
        .iter_mut()
        .map(|l| {
            let deltas = l.session_deltas(args.chunks);
            let half = |agg: &mut Agg| {
                let (t, g, last) = summaries(agg);
                serde_json::json!({
                    "streams": agg.streams,
                    "completed": agg.completed,
                    "errors": agg.errors,
                    "errors_sample": agg.error_samples,
                    "text_events": agg.events,
                    "first_text_ns": {"n": t.n, "p50": t.p50, "p99": t.p99, "max": t.max},
                    "gap_ns": {"n": g.n, "p50": g.p50, "p99": g.p99, "max": g.max},
                    "last_text_ns": {"n": last.n, "p50": last.p50, "p99": last.p99, "max": last.max},
                })
            };
            let session = half(&mut l.session);
            let direct = half(&mut l.direct);
            let named = |v: &[u64; 5]| -> serde_json::Value {
                PROCS
                    .iter()
                    .zip(v)
                    .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            };
            serde_json::json!({
                "sessions": l.s,
                "rounds": l.rounds,
                "session": session,
                "direct": direct,
                "session_deltas": deltas,
                "redis_commands": l.redis.0,
                "redis_commands_total": l.redis.total(),
                "redis_script_calls": l.redis.script_calls(),
                "redis_commands_per_1000_deltas": if deltas > 0 { l.redis.total() as f64 * 1000.0 / deltas as f64 } else { 0.0 },
                "cpu_ns": named(&l.cpu),
                "rss_peak_kib": named(&l.rss_peak),
                "rss_start_kib": named(&l.rss_start),
                "processor_anon_peak_kib": l.anon_peak,
                "wall_ns": l.wall,
                "prompts_per_second": l.prompts_per_second(),
                "sessions_per_second": l.sessions_per_second(),
                "redis_requests": l.store.requests,
                "replica_waits": {
                    "acknowledged": l.store.acknowledged,
                    "short": l.store.short,
                    "skipped": l.store.skipped,
                },
                "prompt_phases_mean_ms": l.phases.iter().map(|(k, (sum, n))| {
                    (k.clone(), serde_json::json!(if *n > 0 { sum * 1e3 / *n as f64 } else { 0.0 }))
                }).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    serde_json::json!({
        "machine": machine(),
        "loadavg_start": run.load_start,
        "loadavg_end": run.load_end,
        "setup": run.setup,
        "redis": run.redis,
        "chunks": args.chunks,
        "interval_ms": args.interval_ms,
        "per_worker": args.per_worker,
        "grpc_conns": args.grpc_conns,
        "plan": args.plan,
        "no_direct": args.no_direct,
        "processor_idle_anon_kib": run.baseline_anon,
        "idle_rss_kib": PROCS.iter().zip(run.baseline_rss).map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        "levels": levels,
    })
}
