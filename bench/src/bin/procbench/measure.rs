//! A round of workers on both halves, and what each level gathers: latencies, CPU, RSS, Redis commands.

use super::*;

/// The processes whose CPU and memory are read, in [`PROCS`] order: each a set of pids, summed (a cluster's nodes);
/// empty for one that is not ours (an external Redis).
pub(super) type Pids = [Vec<u32>; 5];

/// The kinds of process whose CPU and memory are read.
pub(super) const PROCS: [&str; 5] = [
    "session-processor",
    "redis-server",
    "llm-gateway",
    "fake-provider",
    "procbench",
];

pub(super) const PROCESSOR: usize = 0;

pub(super) const REDIS: usize = 1;

pub(super) fn cpu_all(pids: &Pids) -> [u64; 5] {
    sum_per_process(pids, procfs::cpu_ns)
}

pub(super) fn rss_all(pids: &Pids) -> [u64; 5] {
    sum_per_process(pids, procfs::rss_kib)
}

/// The processor's anonymous resident memory (KiB): what it allocated, without the code pages `VmRSS` also counts.
pub(super) fn processor_anon(pids: &Pids) -> u64 {
    pids[PROCESSOR]
        .iter()
        .map(|&p| procfs::anon_kib(p).unwrap_or(0))
        .sum()
}

/// `read` summed over each slot's pids (a cluster's nodes count as one Redis); an unreadable pid counts 0.
fn sum_per_process(pids: &Pids, read: impl Fn(u32) -> Option<u64>) -> [u64; 5] {
    std::array::from_fn(|k| pids[k].iter().map(|&p| read(p).unwrap_or(0)).sum())
}

/// The processor's own count of its Redis traffic over a level (`session_processor_redis_requests_total` and
/// `session_processor_redis_waits_total`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StoreCounts {
    /// Requests on its shared connection: a command or a pipeline, one round trip each.
    pub(super) requests: u64,
    /// Acknowledged writes whose WAIT had every replica asked for.
    pub(super) acknowledged: u64,
    /// ... whose WAIT came back short (the timeout passed).
    pub(super) short: u64,
    /// ... sent without WAIT while a short one suspended it.
    pub(super) skipped: u64,
}

/// One scrape of the processor's `/metrics`: its prompt phases and its Redis counts.
pub(super) struct Reading {
    phases: promtext::Totals,
    store: [f64; 4],
}

impl Reading {
    const SERIES: [&'static str; 4] = [
        "session_processor_redis_requests_total",
        "session_processor_redis_waits_total{outcome=\"acknowledged\"}",
        "session_processor_redis_waits_total{outcome=\"short\"}",
        "session_processor_redis_waits_total{outcome=\"skipped\"}",
    ];

    pub(super) async fn scrape(metrics: SocketAddr) -> Reading {
        let text = llm_telemetry::metrics_http::scrape(metrics)
            .await
            .unwrap_or_else(|e| panic!("scrape the processor's metrics: {e}"));
        Reading {
            phases: promtext::histogram_totals(
                &text,
                "session_processor_prompt_phase_seconds",
                "phase",
            ),
            store: Self::SERIES.map(|series| promtext::value(&text, series)),
        }
    }

    /// What happened between `before` and this reading.
    pub(super) fn since(&self, before: &Reading) -> (promtext::Totals, StoreCounts) {
        let d = |k: usize| (self.store[k] - before.store[k]).max(0.0) as u64;
        (
            promtext::since(&self.phases, &before.phases),
            StoreCounts {
                requests: d(0),
                acknowledged: d(1),
                short: d(2),
                skipped: d(3),
            },
        )
    }
}

/// The streams of one half over all rounds of a level.
#[derive(Default)]
pub(super) struct Agg {
    pub(super) streams: usize,
    pub(super) completed: usize,
    pub(super) errors: usize,
    pub(super) error_samples: Vec<String>,
    pub(super) ttft: Vec<u64>,
    pub(super) gaps: Vec<u64>,
    pub(super) last: Vec<u64>,
    pub(super) events: usize,
}

impl Agg {
    pub(super) fn add(&mut self, result: Result<StreamRec, String>) {
        self.streams += 1;
        match result {
            Ok(rec) => {
                self.completed += 1;
                self.ttft.push(rec.ttft);
                self.gaps.extend(rec.gaps);
                self.last.push(rec.last);
                self.events += rec.events;
            }
            Err(e) => {
                self.errors += 1;
                if self.error_samples.len() < 5 && !self.error_samples.contains(&e) {
                    self.error_samples.push(e);
                }
            }
        }
    }
}

