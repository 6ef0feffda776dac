//! When calibration runs, and how it stops.
//!
//! A run starts at start-up (unless the saved calibration is younger than `interval`), then
//! every `interval` plus a random share of `jitter`, or at once on `POST /v1/calibrate`. It
//! starts only when every GPU is idle: no compute process, utilisation and memory in use
//! under their thresholds. While it runs, the GPUs are checked every `busy_check_interval`;
//! a process that is not the agent stops the run at the next point, keeping what was
//! measured (`aborted_busy`). A watchdog bounds each point (`point_timeout`: a hung kernel
//! is reported and abandoned, never waited on) and the whole run (`run_timeout`). Shutdown
//! stops a run the same way, and what was measured is saved.

use crate::cache::{Cache, Discovery};
use crate::config::Config;
use crate::node::Node;
use crate::state::{self, Calibration, Run, RunResult};
use microbench::discovery::{Counters, Topology};
use microbench::sweep::{self, Sweep};
use record::Record;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{oneshot, watch, Notify};

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
}

/// Records and point failures of the run in progress.
#[derive(Debug, Default)]
struct Measured {
    records: Vec<Record>,
    failures: Vec<String>,
}

/// Why a run stopped early, as the worker sees it.
const GO: u8 = 0;
const STOP_BUSY: u8 = 1;
const STOP_SHUTDOWN: u8 = 2;
const STOP_WATCHDOG: u8 = 3;

/// Seconds since the Unix epoch.
pub fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
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

/// GPUs that are not idle, with the reason; `strict` adds utilisation and memory, which a
/// running calibration raises itself.
pub fn busy_gpus(
    counters: &[Counters],
    topology: &Topology,
    config: &Config,
    strict: bool,
) -> Vec<String> {
    let mut busy = Vec::new();
    for c in counters {
        let processes = c.processes.unwrap_or(0);
        let util = c.utilization_percent.unwrap_or(0);
        let memory_ratio = match (
            c.memory_used_bytes,
            topology.gpus.iter().find(|g| g.index == c.gpu),
        ) {
            (Some(used), Some(g)) if g.memory_bytes > 0 => used as f64 / g.memory_bytes as f64,
            _ => 0.0,
        };
        if processes > 0 {
            busy.push(format!(
                "GPU {} runs {processes} compute process(es)",
                c.gpu
            ));
        } else if strict && util > config.max_utilization_percent {
            busy.push(format!(
                "GPU {} at {util}% utilisation (max_utilization_percent {})",
                c.gpu, config.max_utilization_percent
            ));
        } else if strict && memory_ratio > config.max_memory_used_ratio {
            busy.push(format!(
                "GPU {} has {:.0}% of its memory in use (max_memory_used_ratio {})",
                c.gpu,
                memory_ratio * 100.0,
                config.max_memory_used_ratio
            ));
        }
    }
    busy
}

