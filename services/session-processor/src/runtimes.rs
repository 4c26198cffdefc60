//! How the processor spreads its work over threads: a single-threaded runtime per core (the default), or Tokio's
//! shared multi-threaded runtime.
//!
//! A delta crosses four tasks in the processor: the gateway connection's, the loop's, the `Prompt` stream's and the
//! caller connection's. On the shared runtime those wake each other across worker threads, and on a machine shared
//! with other processes the workers park and wake each other for most deltas. With a runtime per core, each
//! accepted connection is served by one runtime, every loop its prompts start runs on that runtime, and each runtime
//! has its own gateway connection(s) and Redis connection: a delta's tasks, and a prompt's Redis requests, run on one
//! thread. Connections are handed to the runtimes in turn. What is shared stays shared: the event hub (a stream on
//! one runtime follows a loop on another), the blocking reads' Redis connections, the metrics.
//!
//! `PROCESSOR_RUNTIMES` chooses: unset or `per-core` for one per available core (the CPU quota of a container
//! counts), a number for that many, `shared` for the multi-threaded runtime (whose worker count
//! `TOKIO_WORKER_THREADS` sets). Work that blocks runs on each runtime's blocking pool either way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use service_kit::coalesce::Coalescing;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::engine::Engine;

/// The environment variable that chooses.
pub const ENV: &str = "PROCESSOR_RUNTIMES";

/// The most runtimes `PROCESSOR_RUNTIMES` may ask for.
pub const MAX: usize = 1024;

/// How the work is spread (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtimes {
    /// Tokio's multi-threaded runtime, shared by every connection and loop.
    Shared,
    /// This many single-threaded runtimes, each serving the connections handed to it.
    PerCore(usize),
}

type Error = Box<dyn std::error::Error + Send + Sync>;

impl Runtimes {
    /// From `PROCESSOR_RUNTIMES` and the cores this process may use.
    pub fn from_env() -> Result<Runtimes, String> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Runtimes::parse(std::env::var(ENV).ok().as_deref(), cores)
    }

    /// `value` as `PROCESSOR_RUNTIMES` holds it, on a machine with `cores` usable cores.
    pub fn parse(value: Option<&str>, cores: usize) -> Result<Runtimes, String> {
        match value.map(str::trim) {
            None | Some("" | "per-core") => Ok(Runtimes::PerCore(cores.max(1))),
            Some("shared") => Ok(Runtimes::Shared),
            Some(n) => match n.parse::<usize>() {
                Ok(n @ 1..=MAX) => Ok(Runtimes::PerCore(n)),
                _ => Err(format!(
                    "{ENV} must be `per-core`, `shared` or a number of runtimes from 1 to {MAX}, not {n:?}"
                )),
            },
        }
    }

    /// The runtime the process starts on: the shared one, or the first of the per-core ones (the others start
    /// when serving begins, [`serve`]).
    pub fn first(&self) -> std::io::Result<tokio::runtime::Runtime> {
        match self {
            Runtimes::Shared => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build(),
            Runtimes::PerCore(_) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
        }
    }

    /// What `--check` and the start-up log say.
    pub fn describe(&self) -> String {
        match self {
            Runtimes::Shared => "one shared multi-threaded runtime".to_string(),
            Runtimes::PerCore(1) => "one single-threaded runtime".to_string(),
            Runtimes::PerCore(n) => format!("{n} single-threaded runtimes"),
        }
    }
}

