//! meshfit agent: the per-node daemon that calibrates idle GPUs with microbench and serves
//! the results and live counters as Prometheus metrics.
//!
//! - [`config::Config`]: settings from defaults, YAML, `MESHFIT_*` variables and flags.
//! - [`node::Node`]: the GPUs (NVML only) or the sim, behind one trait.
//! - [`scheduler::Scheduler`]: when calibration runs (interval, jitter, idle gate) and how it
//!   stops (a job appears, shutdown, watchdog).
//! - [`calibrate`]: one run: plan, the `microbench calibrate --json` child ([`child`]),
//!   collect, persist. The agent never loads CUDA or NCCL itself (issue 10).
//! - [`identity`]: the run's own child among the GPU processes, across PID namespaces.
//! - [`idle`]: whether the GPUs are idle enough to calibrate, before a run and during one.
//! - [`sampler`]: live counters, host and process figures every few seconds.
//! - [`state`]: the calibration kept across restarts, written atomically.
//! - [`fabric`]: the last multi-node fabric run's results, read from the state directory.
//! - [`input`]: every file the agent reads, each bounded by a limit of its own.
//! - [`cache::Cache`]: what the scheduler and the sampler last learnt; all a scrape reads.
//! - [`metrics`]: one collector per family group, rendered at scrape time.
//! - [`negotiation`]: the exposition format and coding a `/metrics` request gets.
//! - [`http::router`]: `/metrics`, `/healthz`, `/readyz`, `/v1/topology`, `/v1/results`,
//!   `POST /v1/calibrate`.
//! - [`bind`]: the listen address, dual-stack by default.
//! - [`listener::serve`]: the accept loop, with a connection cap and header, idle and write
//!   timeouts (issue 13).
//!
//! [`run`] puts them together until a shutdown future completes.
#![deny(missing_docs)]

pub mod bind;
pub mod cache;
pub mod calibrate;
pub mod child;
pub mod config;
mod error;
pub mod fabric;
pub mod http;
pub mod identity;
pub mod idle;
pub mod input;
pub mod libs;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod negotiation;
pub mod node;
pub mod sampler;
pub mod scheduler;
pub mod state;

pub use config::Config;
pub use error::{Error, Result};

use cache::Cache;
use scheduler::{Scheduler, Trigger};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Time the scheduler gets at shutdown to stop the calibration child and save what it
/// measured; SIGTERM must end the process within 2 s.
const STOP_SCHEDULER: Duration = Duration::from_millis(1500);
/// Time open HTTP connections get to finish at shutdown.
const STOP_SERVER: Duration = Duration::from_millis(300);

/// Runs the agent until `shutdown` completes. Fails at start on a state directory that
/// cannot be written, a bad sim profile or fault, no microbench binary, or an address that
/// cannot be bound; once
/// serving, it does not fail: a node without GPUs serves host metrics and `meshfit_up 0`.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<()> {
    if let Some(tmp) = state::check_dir(&config.state_dir)? {
        tracing::warn!(
            "removed {}, left by a state file write that did not finish",
            tmp.display()
        );
    }
    let microbench = child::find_microbench(config.microbench_bin.as_deref())?;
    let node: Arc<dyn node::Node> = node::build(&config)?.into();
    // Only the real backend's child loads GPU libraries; the sim's loads none.
    if node.source() == record::Backend::Nccl {
        tokio::spawn({
            let microbench = microbench.clone();
            async move { libs::log(&microbench).await }
        });
    }
    let node_name = config.node_name.clone().unwrap_or_else(host_name);
    let mut state_distrusted = 0;
    let calibration = match state::load(&config.state_dir)? {
        state::Loaded::Empty => state::Calibration::default(),
        state::Loaded::Found(mut c) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let distrusted = state::distrust(&mut c, &node_name, now);
            for why in &distrusted {
                tracing::warn!("state file in {}: {why}", config.state_dir.display());
            }
            state_distrusted = distrusted.len() as u64;
            tracing::info!(
                "loaded calibration from {}: {} records, last success at {}",
                config.state_dir.display(),
                c.records.len(),
                c.last_success_timestamp
                    .map_or_else(|| "never".into(), |t| format!("{t:.0}"))
            );
            c
        }
        state::Loaded::SetAside { reason, moved_to } => {
            tracing::warn!(
                "state file not trusted ({reason}); moved to {}; starting without a calibration",
                moved_to.display()
            );
            state::Calibration::default()
        }
    };
    let cache = Arc::new(Cache::new(node_name, node.source(), calibration));
    cache.update(|s| s.state_distrusted = state_distrusted);
    let trigger = Arc::new(Trigger::default());
    let listener =
        bind::bind(config.listen).map_err(|(addr, source)| Error::Bind { addr, source })?;
    let addr = listener.local_addr().map_err(Error::Serve)?;
    // Tests and operators read the bound port from this line (the listen port may be 0).
    tracing::info!("listening on http://{addr}");

    let config = Arc::new(config);
    let (stop_tx, stop_rx) = watch::channel(false);
    let scheduler = Scheduler {
        node: node.clone(),
        cache: cache.clone(),
        config: config.clone(),
        trigger: trigger.clone(),
        microbench,
    };
    let scheduled = {
        let (node, cache, stop) = (node.clone(), cache.clone(), stop_rx.clone());
        tokio::spawn(async move {
            sampler::discover(&node, &cache).await;
            scheduler.run(stop).await;
        })
    };
    tokio::spawn(sampler::run(
        node,
        cache.clone(),
        config.sample_interval.0,
        fabric::Watcher::new(&config.state_dir, config.fabric_slowest_peers as usize),
        stop_rx.clone(),
    ));
    let app = http::router(http::AppState {
        cache,
        trigger,
        token: config
            .calibrate_token
            .as_ref()
            .map(|t| Arc::from(t.0.as_str())),
        request_timeout: config.http.request_timeout.0,
        rendered: Arc::default(),
        serialized: Arc::default(),
    });
    let server = tokio::spawn(listener::serve(
        listener,
        app,
        listener::Limits::from(&config.http),
        stop_rx.clone(),
    ));
    shutdown.await;
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    if tokio::time::timeout(STOP_SCHEDULER, scheduled)
        .await
        .is_err()
    {
        tracing::warn!("the scheduler did not stop in {STOP_SCHEDULER:?}; leaving it");
    }
    // Connections still open after STOP_SERVER are dropped with the runtime.
    let _ = tokio::time::timeout(STOP_SERVER, server).await;
    Ok(())
}

/// The host name, for the `hostname` label when no node name is configured.
fn host_name() -> String {
    input::read_text(
        std::path::Path::new("/proc/sys/kernel/hostname"),
        input::MAX_PROC_BYTES,
    )
    .map(|s| s.trim().to_string())
    .ok()
    .filter(|s| !s.is_empty())
    .or_else(|| std::env::var("HOSTNAME").ok())
    .unwrap_or_else(|| "localhost".into())
}