/// Everything measured at one concurrency.
pub(super) struct Level {
    pub(super) s: usize,
    pub(super) rounds: usize,
    pub(super) session: Agg,
    pub(super) direct: Agg,
    /// CPU nanoseconds per process during the level's rounds.
    pub(super) cpu: [u64; 5],
    /// Peak RSS (KiB) per process during the level's rounds.
    pub(super) rss_peak: [u64; 5],
    /// RSS (KiB) per process when the level started.
    pub(super) rss_start: [u64; 5],
    /// The processor's peak anonymous RSS (KiB) during the level's rounds.
    pub(super) anon_peak: u64,
    /// Wall time of the level's rounds, nanoseconds.
    pub(super) wall: u64,
    /// Redis commands executed during the level.
    pub(super) redis: CommandStats,
    /// The processor's own timing of its prompts' critical path during the level (`session_processor_prompt_phase`).
    pub(super) phases: promtext::Totals,
    /// The processor's count of its Redis requests and waits during the level.
    pub(super) store: StoreCounts,
}

impl Level {
    pub(super) fn new(s: usize, rounds: usize, rss_start: [u64; 5]) -> Level {
        Level {
            s,
            rounds,
            session: Agg::default(),
            direct: Agg::default(),
            cpu: [0; 5],
            rss_peak: [0; 5],
            rss_start,
            anon_peak: 0,
            wall: 0,
            redis: CommandStats::default(),
            phases: promtext::Totals::new(),
            store: StoreCounts::default(),
        }
    }

    /// Text deltas the sessions delivered: each completed prompt carried the gateway's `chunks` deltas.
    pub(super) fn session_deltas(&self, chunks: usize) -> u64 {
        (self.session.completed * chunks) as u64
    }

    /// Completed prompts per second of the level's rounds (wall time, ramp and tail included).
    pub(super) fn prompts_per_second(&self) -> f64 {
        self.per_second(self.session.completed)
    }

    /// Sessions (created, then prompted `--per-worker` times) per second of the level's rounds.
    pub(super) fn sessions_per_second(&self) -> f64 {
        self.per_second(self.s * self.rounds)
    }

    fn per_second(&self, n: usize) -> f64 {
        if self.wall == 0 {
            0.0
        } else {
            n as f64 * 1e9 / self.wall as f64
        }
    }
}

/// The workers of a round: S on each half (the session half only with `no_direct`), each running `per_worker`
/// streams back to back.
#[derive(Debug, Clone, Copy)]
pub(super) struct Halves {
    pub(super) s: usize,
    pub(super) per_worker: usize,
    pub(super) no_direct: bool,
}

/// One round: S session workers and S direct workers, alternating, starts spread over `ramp`.
pub(super) async fn round(
    ctx: &Arc<Ctx>,
    pids: &Pids,
    halves: Halves,
    ramp: Duration,
    level: &mut Level,
) {
    let Halves {
        s,
        per_worker,
        no_direct,
    } = halves;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let pids = pids.clone();
        tokio::spawn(async move {
            let mut peak = [0u64; 5];
            let mut anon = 0;
            loop {
                for (slot, rss) in peak.iter_mut().zip(rss_all(&pids)) {
                    *slot = (*slot).max(rss);
                }
                anon = processor_anon(&pids).max(anon);
                if stop.load(Ordering::Relaxed) {
                    return (peak, anon);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cpu_before = cpu_all(pids);
    let start = tokio::time::Instant::now();
    let (workers, step) = if no_direct { (s, 1) } else { (2 * s, 2) };
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..workers {
        let ctx = Arc::clone(ctx);
        let at = start + ramp.mul_f64(i as f64 / workers as f64);
        let half = if i % step == 0 {
            Half::Session
        } else {
            Half::Direct
        };
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let results = match half {
                Half::Session => session_worker(&ctx, i / step, per_worker).await,
                Half::Direct => direct_worker(&ctx, i / step, per_worker).await,
            };
            (half, results)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((half, results)) => {
                let agg = match half {
                    Half::Session => &mut level.session,
                    Half::Direct => &mut level.direct,
                };
                for r in results {
                    agg.add(r);
                }
            }
            Err(e) => level.session.add(Err(format!("worker task: {e}"))),
        }
    }
    level.wall += nanos(start.elapsed());
    let cpu_after = cpu_all(pids);
    stop.store(true, Ordering::Relaxed);
    let (peak, anon) = sampler.await.unwrap_or_default();
    level.anon_peak = level.anon_peak.max(anon);
    for k in 0..5 {
        level.cpu[k] += cpu_after[k].saturating_sub(cpu_before[k]);
        level.rss_peak[k] = level.rss_peak[k].max(peak[k]);
    }
}