/// Runs `main` on the first runtime as `PROCESSOR_RUNTIMES` says (the binaries' start): a bad value, or a runtime that
/// cannot start, is printed as `program: <error>` and fails.
pub fn run_main<F>(program: &str, main: impl FnOnce(Runtimes) -> F) -> std::process::ExitCode
where
    F: Future<Output = std::process::ExitCode>,
{
    let started = Runtimes::from_env()
        .map_err(Error::from)
        .and_then(|r| Ok((r, r.first()?)));
    match started {
        Ok((runtimes, rt)) => rt.block_on(main(runtimes)),
        Err(e) => {
            eprintln!("{program}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Serves `listener` until `shutdown` as `runtimes` says: on the current runtime alone, or on it and the other
/// per-core runtimes, each started on a thread of its own and kept until every one has drained its connections.
pub async fn serve(
    engine: Arc<Engine>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    runtimes: Runtimes,
) -> Result<(), Error> {
    let n = match runtimes {
        Runtimes::PerCore(n) if n > 1 => n,
        _ => return Ok(crate::server::run(engine, listener, shutdown).await?),
    };
    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();
    // Kept by every other runtime after its server returned, so that what it drives (a stream's timer, a Redis
    // connection another runtime may use) lives until all have drained.
    let release = CancellationToken::new();
    let _release_on_exit = release.clone().drop_guard();
    let (done_tx, mut done_rx) = unbounded_channel::<Result<(), String>>();
    let (local_tx, local_rx) = unbounded_channel::<std::net::TcpStream>();
    let mut handoffs = Vec::with_capacity(n);
    handoffs.push(local_tx);
    let mut threads = Vec::with_capacity(n - 1);
    for k in 1..n {
        let (tx, rx) = unbounded_channel::<std::net::TcpStream>();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let other = Other {
            engine: engine.clone(),
            connections: rx,
            stop: stop.clone(),
            release: release.clone(),
            done: done_tx.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("runtime-{k}"))
            .spawn(move || other.run(ready_tx))?;
        ready_rx
            .await
            .map_err(|_| format!("runtime {k} did not start"))??;
        handoffs.push(tx);
        threads.push(thread);
    }
    drop(done_tx);
    tokio::spawn(accept(listener, handoffs, stop.clone()));
    let stopping = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopping.cancel();
    });
    let result =
        crate::server::run_incoming(engine, incoming(local_rx), stop.clone().cancelled_owned())
            .await;
    stop.cancel();
    // Every other runtime's server, then all of them go: each reports once and lets go of its sender (one whose
    // thread panicked lets go unreported).
    let mut others = Ok(());
    while let Some(r) = done_rx.recv().await {
        others = others.and(r);
    }
    release.cancel();
    for t in threads {
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }
    result?;
    Ok(others?)
}

/// Accepts connections and hands them to the runtimes in turn, each moved off this runtime's reactor (the first
/// runtime's too: every runtime takes its connections the same way, [`incoming`]).
async fn accept(
    listener: TcpListener,
    runtimes: Vec<UnboundedSender<std::net::TcpStream>>,
    stop: CancellationToken,
) {
    for turn in (0..runtimes.len()).cycle() {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.cancelled() => return,
        };
        let handed = accepted.and_then(|(stream, _)| stream.into_std());
        match handed {
            Ok(stream) => {
                let _ = runtimes[turn].send(stream);
            }
            Err(e) => {
                // Out of file descriptors, or a connection reset before it was taken: a pause rather than a spin.
                tracing::warn!(message = "cannot accept a connection", error = %e);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The connections handed to a runtime, as its server takes them: registered with that runtime's reactor, without
/// Nagle's delay.
fn incoming(
    connections: UnboundedReceiver<std::net::TcpStream>,
) -> impl futures::Stream<Item = std::io::Result<Coalescing<TcpStream>>> {
    UnboundedReceiverStream::new(connections).map(|s| {
        let t = TcpStream::from_std(s)?;
        t.set_nodelay(true)?;
        Ok(Coalescing::new(t))
    })
}

/// A runtime other than the first, with what it serves.
struct Other {
    engine: Arc<Engine>,
    connections: UnboundedReceiver<std::net::TcpStream>,
    stop: CancellationToken,
    release: CancellationToken,
    done: UnboundedSender<Result<(), String>>,
}

impl Other {
    /// Builds the runtime and what it needs of its own ([`Other::prepare`]), says so through `ready`, serves until
    /// `stop`, reports, and keeps the runtime until `release`.
    fn run(self, ready: tokio::sync::oneshot::Sender<Result<(), Error>>) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(e.into()));
                return;
            }
        };
        let Other {
            engine,
            connections,
            stop,
            release,
            done,
        } = self;
        rt.block_on(async move {
            let prepared = Self::prepare(&engine).await;
            let failed = prepared.is_err();
            let _ = ready.send(prepared);
            if failed {
                return;
            }
            let served =
                crate::server::run_incoming(engine, incoming(connections), stop.cancelled_owned())
                    .await;
            let _ = done.send(served.map_err(|e| e.to_string()));
            drop(done);
            release.cancelled().await;
        });
    }

    /// On the runtime's thread: its gateway client and its Redis connection.
    async fn prepare(engine: &Engine) -> Result<(), Error> {
        let config: &Config = engine.config();
        crate::engine::set_local_client(crate::engine::configured_gateway_client(config)?);
        engine
            .store()
            .connect_here(&config.redis_target, &config.redis_access)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "runtimes_tests.rs"]
mod tests;