impl Scheduler {
    /// Runs until `shutdown` turns true; a run in progress is stopped and saved first.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let worker_alive = Arc::new(AtomicBool::new(false));
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
            if worker_alive.load(Ordering::SeqCst) {
                tracing::warn!(
                    "the last calibration is still stuck in a hung point; not starting another"
                );
                wait = retry;
                continue;
            }
            match self.idle(&topology, true).await {
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
            let result = self
                .calibrate(&topology, &mut shutdown, &worker_alive)
                .await;
            if result == RunResult::AbortedShutdown || *shutdown.borrow() {
                return;
            }
            wait = match result {
                RunResult::AbortedBusy => retry,
                _ => interval + jitter(self.config.jitter.0),
            };
        }
    }

    /// Busy GPUs, read off the async threads.
    async fn idle(&self, topology: &Arc<Topology>, strict: bool) -> Result<Vec<String>, String> {
        let node = self.node.clone();
        let counters = tokio::task::spawn_blocking(move || node.counters())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(busy_gpus(&counters, topology, &self.config, strict))
    }

    /// One run, start to saved result.
    async fn calibrate(
        &self,
        topology: &Arc<Topology>,
        shutdown: &mut watch::Receiver<bool>,
        worker_alive: &Arc<AtomicBool>,
    ) -> RunResult {
        let c = &self.config;
        let spec = sweep::Calibration {
            sweep: Sweep {
                min_bytes: c.min_bytes,
                max_bytes: c.max_bytes,
                factor: 2,
                increment: 0,
            },
            collective_dtype: c.dtype,
            gemm_dtypes: c.gemm_dtypes.clone(),
            iters: c.iters,
            warmup: c.warmup,
        };
        let started_at = now_s();
        let begun = Instant::now();
        let (plan, lacking) = match spec.plan(topology) {
            Ok(p) => p,
            Err(e) => {
                return self
                    .finish(
                        started_at,
                        begun,
                        RunResult::Failed,
                        Some(format!("no plan: {e}")),
                        (0, 0),
                        Vec::new(),
                        Vec::new(),
                    )
                    .await
            }
        };
        for d in lacking {
            tracing::info!("no {d} tensor cores on these GPUs; {d} GEMMs not measured");
        }
        let plan = Arc::new(plan);
        let total = plan.points.len();
        tracing::info!("calibration started: {total} points");
        self.cache.update(|s| s.running = true);

        let stop = Arc::new(AtomicU8::new(GO));
        let done = Arc::new(AtomicUsize::new(0));
        // Milliseconds after `begun` at which the current point started; u64::MAX between points.
        let point_started = Arc::new(AtomicU64::new(u64::MAX));
        // Shared as they grow, so a run abandoned in a hung point keeps what came before it.
        let measured: Arc<Mutex<Measured>> = Arc::default();
        let (tx, mut rx) = oneshot::channel();
        worker_alive.store(true, Ordering::SeqCst);
        let worker = {
            let (plan, node, stop, done, point_started, alive, measured) = (
                plan.clone(),
                self.node.clone(),
                stop.clone(),
                done.clone(),
                point_started.clone(),
                worker_alive.clone(),
                measured.clone(),
            );
            let node_name = self.cache.snapshot().node_name;
            let versions = topology.versions.clone();
            move || {
                let mut fatal = None;
                for point in &plan.points {
                    if stop.load(Ordering::SeqCst) != GO {
                        break;
                    }
                    point_started.store(begun.elapsed().as_millis() as u64, Ordering::SeqCst);
                    match node.measure(point, plan.iters, plan.warmup) {
                        Ok(outcome) => {
                            let at = now_s();
                            let Ok(mut m) = measured.lock() else {
                                fatal = Some("results lock poisoned".to_string());
                                break;
                            };
                            m.records.extend(outcome.records.into_iter().map(|mut r| {
                                r.group.node = Some(node_name.clone());
                                r.timestamp = Some(at);
                                if r.versions == record::Versions::default() {
                                    r.versions = versions.clone();
                                }
                                r
                            }));
                            m.failures.extend(
                                outcome
                                    .failures
                                    .into_iter()
                                    .map(|f| format!("{}: {}", f.point, f.error)),
                            );
                        }
                        Err(e) => {
                            fatal = Some(e.to_string());
                            break;
                        }
                    }
                    point_started.store(u64::MAX, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                }
                alive.store(false, Ordering::SeqCst);
                // The scheduler may have given up on a hung run; then nobody listens.
                let _ = tx.send(fatal);
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("calibration".into())
            .spawn(worker)
        {
            worker_alive.store(false, Ordering::SeqCst);
            return self
                .finish(
                    started_at,
                    begun,
                    RunResult::Failed,
                    Some(format!("cannot start the calibration thread: {e}")),
                    (0, total),
                    Vec::new(),
                    Vec::new(),
                )
                .await;
        }

        let mut check = tokio::time::interval(c.busy_check_interval.0);
        let mut reason: Option<String> = None;
        let mut deadline: Option<Instant> = None;
        let outcome = loop {
            tokio::select! {
                got = &mut rx => break got.ok(),
                _ = shutdown.changed() => {
                    stop.store(STOP_SHUTDOWN, Ordering::SeqCst);
                    reason.get_or_insert_with(|| "the agent is stopping".into());
                    // A point in flight gets up to a second to finish; SIGTERM must end the
                    // process within two.
                    break tokio::time::timeout(Duration::from_secs(1), &mut rx).await.ok().and_then(Result::ok);
                }
                _ = check.tick() => {
                    if stop.load(Ordering::SeqCst) == GO {
                        match self.idle(topology, false).await {
                            Ok(busy) if !busy.is_empty() => {
                                stop.store(STOP_BUSY, Ordering::SeqCst);
                                reason = Some(format!("a job appeared: {}", busy.join("; ")));
                                deadline = Some(Instant::now() + c.point_timeout.0);
                            }
                            Ok(_) => {}
                            Err(e) => tracing::warn!("idle check during calibration failed: {e}"),
                        }
                    }
                    if stop.load(Ordering::SeqCst) == GO && begun.elapsed() > c.run_timeout.0 {
                        stop.store(STOP_WATCHDOG, Ordering::SeqCst);
                        reason = Some(format!("the run passed run_timeout {}", c.run_timeout));
                        deadline = Some(Instant::now() + c.point_timeout.0);
                    }
                    let at = point_started.load(Ordering::SeqCst);
                    let point_ms = begun.elapsed().as_millis() as u64;
                    let hung = at != u64::MAX && point_ms.saturating_sub(at) > c.point_timeout.0.as_millis() as u64;
                    if hung || deadline.is_some_and(|d| Instant::now() > d) {
                        stop.store(STOP_WATCHDOG, Ordering::SeqCst);
                        let point = plan.points.get(done.load(Ordering::SeqCst));
                        let point = point.map_or_else(|| "a point".to_string(), |p| format!("point `{p}`"));
                        reason = Some(format!(
                            "{point} hung for more than point_timeout {}; abandoned",
                            c.point_timeout
                        ));
                        tracing::error!("calibration watchdog: {}", reason.as_deref().unwrap_or_default());
                        break None;
                    }
                }
            }
        };
        let points_done = done.load(Ordering::SeqCst);
        let result = match (outcome, stop.load(Ordering::SeqCst)) {
            (Some(Some(fatal)), _) => {
                reason = Some(fatal);
                RunResult::Failed
            }
            (_, STOP_BUSY) => RunResult::AbortedBusy,
            (_, STOP_SHUTDOWN) => RunResult::AbortedShutdown,
            (Some(None), GO) => RunResult::Success,
            // A hung point, or the run past its limit.
            _ => RunResult::Watchdog,
        };
        // What the worker measured so far; a hung worker adds nothing after this.
        let Measured { records, failures } = measured
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
        self.finish(
            started_at,
            begun,
            result,
            reason,
            (points_done, total),
            records,
            failures,
        )
        .await
    }

    /// Records the run, saves the state file and updates the cache.
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        started_at: f64,
        begun: Instant,
        result: RunResult,
        reason: Option<String>,
        (points_done, points_total): (usize, usize),
        records: Vec<Record>,
        failures: Vec<String>,
    ) -> RunResult {
        let run = Run {
            started_at,
            duration_s: begun.elapsed().as_secs_f64(),
            result,
            points_done,
            points_total,
            failures,
            reason,
        };
        let measured = records.len();
        let mut calibration = (*self.cache.snapshot().calibration).clone();
        calibration.node = self.cache.snapshot().node_name;
        calibration.absorb(run.clone(), records);
        let dir = self.config.state_dir.clone();
        let saved = Arc::new(calibration);
        let to_save = saved.clone();
        match tokio::task::spawn_blocking(move || state::save(&dir, &to_save)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("{e}; the result is served but not kept"),
            Err(e) => tracing::error!("saving the state file: {e}"),
        }
        self.cache.update(|s| {
            s.calibration = saved;
            s.running = false;
        });
        self.cache.count_run(result);
        let line = format!(
            "calibration {}: {points_done}/{points_total} points, {measured} records, {} failed, {:.1} s{}",
            result.as_str(),
            run.failures.len(),
            run.duration_s,
            run.reason.map(|r| format!(" ({r})")).unwrap_or_default()
        );
        match result {
            RunResult::Success => tracing::info!("{line}"),
            _ => tracing::warn!("{line}"),
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(gpu: u32, util: u32, processes: u32, used: u64) -> Counters {
        Counters {
            gpu,
            utilization_percent: Some(util),
            processes: Some(processes),
            memory_used_bytes: Some(used),
            ..Counters::default()
        }
    }

    #[test]
    fn idle_gate_names_the_busy_gpu_and_why() {
        let node =
            microbench::SimBackend::new(microbench::sim::profile("dgx-h100").unwrap(), vec![], 1)
                .unwrap();
        let t = microbench::Backend::topology(&node).unwrap();
        let config = Config::default();
        let gib = 1 << 30;
        let readings = [
            counters(0, 0, 0, 0),
            counters(1, 50, 0, 0),
            counters(2, 0, 0, 40 * gib),
            counters(3, 0, 1, 0),
        ];
        let busy = busy_gpus(&readings, &t, &config, true);
        assert_eq!(busy.len(), 3, "{busy:?}");
        assert!(busy[0].starts_with("GPU 1 at 50% utilisation"));
        assert!(busy[1].starts_with("GPU 2 has 50% of its memory in use"));
        assert_eq!(busy[2], "GPU 3 runs 1 compute process(es)");
        // During a run the agent's own load is expected: only other processes count.
        assert_eq!(
            busy_gpus(&readings, &t, &config, false),
            vec!["GPU 3 runs 1 compute process(es)"]
        );
    }

    /// A node whose points never finish in time, as a hung kernel would.
    struct Hung(microbench::SimBackend);

    impl Node for Hung {
        fn topology(&self) -> microbench::Result<Topology> {
            microbench::Backend::topology(&self.0)
        }
        fn counters(&self) -> microbench::Result<Vec<Counters>> {
            Ok(Vec::new())
        }
        fn measure(
            &self,
            _point: &microbench::kernels::Point,
            _iters: u32,
            _warmup: u32,
        ) -> microbench::Result<microbench::Outcome> {
            std::thread::sleep(Duration::from_secs(3));
            Ok(microbench::Outcome::default())
        }
        fn source(&self) -> record::Backend {
            record::Backend::Sim
        }
    }

    #[tokio::test]
    async fn a_hung_point_is_reported_and_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let sim =
            microbench::SimBackend::new(microbench::sim::profile("dgx-h100").unwrap(), vec![], 1)
                .unwrap();
        let topology = Arc::new(microbench::Backend::topology(&sim).unwrap());
        let config = Config {
            state_dir: dir.path().to_path_buf(),
            point_timeout: crate::config::Span(Duration::from_millis(200)),
            busy_check_interval: crate::config::Span(Duration::from_millis(50)),
            ..Config::default()
        };
        let scheduler = Scheduler {
            node: Arc::new(Hung(sim)),
            cache: Arc::new(Cache::new(
                "n1".into(),
                record::Backend::Sim,
                Calibration::default(),
            )),
            config: Arc::new(config),
            trigger: Arc::new(Trigger::default()),
        };
        let (_tx, mut rx) = watch::channel(false);
        let alive = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let result = scheduler.calibrate(&topology, &mut rx, &alive).await;
        assert_eq!(result, RunResult::Watchdog);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        // The stuck worker is still in its point; the next run waits for it to leave.
        assert!(alive.load(Ordering::SeqCst));
        let s = scheduler.cache.snapshot();
        let run = s.calibration.last_run.clone().unwrap();
        assert!(run
            .reason
            .unwrap()
            .contains("hung for more than point_timeout 200ms"));
        assert!(!s.running);
        assert!(dir.path().join(state::FILE_NAME).exists());
    }

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
