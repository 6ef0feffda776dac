//! The hardware the agent watches: this node's GPUs through NVML, or the sim.
//!
//! [`Node`] is what the scheduler and the sampler need: discovery, what runs on each GPU and
//! live counters, and the microbench flags that time the same node in the calibration child.
//! The agent itself never loads CUDA, cuBLAS or NCCL (issue 10). Every call blocks, so
//! callers run it off the async threads.

use crate::config::{BackendKind, Config};
use crate::error::Result;
use microbench::discovery::{self, Counters, Topology};
use microbench::sim::{self, ProcessTable, SimBackend};
use microbench::Backend;
use record::Record;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, RwLock};

/// One node's GPUs.
pub trait Node: Send + Sync {
    /// What the node looks like.
    fn topology(&self) -> microbench::Result<Topology>;

    /// Live counters per GPU, including what runs on it.
    fn counters(&self) -> microbench::Result<Vec<Counters>>;

    /// What produced the numbers: `sim` or `cuda`, for the `backend` label.
    fn source(&self) -> record::Backend;

    /// The microbench flags that select this node's backend in the calibration child.
    fn backend_args(&self) -> Vec<String>;

    /// A record the child measured on this node; the sim counts its NVLink traffic.
    fn observe(&self, _record: &Record) {}
}

/// The sim's GPU process table, in the state directory: the calibration child holds the GPUs
/// there while it lives, and the sim node reports it like NVML would.
pub const SIM_PROCESSES_DIR: &str = "sim-gpu-processes";

/// Builds the node `config` asks for. The sim's profile is looked up here and its faults and
/// busy GPUs held against it, so a bad one stops the start.
pub fn build(config: &Config) -> Result<Box<dyn Node>> {
    Ok(match config.backend {
        BackendKind::Nccl => Box::new(GpuNode::default()),
        BackendKind::Sim => {
            let c = &config.sim;
            let name = c.profile.as_deref().unwrap_or_default();
            let mut backend = SimBackend::new(sim::profile(name)?, c.faults.clone(), c.seed)?;
            backend.set_busy(&c.busy)?;
            let processes = config.state_dir.join(SIM_PROCESSES_DIR);
            let mut args = vec![
                "--backend".to_string(),
                "sim".into(),
                "--profile".into(),
                name.into(),
                "--seed".into(),
                c.seed.to_string(),
                "--sim-point-delay-ms".into(),
                c.point_delay.0.as_millis().to_string(),
                "--sim-processes".into(),
                processes.display().to_string(),
                "--sim-pid-offset".into(),
                c.pid_offset.to_string(),
            ];
            for f in &c.faults {
                args.extend(["--fault".to_string(), f.to_string()]);
            }
            Box::new(SimNode {
                base_busy: c.busy.clone(),
                backend: RwLock::new(backend),
                busy_file: c.busy_file.clone(),
                processes: ProcessTable::new(processes, c.pid_offset),
                args,
                traffic: Mutex::new(Vec::new()),
            })
        }
    })
}

/// This node's GPUs: NVML for discovery and counters, kept loaded once it loads.
#[derive(Default)]
pub struct GpuNode {
    live: OnceLock<discovery::LiveReader>,
}

impl Node for GpuNode {
    fn topology(&self) -> microbench::Result<Topology> {
        discovery::discover()
    }

    fn counters(&self) -> microbench::Result<Vec<Counters>> {
        let live = match self.live.get() {
            Some(live) => live,
            None => {
                let loaded = discovery::LiveReader::new()?;
                self.live.get_or_init(|| loaded)
            }
        };
        live.read()
    }

    fn source(&self) -> record::Backend {
        // `--backend nccl`: the child times collectives with NCCL and GEMMs with cuBLASLt.
        record::Backend::Nccl
    }

    fn backend_args(&self) -> Vec<String> {
        vec!["--backend".into(), "nccl".into()]
    }
}

/// The PID the sim reports for another job on a busy GPU: above Linux's largest pid_max
/// (2^22), so it is no process of this host.
const SIM_JOB_PID: u32 = (1 << 22) + 1;

/// Sim idle power and temperature, and under load (H100 SXM: about 70 W idle, 700 W TDP).
const SIM_POWER_W: [f64; 2] = [70.0, 600.0];
const SIM_TEMPERATURE_C: [u32; 2] = [34, 68];

/// Largest busy file read: GPU indices, a few bytes each.
const MAX_BUSY_FILE_BYTES: u64 = 64 << 10;

/// The sim backend, with busy GPUs that can change while the agent runs (from `busy_file`),
/// the calibration child on the GPUs while it lives (from the process table), and NVLink
/// byte counters that grow with the traffic it measured.
pub struct SimNode {
    backend: RwLock<SimBackend>,
    base_busy: Vec<u32>,
    busy_file: Option<PathBuf>,
    processes: ProcessTable,
    /// The child's backend flags.
    args: Vec<String>,
    /// NVLink bytes per GPU, sent and received (the sim's collectives and p2p copies).
    traffic: Mutex<Vec<[u64; 2]>>,
}

