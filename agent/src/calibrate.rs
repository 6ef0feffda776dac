//! One calibration run, in four steps: [`plan`] (what the child will time, and its command
//! line), [`Calibrator::run_child`] (`microbench calibrate --json`, stopped when a job
//! appears, the watchdog fires or the agent stops), collect (each record stamped for this
//! node as it arrives) and [`Calibrator::persist`] (state file and cache).
//!
//! The run's GPU work happens in the child only (issue 10): a point that hangs is ended with
//! its process, so the next run never waits on it, and a child that panics or exits non-zero
//! costs that run alone. What the child measured before it ended is kept; the run is then
//! marked partial.

use crate::cache::Cache;
use crate::child::{Child, Event, RUN_TOKEN_ENV};
use crate::config::Config;
use crate::identity::Identity;
use crate::idle::{busy_gpus, now_s, Check};
use crate::node::Node;
use crate::state::{self, Run, RunResult};
use microbench::discovery::Topology;
use microbench::plan::{closes_point, Plan};
use microbench::sweep::{self, Sweep};
use record::Record;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Time the child gets between SIGTERM and SIGKILL. microbench does not catch SIGTERM, so it
/// dies at once; the grace bounds a child stuck in the driver. SIGTERM to the agent must end
/// the agent, child included, within 2 s.
pub const STOP_GRACE: Duration = Duration::from_millis(500);

/// Longest a stopped child's last output and exit are waited for, after the grace: with it,
/// a child stuck in the driver still leaves time to save the run within the agent's 1.5 s
/// for stopping the scheduler.
const STOP_WAIT: Duration = Duration::from_millis(500);

/// stderr lines of the child kept for the run's reason when it fails.
const TAIL_LINES: usize = 5;

/// Longest the child's latest line waits to be logged while the child runs on: a child that
/// fails exits within milliseconds of its last words.
const HOLD: Duration = Duration::from_secs(1);

/// microbench's exit codes that mean the plan ran: 0 every point measured, 3 some failed
/// (2 is a usage error; issue 11).
const RAN: [i32; 2] = [0, 3];

/// A run's plan, and the child command line that runs the same plan.
#[derive(Debug)]
pub struct Planned {
    /// The points, in the order the child times them.
    pub plan: Plan,
    /// microbench's arguments.
    pub args: Vec<String>,
}

/// The plan `config` asks for on `topology`, and the microbench arguments that make the child
/// build the same one (it plans from the same topology and flags).
pub fn plan(config: &Config, topology: &Topology, node: &dyn Node) -> microbench::Result<Planned> {
    let spec = sweep::Calibration {
        sweep: Sweep {
            min_bytes: config.min_bytes,
            max_bytes: config.max_bytes,
            factor: 2,
            increment: 0,
        },
        collective_dtype: config.dtype,
        gemm_dtypes: config.gemm_dtypes.clone(),
        iters: config.iters,
        warmup: config.warmup,
    };
    let (plan, lacking) = spec.plan(topology)?;
    for d in lacking {
        tracing::info!("no {d} tensor cores on these GPUs; {d} GEMMs not measured");
    }
    let gemm_dtypes: Vec<&str> = spec.gemm_dtypes.iter().map(|d| d.as_str()).collect();
    let mut args: Vec<String> = [
        "calibrate",
        "--json",
        "--minbytes",
        &spec.sweep.min_bytes.to_string(),
        "--maxbytes",
        &spec.sweep.max_bytes.to_string(),
        "--stepfactor",
        &spec.sweep.factor.to_string(),
        "--iters",
        &spec.iters.to_string(),
        "--warmup_iters",
        &spec.warmup.to_string(),
        "--datatype",
        spec.collective_dtype.as_str(),
        "--gemm-dtype",
        &gemm_dtypes.join(","),
    ]
    .map(String::from)
    .into();
    args.extend(node.backend_args());
    Ok(Planned { plan, args })
}

/// How the child's part ended.
#[derive(Debug)]
enum Ending {
    /// It exited by itself; `None` when its status could not be read.
    Exited(Option<ExitStatus>),
    /// The agent stopped it, with the run's result and why.
    Stopped(RunResult, String),
    /// It could not be started.
    NotStarted(String),
}

