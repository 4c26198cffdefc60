//! The deployments of one run side by side (`--redis` naming several), at the plan's highest concurrency.

use super::*;

/// p50 and p99 of samples, without disturbing the level's own copy.
fn p50_p99(samples: &[u64]) -> (u64, u64) {
    let s = summarize(&mut samples.to_vec());
    (s.p50, s.p99)
}

fn pair(a: (u64, u64)) -> String {
    format!("{} / {}", ms(a.0), ms(a.1))
}

fn pair_diff(a: (u64, u64), b: (u64, u64)) -> String {
    format!("{} / {}", ms_diff(a.0, b.0), ms_diff(a.1, b.1))
}

/// CPU nanoseconds per unit, in milliseconds.
fn cpu_ms_per(ns: u64, units: usize) -> String {
    if units == 0 {
        "-".into()
    } else {
        format!("{:.3}", ns as f64 / 1e6 / units as f64)
    }
}

/// One table: a row per deployment, from its last level at the plan's highest concurrency.
pub(super) fn side_by_side(sides: &[(&RunInfo, &[Level])], args: &Args, out: &mut String) {
    use std::fmt::Write as _;
    let Some(top) = sides
        .iter()
        .flat_map(|(_, levels)| levels.iter().map(|l| l.s))
        .max()
    else {
        return;
    };
    let _ = writeln!(
        out,
        "\n## Side by side: {top} concurrent sessions{}\n",
        if args.no_direct {
            " (session half only)"
        } else {
            " + as many direct gateway streams"
        }
    );
    let _ = writeln!(
        out,
        "| Redis | session first text p50 / p99 ms | added p50 / p99 | session gap p50 / p99 ms | added p50 / p99 | Redis commands per prompt | script calls per prompt | round trips per prompt | Redis CPU ms per prompt | prompts/s | sessions/s | waits acknowledged / short / skipped | errors |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (run, levels) in sides {
        let Some(l) = levels.iter().rev().find(|l| l.s == top) else {
            continue;
        };
        let (st, sg) = (p50_p99(&l.session.ttft), p50_p99(&l.session.gaps));
        let (added_t, added_g) = if l.direct.completed > 0 {
            let (dt, dg) = (p50_p99(&l.direct.ttft), p50_p99(&l.direct.gaps));
            (pair_diff(st, dt), pair_diff(sg, dg))
        } else {
            ("-".into(), "-".into())
        };
        let prompts = l.session.streams;
        let _ = writeln!(
            out,
            "| {} | {} | {added_t} | {} | {added_g} | {} | {} | {} | {} | {:.1} | {:.1} | {} / {} / {} | {} |",
            run.setup,
            pair(st),
            pair(sg),
            per_unit(l.redis.total(), prompts),
            per_unit(l.redis.script_calls(), prompts),
            per_unit(l.store.requests, prompts),
            cpu_ms_per(l.cpu[REDIS], l.session.completed),
            l.prompts_per_second(),
            l.sessions_per_second(),
            l.store.acknowledged,
            l.store.short,
            l.store.skipped,
            l.session.errors + l.direct.errors
        );
    }
    let _ = writeln!(
        out,
        "\nRedis commands: `INFO commandstats` summed over the primaries (a replica applies their writes again, not counted); round trips: the processor's own count of its Redis requests; Redis CPU: every node of the deployment, replicas included."
    );
}
