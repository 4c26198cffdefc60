//! The whole service as one function, shared by the `session-processor` binary and the tests that run it as a real
//! process.

use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, ProcessEnv};
use crate::runtimes::Runtimes;

/// `--check`: loads and validates the configuration as a start would (file, environment, TLS files), connecting to
/// nothing; a one-line summary of what it configures, or the error naming the key.
pub fn check(config_path: Option<&Path>) -> Result<String, crate::config::ConfigError> {
    service_kit::tls::install_crypto_provider();
    let config = Config::load(config_path, &ProcessEnv)?;
    let tls = match &config.server_tls {
        None => "plaintext",
        Some(t) if t.mutual() => "mutual TLS",
        Some(_) => "TLS",
    };
    let wait = match config.redis_wait {
        None => String::new(),
        Some(w) => format!(
            ", WAIT for {} replica{} ({} ms)",
            w.replicas,
            if w.replicas == 1 { "" } else { "s" },
            w.timeout.as_millis()
        ),
    };
    Ok(format!(
        "{} agents, {} tenants, gateway {}, {tls}, Redis {}{wait}",
        config.agents.len(),
        config.tenants.len(),
        config.gateway_url,
        config.redis_target.mode()
    ))
}

/// Loads the configuration, connects to Redis and the gateway, starts the recovery sweeper and serves until
/// `shutdown` resolves.
pub async fn serve(
    config_path: Option<&Path>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    service_kit::tls::install_crypto_provider();
    let mut config = Config::load(config_path, &ProcessEnv)?;
    if !announce_sandbox(&config).await {
        config.disable_bash();
    }
    let config = Arc::new(config);
    let runtimes = Runtimes::from_env()?;
    let store = connect_store(&config).await?;
    let gateway = crate::engine::configured_gateway_client(&config)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let tls = config
        .server_tls
        .as_ref()
        .map(|t| if t.mutual() { "mutual" } else { "server" });
    tracing::info!(message = "session-processor listening", addr = %addr, ?tls, runtimes = %runtimes.describe(), agents = ?config.agents.keys().collect::<Vec<_>>());
    // Tests and scripts read the bound address from this line (the port may be 0 in the config).
    eprintln!("session-processor listening on {addr}");
    // Sessions created before the per-tenant indexes existed (or by replicas of an older version) join them: a
    // one-time pass at the first start, then only what is new since. In the background: serving does not wait.
    let indexer = store.index();
    tokio::spawn(async move {
        match indexer.index_tenants().await {
            Ok(n) => tracing::info!(message = "tenant indexes up to date", entries = n),
            Err(e) => {
                tracing::warn!(message = "cannot update the tenant indexes; the next start retries", error = %e)
            }
        }
    });
    let engine = crate::engine::Engine::new(store, gateway, config.clone());
    engine
        .metrics()
        .count_store_traffic(engine.store().traffic());
    let stop = tokio_util::sync::CancellationToken::new();
    if let Some(metrics_addr) = config.metrics_listen {
        let metrics_listener = tokio::net::TcpListener::bind(metrics_addr).await?;
        let metrics_addr = metrics_listener.local_addr()?;
        tracing::info!(message = "session-processor metrics listening", addr = %metrics_addr);
        // Tests read the bound metrics address from this line, like the one above.
        eprintln!("session-processor metrics on {metrics_addr}");
        // Served until the loops' stop: scrapes keep working while the server drains.
        tokio::spawn(llm_telemetry::metrics_http::serve(
            engine.metrics().clone(),
            metrics_listener,
            stop.clone().cancelled_owned(),
        ));
    }
    tokio::spawn(engine.clone().recover(config.lease_ttl / 2, stop.clone()));
    // Snapshot repositories of deleted sessions go within ten minutes, from every replica's snapshot root.
    tokio::spawn(crate::snapshot::sweep_forever(
        config.snapshots.clone(),
        engine.store().clone(),
        std::time::Duration::from_secs(600),
        stop.clone(),
    ));
    let result = crate::runtimes::serve(engine, listener, shutdown, runtimes).await;
    stop.cancel();
    result?;
    Ok(())
}

/// Probes the `bash` sandbox and says at start-up how commands will run; false when `bash` cannot run (it is then
/// disabled rather than run less confined than configured).
async fn announce_sandbox(config: &Config) -> bool {
    let agents = config.bash_agents();
    match config.sandbox.ready().await {
        Ok(ready) => {
            let what = ready.describe();
            if ready.confinement == crate::tools::sandbox::Confinement::Weak {
                tracing::warn!(message = "bash sandbox", sandbox = %what, ?agents);
            } else {
                tracing::info!(message = "bash sandbox", sandbox = %what, ?agents);
            }
            true
        }
        Err(why) if agents.is_empty() => {
            tracing::info!(message = "bash sandbox unavailable (no agent uses bash)", reason = %why);
            false
        }
        Err(why) => {
            tracing::error!(
                message = "bash is DISABLED: its sandbox cannot start; install bubblewrap and allow the namespaces, \
                           or set [tools.bash] confinement = \"weak\" to accept weaker confinement",
                reason = %why,
                ?agents,
            );
            // Tests and operators read this line, like the listening one.
            eprintln!("session-processor: bash is disabled: {why}");
            false
        }
    }
}

/// The store the configuration describes: its Redis (mode, addresses, credentials, TLS), key prefix and replica
/// wait. Connects; does not check that Redis answers.
pub async fn open_store(config: &Config) -> Result<crate::store::Store, crate::store::StoreError> {
    Ok(crate::store::Store::connect_to(
        &config.redis_target,
        &config.redis_access,
        &config.redis_prefix,
    )
    .await?
    .with_replica_wait(config.redis_wait)
    .with_log_waits(config.max_blocking_reads))
}

/// Connects to Redis and checks that it answers. While Redis is still loading its data (a restart with AOF), start-up
/// waits, saying so every few seconds, instead of failing: the processor is useless without its store, and a
/// supervisor restarting it in a loop would only add noise. Any other failure ends start-up.
async fn connect_store(config: &Config) -> Result<crate::store::Store, crate::store::StoreError> {
    let started = std::time::Instant::now();
    let mut said = None::<std::time::Instant>;
    loop {
        let attempt = async {
            let store = open_store(config).await?;
            store.ping().await?;
            Ok::<_, crate::store::StoreError>(store)
        };
        match attempt.await {
            Ok(store) => return Ok(store),
            Err(e) if e.is_loading() => {
                if said.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(5)) {
                    tracing::warn!(
                        message = "Redis is loading its data; waiting before serving",
                        waited_ms = started.elapsed().as_millis() as u64
                    );
                    said = Some(std::time::Instant::now());
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
