//! A round of workers on both halves, and what each level gathers: latencies, CPU, RSS, Redis commands.

use super::*;

/// The processes whose CPU and memory are read, in [`PROCS`] order; 0 for one that is not ours (external Redis).
pub(super) const PROCS: [&str; 5] = [
    "session-processor",
    "redis-server",
    "llm-gateway",
    "fake-provider",
    "procbench",
];

pub(super) const PROCESSOR: usize = 0;

pub(super) const REDIS: usize = 1;

pub(super) fn cpu_all(pids: &[u32; 5]) -> [u64; 5] {
    pids.map(|p| {
        if p == 0 {
            0
        } else {
            procfs::cpu_ns(p).unwrap_or(0)
        }
    })
}

pub(super) fn rss_all(pids: &[u32; 5]) -> [u64; 5] {
    pids.map(|p| {
        if p == 0 {
            0
        } else {
            procfs::rss_kib(p).unwrap_or(0)
        }
    })
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
    /// Wall time of the level's rounds, nanoseconds.
    pub(super) wall: u64,
    /// Redis commands executed during the level.
    pub(super) redis: CommandStats,
    /// The processor's own timing of its prompts' critical path during the level (`session_processor_prompt_phase`).
    pub(super) phases: promtext::Totals,
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
            wall: 0,
            redis: CommandStats::default(),
            phases: promtext::Totals::new(),
        }
    }

    /// Text deltas the sessions delivered: each completed prompt carried the gateway's `chunks` deltas.
    pub(super) fn session_deltas(&self, chunks: usize) -> u64 {
        (self.session.completed * chunks) as u64
    }
}

/// One round: S session workers and S direct workers, alternating, starts spread over `ramp`.
pub(super) async fn round(
    ctx: &Arc<Ctx>,
    pids: &[u32; 5],
    s: usize,
    per_worker: usize,
    ramp: Duration,
    level: &mut Level,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let pids = *pids;
        tokio::spawn(async move {
            let mut peak = [0u64; 5];
            loop {
                for (slot, rss) in peak.iter_mut().zip(rss_all(&pids)) {
                    *slot = (*slot).max(rss);
                }
                if stop.load(Ordering::Relaxed) {
                    return peak;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cpu_before = cpu_all(pids);
    let start = tokio::time::Instant::now();
    let workers = 2 * s;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..workers {
        let ctx = Arc::clone(ctx);
        let at = start + ramp.mul_f64(i as f64 / workers as f64);
        let half = if i % 2 == 0 {
            Half::Session
        } else {
            Half::Direct
        };
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let results = match half {
                Half::Session => session_worker(&ctx, i / 2, per_worker).await,
                Half::Direct => direct_worker(&ctx, i / 2, per_worker).await,
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
    let peak = sampler.await.unwrap_or_default();
    for k in 0..5 {
        level.cpu[k] += cpu_after[k].saturating_sub(cpu_before[k]);
        level.rss_peak[k] = level.rss_peak[k].max(peak[k]);
    }
}
