//! Whether the GPUs are idle enough to calibrate: what counts as busy before a run and
//! during one.

use crate::config::IdleGate;
use crate::identity::Identity;
use microbench::discovery::{Counters, Topology};
use std::time::{SystemTime, UNIX_EPOCH};

/// When an idle check runs, which decides what counts as busy.
#[derive(Debug, Clone, Copy)]
pub enum Check<'a> {
    /// Before a run: any compute process, and utilisation or memory over their limits.
    BeforeRun,
    /// During a run: only processes other than the run's child (the child's own kernels
    /// raise utilisation and memory).
    During(&'a Identity),
}

/// Seconds since the Unix epoch.
pub fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// GPUs that are not idle, with the reason.
pub fn busy_gpus(
    counters: &[Counters],
    topology: &Topology,
    gate: &IdleGate,
    check: Check,
) -> Vec<String> {
    let strict = matches!(check, Check::BeforeRun);
    let mut busy = Vec::new();
    for c in counters {
        let processes = c
            .processes
            .iter()
            .flatten()
            .filter(|&&pid| match check {
                Check::BeforeRun => true,
                Check::During(child) => !child.is_own(pid),
            })
            .count();
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
        } else if strict && util > gate.max_utilization_percent {
            busy.push(format!(
                "GPU {} at {util}% utilisation (max_utilization_percent {})",
                c.gpu, gate.max_utilization_percent
            ));
        } else if strict && memory_ratio > gate.max_memory_used_ratio {
            busy.push(format!(
                "GPU {} has {:.0}% of its memory in use (max_memory_used_ratio {})",
                c.gpu,
                memory_ratio * 100.0,
                gate.max_memory_used_ratio
            ));
        }
    }
    busy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn counters(gpu: u32, util: u32, processes: &[u32], used: u64) -> Counters {
        Counters {
            gpu,
            utilization_percent: Some(util),
            processes: Some(processes.to_vec()),
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
        let gate = Config::default().idle;
        let gib = 1 << 30;
        let readings = [
            counters(0, 0, &[], 0),
            counters(1, 50, &[], 0),
            counters(2, 0, &[], 40 * gib),
            counters(3, 0, &[4242], 0),
            counters(4, 90, &[777], 0),
        ];
        let busy = busy_gpus(&readings, &t, &gate, Check::BeforeRun);
        assert_eq!(busy.len(), 4, "{busy:?}");
        assert!(busy[0].starts_with("GPU 1 at 50% utilisation"));
        assert!(busy[1].starts_with("GPU 2 has 50% of its memory in use"));
        assert_eq!(busy[2], "GPU 3 runs 1 compute process(es)");
        // During a run the child's load and process are expected: only others count.
        let child = Identity::new(777, "MESHFIT_CALIBRATION_RUN", "t", Path::new("/proc"));
        assert_eq!(
            busy_gpus(&readings, &t, &gate, Check::During(&child)),
            vec!["GPU 3 runs 1 compute process(es)"]
        );
    }
}
