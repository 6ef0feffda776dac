//! What the scheduler and the sampler last learnt, for the HTTP handlers and the metric
//! collectors to read. Readers take a cheap snapshot (shared `Arc`s) and never wait on NVML
//! or on a benchmark.

use crate::fabric::Fabric;
use crate::state::{Calibration, RunResult};
use microbench::discovery::{Counters, Topology};
use std::sync::{Arc, RwLock};

/// Why the agent cannot see GPUs: the `reason` label of `meshfit_up 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownReason {
    /// No NVIDIA driver (NVML cannot be loaded, or the kernel module is absent).
    NoDriver,
    /// NVML loaded but discovery failed.
    DiscoveryFailed,
    /// Discovery found no GPU.
    NoGpus,
}

impl DownReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DownReason::NoDriver => "no_driver",
            DownReason::DiscoveryFailed => "discovery_failed",
            DownReason::NoGpus => "no_gpus",
        }
    }
}

/// Where discovery stands.
#[derive(Debug, Clone, Default)]
pub enum Discovery {
    /// Not tried yet.
    #[default]
    Pending,
    /// The node's GPUs, links and NICs.
    Found(Arc<Topology>),
    /// No GPUs to work with, and why.
    Down {
        /// The label value.
        reason: DownReason,
        /// The error, for people.
        message: String,
    },
}

impl Discovery {
    /// The topology, once discovery has found it.
    pub fn found(&self) -> Option<&Arc<Topology>> {
        match self {
            Discovery::Found(t) => Some(t),
            _ => None,
        }
    }
}

/// The agent's own process, read by the sampler from /proc, for the standard `process_*`
/// families (host figures are node_exporter's to export).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Process {
    /// Resident memory in bytes.
    pub resident_bytes: u64,
    /// User plus system CPU time in seconds.
    pub cpu_seconds: f64,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors; 0 where unlimited or unknown.
    pub max_fds: u64,
}

/// Everything the collectors read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The `hostname` label.
    pub node_name: String,
    /// What produces the numbers: `sim` or `cuda`.
    pub source: record::Backend,
    /// Discovery.
    pub discovery: Discovery,
    /// The calibration served (loaded at start, replaced after each run).
    pub calibration: Arc<Calibration>,
    /// The last multi-node fabric run's results, from `<state_dir>/fabric.jsonl`.
    pub fabric: Arc<Fabric>,
    /// Runs since the agent started, by result ([`RunResult::ALL`] order).
    pub runs_total: [u64; RunResult::ALL.len()],
    /// True while a calibration runs.
    pub running: bool,
    /// Parts of the state file not trusted at start (another node's, a last success in the
    /// future, negative times); the log says which.
    pub state_distrusted: u64,
    /// State file writes that failed since the agent started: results served but not kept.
    pub state_write_failures: u64,
    /// Live counters per GPU from the last good sample.
    pub counters: Arc<Vec<Counters>>,
    /// When that sample was taken, seconds since the Unix epoch.
    pub counters_at: Option<f64>,
    /// The agent's process figures.
    pub process: Process,
    /// When the sampler last completed a pass, seconds since the Unix epoch.
    pub sampler_last_pass: Option<f64>,
    /// Bumped by every change, so rendered text can be reused until the next one.
    pub generation: u64,
}

/// The shared cache.
#[derive(Debug)]
pub struct Cache(RwLock<Snapshot>);

impl Cache {
    /// An empty cache for `node_name`.
    pub fn new(node_name: String, source: record::Backend, calibration: Calibration) -> Cache {
        Cache(RwLock::new(Snapshot {
            node_name,
            source,
            discovery: Discovery::Pending,
            calibration: Arc::new(calibration),
            fabric: Arc::default(),
            runs_total: [0; RunResult::ALL.len()],
            running: false,
            state_distrusted: 0,
            state_write_failures: 0,
            counters: Arc::new(Vec::new()),
            counters_at: None,
            process: Process::default(),
            sampler_last_pass: None,
            generation: 0,
        }))
    }

    /// A copy of the current state: `Arc` clones, no waiting on writers beyond a field update.
    pub fn snapshot(&self) -> Snapshot {
        // A writer that panicked left whole fields behind, never half a field: keep serving.
        match self.0.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Changes the state.
    pub fn update(&self, change: impl FnOnce(&mut Snapshot)) {
        let mut s = match self.0.write() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        change(&mut s);
        s.generation += 1;
    }

    /// Counts a finished run.
    pub fn count_run(&self, result: RunResult) {
        self.update(|s| {
            if let Some(i) = RunResult::ALL.iter().position(|r| *r == result) {
                s.runs_total[i] += 1;
            }
        });
    }
}