/// What the child said: records stamped for this node, skipped points, its last stderr lines.
#[derive(Debug, Default)]
struct Collected {
    records: Vec<Record>,
    failures: Vec<String>,
    points_done: usize,
    tail: VecDeque<String>,
    /// The child's latest line, not logged yet, and when it came: when the child then fails,
    /// it is the reason the run's own line gives, and is logged there alone (one line for a
    /// driver without a GPU, not the same words twice); otherwise it is logged with the next
    /// line, at the first idle check [`HOLD`] after it came, or at the end.
    held: Option<(String, Instant)>,
}

/// What a run needs from the agent.
pub struct Calibrator<'a> {
    /// The hardware.
    pub node: &'a Arc<dyn Node>,
    /// Where results go.
    pub cache: &'a Cache,
    /// Settings.
    pub config: &'a Config,
    /// The microbench binary.
    pub microbench: &'a PathBuf,
}

impl Calibrator<'_> {
    /// One run, plan to saved result.
    pub async fn calibrate(
        &self,
        topology: &Arc<Topology>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> RunResult {
        let started_at = now_s();
        let begun = Instant::now();
        let planned = match plan(self.config, topology, self.node.as_ref()) {
            Ok(p) => p,
            Err(e) => {
                let ending = Ending::NotStarted(format!("no plan: {e}"));
                return self
                    .persist(started_at, begun, ending, Collected::default(), 0)
                    .await;
            }
        };
        let total = planned.plan.points.len();
        tracing::info!("calibration started: {total} points");
        self.cache.update(|s| s.running = true);
        let (collected, ending) = self.run_child(&planned, topology, shutdown).await;
        self.persist(started_at, begun, ending, collected, total)
            .await
    }

    /// Runs the child until it exits or is stopped, collecting what it says.
    async fn run_child(
        &self,
        planned: &Planned,
        topology: &Arc<Topology>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> (Collected, Ending) {
        let c = self.config;
        let mut collected = Collected::default();
        let token = new_token();
        let mut child = match Child::spawn(self.microbench, &planned.args, &token, STOP_GRACE) {
            Ok(child) => child,
            Err(e) => return (collected, Ending::NotStarted(e.to_string())),
        };
        let identity = Identity::new(child.pid(), RUN_TOKEN_ENV, &token, &c.host_proc);
        let node_name = self.cache.snapshot().node_name;
        let begun = Instant::now();
        let mut last_point = Instant::now();
        let mut stopped: Option<(RunResult, String)> = None;
        // Once stopped: when to stop waiting for the child's exit.
        let mut give_up: Option<tokio::time::Instant> = None;
        let mut check = tokio::time::interval(c.idle.busy_check_interval.0);
        let status = loop {
            tokio::select! {
                event = child.next() => match event {
                    Some(Event::Exited(status)) => break status,
                    None => break None,
                    Some(event) => {
                        if collected.take(event, &node_name, topology, self.node.as_ref()) {
                            last_point = Instant::now();
                        }
                    }
                },
                _ = shutdown.changed(), if stopped.is_none() => {
                    stopped = Some((RunResult::AbortedShutdown, "the agent is stopping".into()));
                }
                _ = check.tick(), if stopped.is_none() => {
                    collected.log_held(HOLD);
                    stopped = self.watch(&identity, topology, begun, last_point, planned, collected.points_done).await;
                }
                _ = tokio::time::sleep_until(give_up.unwrap_or_else(tokio::time::Instant::now)), if give_up.is_some() => {
                    tracing::error!("the calibration child did not end after SIGKILL; leaving it");
                    break None;
                }
            }
            if stopped.is_some() && give_up.is_none() {
                child.stop();
                give_up = Some(tokio::time::Instant::now() + STOP_GRACE + STOP_WAIT);
            }
        };
        let ending = match stopped {
            Some((result, reason)) => Ending::Stopped(result, reason),
            None => Ending::Exited(status),
        };
        (collected, ending)
    }

    /// The checks of a running child: a job on its GPUs, the run's time limit, a point that
    /// takes too long. The reason to stop it, when there is one.
    async fn watch(
        &self,
        identity: &Identity,
        topology: &Topology,
        begun: Instant,
        last_point: Instant,
        planned: &Planned,
        points_done: usize,
    ) -> Option<(RunResult, String)> {
        let c = self.config;
        let node = self.node.clone();
        match tokio::task::spawn_blocking(move || node.counters()).await {
            Ok(Ok(counters)) => {
                let busy = busy_gpus(&counters, topology, &c.idle, Check::During(identity));
                if !busy.is_empty() {
                    return Some((
                        RunResult::AbortedBusy,
                        format!("a job appeared: {}", busy.join("; ")),
                    ));
                }
            }
            Ok(Err(e)) => tracing::warn!("idle check during calibration failed: {e}"),
            Err(e) => tracing::warn!("idle check during calibration failed: {e}"),
        }
        if begun.elapsed() > c.run_timeout.0 {
            return Some((
                RunResult::Watchdog,
                format!("the run passed run_timeout {}", c.run_timeout),
            ));
        }
        if last_point.elapsed() > c.point_timeout.0 {
            let point = planned
                .plan
                .points
                .get(points_done)
                .map_or_else(|| "a point".to_string(), |p| format!("point `{p}`"));
            let reason = format!(
                "{point} hung for more than point_timeout {}; the child was stopped",
                c.point_timeout
            );
            tracing::error!("calibration watchdog: {reason}");
            return Some((RunResult::Watchdog, reason));
        }
        None
    }

    /// Records the run, saves the state file and updates the cache.
    async fn persist(
        &self,
        started_at: f64,
        begun: Instant,
        ending: Ending,
        collected: Collected,
        points_total: usize,
    ) -> RunResult {
        let quoted = matches!(ending, Ending::Exited(_));
        let (result, reason) = judge(ending, &collected);
        let mut collected = collected;
        if !(quoted && result == RunResult::Failed) {
            collected.log_held(Duration::ZERO);
        }
        let Collected {
            records,
            failures,
            points_done,
            ..
        } = collected;
        let run = Run {
            started_at,
            duration_s: begun.elapsed().as_secs_f64(),
            result,
            points_done,
            points_total,
            partial: result != RunResult::Success && !records.is_empty(),
            failures,
            reason,
        };
        let measured = records.len();
        let mut calibration = (*self.cache.snapshot().calibration).clone();
        calibration.node = self.cache.snapshot().node_name;
        let collapsed = calibration.absorb(run.clone(), records);
        if collapsed > 0 {
            // Every record the child emits is a point of its own: one that replaced another
            // of this run is a measurement lost (issue 31, item 1).
            tracing::warn!(
                "calibration: {collapsed} of {measured} records measured a point another \
                 record of this run measured too, and only the later of each is kept"
            );
        }
        let dir = self.config.state_dir.clone();
        let saved = Arc::new(calibration);
        let to_save = saved.clone();
        let kept = match tokio::task::spawn_blocking(move || state::save(&dir, &to_save)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::error!("{e}; the result is served but not kept");
                false
            }
            Err(e) => {
                tracing::error!("saving the state file: {e}");
                false
            }
        };
        self.cache.update(|s| {
            s.calibration = saved;
            s.running = false;
            s.state_write_failures += u64::from(!kept);
        });
        self.cache.count_run(result);
        let line = format!(
            "calibration {}: {points_done}/{points_total} points, {measured} records{}, {} failed, {:.1} s{}",
            result.as_str(),
            if run.partial { " (partial)" } else { "" },
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

impl Collected {
    /// Logs the held line, if it was held at least `after`.
    fn log_held(&mut self, after: Duration) {
        if let Some((line, _)) = self.held.take_if(|(_, at)| at.elapsed() >= after) {
            tracing::warn!("calibration child: {line}");
        }
    }

    /// Takes one event of the child; true when it finished a point.
    fn take(
        &mut self,
        event: Event,
        node_name: &str,
        topology: &Topology,
        node: &dyn Node,
    ) -> bool {
        match event {
            Event::Record(record) => {
                let record = stamp(*record, node_name, topology);
                node.observe(&record);
                let closes = closes_point(&record);
                self.records.push(record);
                self.points_done += usize::from(closes);
                closes
            }
            Event::Skipped(point) => {
                self.failures.push(point);
                self.points_done += 1;
                true
            }
            Event::Debug(note) => {
                tracing::debug!("calibration child: {note}");
                false
            }
            Event::Line(line) => {
                self.log_held(Duration::ZERO);
                if self.tail.len() == TAIL_LINES {
                    self.tail.pop_front();
                }
                self.tail.push_back(line.clone());
                self.held = Some((line, Instant::now()));
                false
            }
            Event::Exited(_) => false,
        }
    }
}

/// A record of the child as this agent serves it: its node name, a timestamp, the node's
/// software versions where the child gave none.
fn stamp(mut record: Record, node_name: &str, topology: &Topology) -> Record {
    record.group.node = Some(node_name.to_string());
    record.timestamp = record.timestamp.or_else(|| Some(now_s()));
    if record.versions == record::Versions::default() {
        record.versions = topology.versions.clone();
    }
    record
}

/// The run's result and reason from how the child ended.
fn judge(ending: Ending, collected: &Collected) -> (RunResult, Option<String>) {
    let said = || {
        collected
            .tail
            .back()
            .map(|l| format!(": {l}"))
            .unwrap_or_default()
    };
    match ending {
        Ending::Stopped(result, reason) => (result, Some(reason)),
        Ending::NotStarted(reason) => (RunResult::Failed, Some(reason)),
        Ending::Exited(Some(status)) if status.code().is_some_and(|c| RAN.contains(&c)) => {
            (RunResult::Success, None)
        }
        Ending::Exited(Some(status)) => (
            RunResult::Failed,
            Some(format!("microbench ended with {status}{}", said())),
        ),
        Ending::Exited(None) => (
            RunResult::Failed,
            Some(format!("microbench's exit status was lost{}", said())),
        ),
    }
}

/// A token new for every run, so a leftover child of an earlier run is not taken for this one.
fn new_token() -> String {
    let random = std::collections::hash_map::RandomState::new();
    format!(
        "{:016x}",
        random.hash_one((std::process::id(), Instant::now()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackendKind, IdleGate, SimConfig, Span};
    use crate::state::Calibration;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    const RECORD: &str = r#"{"kind":"hbm_copy","backend":"sim","gpus":[0],"scope":"intra_node","ranks":1,"bytes":1024,"dtype":"uint8","time_s":1e-6,"clock":"model"}"#;

    /// A stand-in for microbench: a shell script that ignores its arguments.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    struct Setup {
        _dir: tempfile::TempDir,
        dir: PathBuf,
        node: Arc<dyn Node>,
        cache: Cache,
        config: Config,
        topology: Arc<Topology>,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let defaults = Config::default();
        let config = Config {
            state_dir: dir.path().to_path_buf(),
            backend: BackendKind::Sim,
            sim: SimConfig {
                profile: Some("dgx-h100".into()),
                ..defaults.sim.clone()
            },
            min_bytes: 1 << 20,
            max_bytes: 1 << 20,
            point_timeout: Span(Duration::from_millis(300)),
            idle: IdleGate {
                busy_check_interval: Span(Duration::from_millis(50)),
                ..defaults.idle
            },
            ..defaults
        };
        let node: Arc<dyn Node> = crate::node::build(&config).unwrap().into();
        let topology = Arc::new(node.topology().unwrap());
        Setup {
            dir: dir.path().to_path_buf(),
            _dir: dir,
            node,
            cache: Cache::new("n1".into(), record::Backend::Sim, Calibration::default()),
            config,
            topology,
        }
    }

    impl Setup {
        async fn run(&self, microbench: &PathBuf) -> (RunResult, Run, Duration) {
            let calibrator = Calibrator {
                node: &self.node,
                cache: &self.cache,
                config: &self.config,
                microbench,
            };
            let (_tx, mut rx) = watch::channel(false);
            let start = Instant::now();
            let result = calibrator.calibrate(&self.topology, &mut rx).await;
            let run = self.cache.snapshot().calibration.last_run.clone().unwrap();
            (result, run, start.elapsed())
        }
    }

    #[tokio::test]
    async fn a_hung_child_is_stopped_at_the_point_timeout_and_the_next_run_proceeds() {
        let s = setup();
        let hangs = script(&s.dir, "hangs", &format!("echo '{RECORD}'\nexec sleep 30"));
        let (result, run, took) = s.run(&hangs).await;
        assert_eq!(result, RunResult::Watchdog);
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert!(run
            .reason
            .unwrap()
            .contains("hung for more than point_timeout 300ms"));
        assert!(run.partial);
        assert_eq!(run.points_done, 1);
        assert_eq!(s.cache.snapshot().calibration.records.len(), 1);
        assert!(!s.cache.snapshot().running);
        assert!(s.dir.join(state::FILE_NAME).exists());
        // Nothing of the hung run is left to wait for.
        let works = script(&s.dir, "works", &format!("echo '{RECORD}'"));
        let (result, run, _) = s.run(&works).await;
        assert_eq!(result, RunResult::Success, "{run:?}");
        assert!(!run.partial);
    }

    #[tokio::test]
    async fn a_child_that_dies_is_reported_with_its_last_words() {
        let s = setup();
        let dies = script(
            &s.dir,
            "dies",
            &format!("echo '{RECORD}'\necho 'microbench: internal error: boom' >&2\nexit 101"),
        );
        let (result, run, _) = s.run(&dies).await;
        assert_eq!(result, RunResult::Failed);
        assert_eq!(
            run.reason.as_deref(),
            Some("microbench ended with exit status: 101: microbench: internal error: boom")
        );
        assert!(run.partial);
        let missing = s.dir.join("no-such-microbench");
        let (result, run, _) = s.run(&missing).await;
        assert_eq!(result, RunResult::Failed);
        assert!(run.reason.unwrap().contains("no-such-microbench"));
    }

    /// What the agent logs on this thread while `run` runs.
    async fn logged<F: std::future::Future>(run: F) -> (F::Output, String) {
        #[derive(Clone, Default)]
        struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let out = {
            let _guard = tracing::subscriber::set_default(subscriber);
            run.await
        };
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        (out, text)
    }

    /// The child's lines are logged once each: the last words of a child that fails on the
    /// run's own line with its reason (issue 29: a driver without a GPU said it twice),
    /// every line of a run that ends otherwise as a line of its own.
    #[tokio::test]
    async fn each_line_of_the_child_is_logged_once() {
        let s = setup();
        let dies = script(
            &s.dir,
            "dies",
            "echo 'microbench: note: first' >&2\necho 'microbench: fatal: no GPU' >&2\nexit 1",
        );
        let (_, log) = logged(s.run(&dies)).await;
        assert_eq!(log.matches("microbench: note: first").count(), 1, "{log}");
        assert_eq!(log.matches("microbench: fatal: no GPU").count(), 1, "{log}");
        assert!(
            log.contains("calibration child: microbench: note: first"),
            "{log}"
        );
        assert!(
            log.lines().any(|l| l.contains("calibration failed: ")
                && l.ends_with(
                    "(microbench ended with exit status: 1: microbench: fatal: no GPU)"
                )),
            "{log}"
        );
        let works = script(
            &s.dir,
            "works",
            &format!(
                "echo 'microbench: note: a' >&2\necho '{RECORD}'\necho 'microbench: note: b' >&2"
            ),
        );
        let (_, log) = logged(s.run(&works)).await;
        for line in [
            "calibration child: microbench: note: a",
            "calibration child: microbench: note: b",
        ] {
            assert_eq!(log.matches(line).count(), 1, "{log}");
        }
    }

    /// Issue 31, item 1: records of one run that collapse into one point when stored were
    /// dropped unseen; the run's log line says how many.
    #[tokio::test]
    async fn r31_1_records_a_run_collapses_on_store_are_counted_in_the_log() {
        let s = setup();
        let twice = script(
            &s.dir,
            "twice",
            &format!("echo '{RECORD}'\necho '{RECORD}'"),
        );
        let (_, log) = logged(s.run(&twice)).await;
        assert_eq!(s.cache.snapshot().calibration.records.len(), 1);
        assert!(
            log.contains(
                "calibration: 1 of 2 records measured a point another record of this run \
                 measured too, and only the later of each is kept"
            ),
            "{log}"
        );
        // A run whose records are distinct points says nothing of the kind, and a later run
        // replacing the stored point is no loss.
        let once = script(&s.dir, "once", &format!("echo '{RECORD}'"));
        let (_, log) = logged(s.run(&once)).await;
        assert_eq!(s.cache.snapshot().calibration.records.len(), 1);
        assert!(!log.contains("only the later of each is kept"), "{log}");
    }

    #[test]
    fn the_child_plans_what_the_agent_plans() {
        let s = setup();
        let planned = plan(&s.config, &s.topology, s.node.as_ref()).unwrap();
        let args = planned.args.join(" ");
        assert!(
            args.starts_with(
                "calibrate --json --minbytes 1048576 --maxbytes 1048576 --stepfactor 2 \
                 --iters 20 --warmup_iters 5 --datatype bf16 --gemm-dtype bf16,fp16,fp8_e4m3 \
                 --backend sim --profile dgx-h100"
            ),
            "{args}"
        );
        assert!(!planned.plan.points.is_empty());
    }
}
