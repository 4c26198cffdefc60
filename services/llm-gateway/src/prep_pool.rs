//! The threads that prepare large requests, at a scheduling priority below the async workers'.
//!
//! A large request's preparation (decoding megabytes of protobuf, validating and lowering thousands of schemas,
//! serialising the provider body) is CPU work of a hundred milliseconds or more. Moved off the async workers it no
//! longer blocks the streams those workers serve, but on a small machine it still competes with them for the
//! cores: each time a stream's worker wakes for a delta it may wait for the preparing thread's time slice to end,
//! and a stream's gaps widen by a few milliseconds. These threads therefore run under Linux's `SCHED_IDLE` policy:
//! any thread of normal priority that wakes preempts them at once, so the streams keep their pace and the large
//! request takes the CPU time the streams leave. On a machine whose cores are saturated by normal work, preparation
//! waits for them (the kernel still gives idle threads a small share, so it never stops entirely); that is the
//! intended order: a request of tens of thousands of tools yields to the streams already flowing.
//!
//! The pool has one thread per core the process may use (at least one), started on first use. Elsewhere than on
//! Linux the threads keep the normal priority.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

/// A job: preparation work boxed with the channel its result goes back through.
type Job = Box<dyn FnOnce() + Send>;

/// The pool's queue; its threads take jobs from the one receiver in turn.
struct Pool {
    jobs: Sender<Job>,
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// Runs `work` on a preparation thread and waits for its result without holding an async worker. A panic in
/// `work` is resumed on the caller's task, as it would have been inline.
pub async fn run<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, result) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        let _ = done.send(r);
    });
    if let Err(job) = submit(job) {
        // No preparation thread is running (none could be started): tokio's blocking pool runs it instead.
        drop(tokio::task::spawn_blocking(job));
    }
    match result.await {
        Ok(Ok(r)) => r,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        // The job was dropped unrun, which only the end of the process causes.
        Err(_) => std::panic::resume_unwind(Box::new("request preparation did not run")),
    }
}

/// Queues `job`, starting the pool on first use; hands it back when no thread is there to run it.
fn submit(job: Job) -> Result<(), Job> {
    POOL.get_or_init(start)
        .jobs
        .send(job)
        .map_err(|unsent| unsent.0)
}

/// Starts one preparation thread per available core.
fn start() -> Pool {
    let (jobs, queue) = channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    for i in 0..threads {
        let queue = Arc::clone(&queue);
        let spawned = std::thread::Builder::new()
            .name(format!("prep-{i}"))
            .spawn(move || serve(&queue));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start a request preparation thread");
        }
    }
    Pool { jobs }
}

/// A preparation thread: lowers its own priority, then runs jobs until the process ends.
fn serve(queue: &Mutex<Receiver<Job>>) {
    lower_priority();
    loop {
        let next = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        match next {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Puts the calling thread under `SCHED_IDLE` where the system has it (Linux); any thread may lower its own
/// priority.
fn lower_priority() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use thread_priority::unix::{
            NormalThreadSchedulePolicy, ThreadSchedulePolicy, set_thread_priority_and_policy,
            thread_native_id,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) = set_thread_priority_and_policy(
            thread_native_id(),
            thread_priority::ThreadPriority::Min,
            idle,
        ) {
            tracing::warn!(error = ?e, "request preparation threads keep the normal priority");
        }
    }
}

#[cfg(test)]
#[path = "prep_pool_tests.rs"]
mod tests;
