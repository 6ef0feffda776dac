//! When calibration runs, and how it stops.
//!
//! A run starts at start-up (unless the saved calibration is younger than `interval`), then
//! every `interval` plus a random share of `jitter`, or at once on `POST /v1/calibrate`. It
//! starts only when every GPU is idle: no compute process, utilisation and memory in use
//! under their thresholds. The run itself is a child process ([`crate::calibrate`]): while
//! it runs, the GPUs are checked every `busy_check_interval`, and a process that is not the
//! child stops it (`aborted_busy`), keeping what was measured. A watchdog bounds each point
//! (`point_timeout`) and the whole run (`run_timeout`) by stopping the child. Shutdown stops
//! a run the same way, and what was measured is saved.

use crate::cache::{Cache, Discovery};
use crate::calibrate::Calibrator;
use crate::config::Config;
use crate::idle::{busy_gpus, now_s, Check};
use crate::node::Node;
use crate::state::{Calibration, RunResult};
use microbench::discovery::Topology;
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// Requests for a run now, from `POST /v1/calibrate`.
#[derive(Debug, Default)]
pub struct Trigger {
    notify: Notify,
    pending: AtomicBool,
}

impl Trigger {
    /// Asks for a run; false when one is already asked for.
    pub fn request(&self) -> bool {
        if self.pending.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.notify.notify_one();
        true
    }
}

/// What the scheduler works with.
pub struct Scheduler {
    /// The hardware.
    pub node: Arc<dyn Node>,
    /// Where results go for the handlers.
    pub cache: Arc<Cache>,
    /// Settings.
    pub config: Arc<Config>,
    /// Run-now requests.
    pub trigger: Arc<Trigger>,
    /// The microbench binary each run starts.
    pub microbench: PathBuf,
}

/// A random share of `jitter`, so nodes started together do not calibrate together.
fn jitter(jitter: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    jitter.mul_f64((random % 10_000) as f64 / 10_000.0)
}

/// The wait before the first run: none while the saved calibration is older than `interval`
/// or ended early, else until it is `interval` old, so a restart does not redo a fresh one.
pub fn first_wait(calibration: &Calibration, now: f64, interval: Duration) -> Duration {
    match (&calibration.last_run, calibration.last_success_timestamp) {
        (Some(run), Some(done)) if run.result == RunResult::Success => {
            Duration::from_secs_f64((done + interval.as_secs_f64() - now).max(0.0))
        }
        _ => Duration::ZERO,
    }
}

impl Scheduler {
    /// Runs until `shutdown` turns true; a run in progress is stopped and saved first.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let interval = self.config.interval.0;
        let mut wait = first_wait(&self.cache.snapshot().calibration, now_s(), interval)
            + jitter(self.config.jitter.0);
        if !wait.is_zero() {
            tracing::info!("next calibration in {:.0} s", wait.as_secs_f64());
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.trigger.notify.notified() => {}
                _ = shutdown.changed() => return,
            }
            let asked = self.trigger.pending.swap(false, Ordering::SeqCst);
            let retry = self.config.busy_retry.0;
            let Discovery::Found(topology) = self.cache.snapshot().discovery else {
                tracing::debug!("no GPUs discovered; calibration waits");
                wait = retry;
                continue;
            };
            match self.idle(&topology).await {
                Ok(busy) if !busy.is_empty() => {
                    tracing::info!("GPUs busy, calibration skipped: {}", busy.join("; "));
                    self.cache.count_run(RunResult::SkippedBusy);
                    wait = retry;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot tell whether the GPUs are idle, calibration skipped: {e}"
                    );
                    self.cache.count_run(RunResult::SkippedBusy);
                    wait = retry;
                    continue;
                }
                Ok(_) => {}
            }
            if asked {
                tracing::info!("calibration requested through the API");
            }
            let calibrator = Calibrator {
                node: &self.node,
                cache: &self.cache,
                config: &self.config,
                microbench: &self.microbench,
            };
            let result = calibrator.calibrate(&topology, &mut shutdown).await;
            if result == RunResult::AbortedShutdown || *shutdown.borrow() {
                return;
            }
            wait = match result {
                RunResult::AbortedBusy => retry,
                _ => interval + jitter(self.config.jitter.0),
            };
        }
    }

    /// Busy GPUs before a run, read off the async threads.
    async fn idle(&self, topology: &Arc<Topology>) -> Result<Vec<String>, String> {
        let node = self.node.clone();
        let counters = tokio::task::spawn_blocking(move || node.counters())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(busy_gpus(
            &counters,
            topology,
            &self.config.idle,
            Check::BeforeRun,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Run;

    #[test]
    fn a_fresh_saved_calibration_is_not_redone_at_start() {
        let mut c = Calibration::default();
        assert_eq!(
            first_wait(&c, 1000.0, Duration::from_secs(3600)),
            Duration::ZERO
        );
        c.absorb(
            Run {
                started_at: 900.0,
                duration_s: 100.0,
                result: RunResult::Success,
                points_done: 1,
                points_total: 1,
                partial: false,
                failures: vec![],
                reason: None,
            },
            vec![],
        );
        assert_eq!(
            first_wait(&c, 1600.0, Duration::from_secs(3600)),
            Duration::from_secs(3000)
        );
        assert_eq!(
            first_wait(&c, 9000.0, Duration::from_secs(3600)),
            Duration::ZERO
        );
    }
}