impl SimNode {
    /// Busy GPUs: the configured ones plus those the busy file lists now.
    fn refresh_busy(&self) -> microbench::Result<()> {
        let Some(path) = &self.busy_file else {
            return Ok(());
        };
        let mut busy = self.base_busy.clone();
        // A missing file means no job; a test creates it to make one appear.
        let text = match crate::input::read_text(path, MAX_BUSY_FILE_BYTES) {
            Ok(text) => text,
            Err(e) if e.is_not_found() => String::new(),
            Err(e) => {
                return Err(microbench::Error::BadValue {
                    field: "busy_file",
                    value: path.display().to_string(),
                    expected: format!("a readable file of comma-separated GPU indices ({e})"),
                })
            }
        };
        for item in text
            .split([',', '\n', ' '])
            .filter(|s| !s.trim().is_empty())
        {
            busy.push(
                item.trim()
                    .parse()
                    .map_err(|_| microbench::Error::BadValue {
                        field: "busy_file",
                        value: item.to_string(),
                        expected: format!("comma-separated GPU indices in {}", path.display()),
                    })?,
            );
        }
        self.backend
            .write()
            .map_err(|_| poisoned())?
            .set_busy(&busy)
    }

    fn add_traffic(&self, record: &Record) {
        if !(record.kind.is_collective() || record.kind == record::Kind::P2pCopy) {
            return;
        }
        // A collective point is microbench's LOOPS timed loops of `iters` each.
        let loops = if record.kind.is_collective() {
            microbench::kernels::LOOPS
        } else {
            1
        };
        let (gpus, bytes, iters) = (
            &record.group.gpus,
            record.bytes,
            record.timing.iters.unwrap_or(1).saturating_mul(loops),
        );
        if let Ok(mut traffic) = self.traffic.lock() {
            for &g in gpus {
                if traffic.len() <= g as usize {
                    traffic.resize(g as usize + 1, [0, 0]);
                }
                let moved = bytes.saturating_mul(u64::from(iters));
                traffic[g as usize][0] = traffic[g as usize][0].saturating_add(moved);
                traffic[g as usize][1] = traffic[g as usize][1].saturating_add(moved);
            }
        }
    }
}

fn poisoned() -> microbench::Error {
    microbench::Error::BadValue {
        field: "sim",
        value: "state".into(),
        expected: "a lock not poisoned by a panicked thread".into(),
    }
}

impl Node for SimNode {
    fn topology(&self) -> microbench::Result<Topology> {
        self.backend.read().map_err(|_| poisoned())?.topology()
    }

    fn counters(&self) -> microbench::Result<Vec<Counters>> {
        self.refresh_busy()?;
        let backend = self.backend.read().map_err(|_| poisoned())?;
        let topology = backend.topology()?;
        let traffic = self.traffic.lock().map_err(|_| poisoned())?.clone();
        let activity = backend.activity()?;
        let held = self.processes.read();
        Ok(activity
            .iter()
            .map(|a| {
                let gpu = &topology.gpus[a.gpu as usize];
                let job = a.is_busy().then_some((SIM_JOB_PID, gpu.memory_bytes / 2));
                let (pids, memory): (Vec<u32>, Vec<u64>) = job
                    .into_iter()
                    .chain(
                        held.iter()
                            .filter(|p| p.gpus.contains(&a.gpu))
                            .map(|p| (p.pid, p.memory_bytes)),
                    )
                    .unzip();
                let load = usize::from(a.is_busy());
                let moved = traffic.get(a.gpu as usize).copied().unwrap_or([0, 0]);
                let slowed = gpu.clocks.sm_mhz < gpu.clocks.sm_max_mhz;
                // Idle GPUs report NVML's gpu_idle reason; a slow-gpu fault shows as hw_slowdown.
                let throttle = if a.is_busy() { 0 } else { 0x1 } | if slowed { 0x8 } else { 0 };
                Counters {
                    gpu: a.gpu,
                    utilization_percent: a.utilization_percent,
                    processes: Some(pids),
                    memory_used_bytes: Some(memory.iter().sum()),
                    power_watts: Some(SIM_POWER_W[load]),
                    energy_joules: None,
                    temperature_celsius: Some(SIM_TEMPERATURE_C[load]),
                    sm_clock_hz: gpu.clocks.sm_mhz.map(|m| f64::from(m) * 1e6),
                    memory_clock_hz: gpu.clocks.memory_mhz.map(|m| f64::from(m) * 1e6),
                    throttle_reasons: Some(throttle),
                    pcie_tx_bytes_per_s: Some(0.0),
                    pcie_rx_bytes_per_s: Some(0.0),
                    pcie_replays: Some(0),
                    nvlink_tx_bytes: (gpu.nvlinks > 0).then_some(moved[0]),
                    nvlink_rx_bytes: (gpu.nvlinks > 0).then_some(moved[1]),
                    nvlink_errors: (gpu.nvlinks > 0).then_some(discovery::NvlinkErrors {
                        replay: Some(0),
                        recovery: Some(0),
                        crc_flit: Some(0),
                        crc_data: Some(0),
                    }),
                }
            })
            .collect())
    }

    fn source(&self) -> record::Backend {
        record::Backend::Sim
    }

    fn backend_args(&self) -> Vec<String> {
        self.args.clone()
    }

    fn observe(&self, record: &Record) {
        self.add_traffic(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31, item 4: the busy file was read whole, whatever its size; past 64 KiB the
    /// counters fail naming the file, its size and the limit.
    #[test]
    fn r31_a_busy_file_past_its_limit_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let busy = dir.path().join("busy");
        std::fs::File::create(&busy)
            .unwrap()
            .set_len(MAX_BUSY_FILE_BYTES + 1)
            .unwrap();
        let mut config = Config::from_yaml("backend: sim\nprofile: dgx-h100\n").unwrap();
        config.state_dir = dir.path().to_path_buf();
        config.sim.busy_file = Some(busy.clone());
        let err = build(&config).unwrap().counters().unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "busy_file `{0}`: a readable file of comma-separated GPU indices ({0}: 65537 \
                 bytes, more than 65536 bytes (64 KiB), the most this reader takes)",
                busy.display()
            )
        );
    }
}
