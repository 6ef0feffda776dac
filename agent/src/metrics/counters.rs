//! Live counters from the sampler's last reading: utilisation, memory, power, energy,
//! temperature, clocks, throttle reasons, PCIe and NVLink traffic, NVLink errors.

use super::topology::{borrow, gpu_labels};
use super::{Collector, Out, Type};
use crate::cache::{Discovery, Snapshot};
use microbench::discovery::{Counters as Reading, THROTTLE_REASONS};

/// Live-counter families.
pub struct Counters;

type Pick = fn(&Reading) -> Option<f64>;

/// Single-valued families: name, type, help, reading.
const SIMPLE: [(&str, Type, &str, Pick); 9] = [
    (
        "meshfit_gpu_utilization_ratio",
        Type::Gauge,
        "Share of the last sample period a kernel ran on the GPU, 0 to 1.",
        |r| r.utilization_percent.map(|p| f64::from(p) / 100.0),
    ),
    (
        "meshfit_gpu_compute_processes",
        Type::Gauge,
        "Compute processes running on the GPU, the agent's calibration child included.",
        |r| r.processes.as_ref().map(|p| p.len() as f64),
    ),
    (
        "meshfit_gpu_memory_used_bytes",
        Type::Gauge,
        "GPU memory in use in bytes.",
        |r| r.memory_used_bytes.map(|b| b as f64),
    ),
    (
        "meshfit_gpu_power_watts",
        Type::Gauge,
        "GPU power draw in watts.",
        |r| r.power_watts,
    ),
    (
        "meshfit_gpu_energy_joules_total",
        Type::Counter,
        "GPU energy used since the driver loaded, in joules.",
        |r| r.energy_joules,
    ),
    (
        "meshfit_gpu_temperature_celsius",
        Type::Gauge,
        "GPU die temperature in degrees Celsius.",
        |r| r.temperature_celsius.map(f64::from),
    ),
    (
        "meshfit_gpu_sm_clock_hertz",
        Type::Gauge,
        "Current SM clock in hertz.",
        |r| r.sm_clock_hz,
    ),
    (
        "meshfit_gpu_memory_clock_hertz",
        Type::Gauge,
        "Current memory clock in hertz.",
        |r| r.memory_clock_hz,
    ),
    (
        "meshfit_gpu_pcie_replays_total",
        Type::Counter,
        "PCIe replays of the GPU's host link since the driver loaded.",
        |r| r.pcie_replays.map(|n| n as f64),
    ),
];

impl Collector for Counters {
    fn name(&self) -> &'static str {
        "counters"
    }

    fn collect(&self, s: &Snapshot, out: &mut Out) -> Result<(), String> {
        let Discovery::Found(t) = &s.discovery else {
            return Ok(());
        };
        let rows: Vec<(Vec<(&'static str, String)>, &Reading)> = s
            .counters
            .iter()
            .filter_map(|r| {
                let gpu = t.gpus.iter().find(|g| g.index == r.gpu)?;
                Some((gpu_labels(gpu).to_vec(), r))
            })
            .collect();
        for (name, kind, help, pick) in SIMPLE {
            let mut family = out.family(name, kind, help);
            for (labels, r) in &rows {
                if let Some(v) = pick(r) {
                    family.sample(&borrow(labels), v);
                }
            }
        }
        let mut throttle = out.family(
            "meshfit_gpu_throttle_reason_active",
            Type::Gauge,
            "1 while the clock throttle reason holds the GPU's clocks down (NVML reasons).",
        );
        for (labels, r) in &rows {
            if let Some(mask) = r.throttle_reasons {
                for (bit, reason) in THROTTLE_REASONS {
                    let mut l = borrow(labels);
                    l.push(("reason", reason));
                    throttle.sample(&l, if mask & bit != 0 { 1.0 } else { 0.0 });
                }
            }
        }
        let mut pcie = out.family(
            "meshfit_gpu_pcie_throughput_bytes_per_second",
            Type::Gauge,
            "PCIe traffic of the GPU in bytes per second over NVML's last 20 ms window, by direction (tx: sent by the GPU).",
        );
        for (labels, r) in &rows {
            for (direction, v) in [("tx", r.pcie_tx_bytes_per_s), ("rx", r.pcie_rx_bytes_per_s)] {
                if let Some(v) = v {
                    let mut l = borrow(labels);
                    l.push(("direction", direction));
                    pcie.sample(&l, v);
                }
            }
        }
        let mut nvlink = out.family(
            "meshfit_gpu_nvlink_bytes_total",
            Type::Counter,
            "NVLink data bytes over all the GPU's links, by direction (tx: sent by the GPU).",
        );
        for (labels, r) in &rows {
            for (direction, v) in [("tx", r.nvlink_tx_bytes), ("rx", r.nvlink_rx_bytes)] {
                if let Some(v) = v {
                    let mut l = borrow(labels);
                    l.push(("direction", direction));
                    nvlink.sample(&l, v as f64);
                }
            }
        }
        let mut errors = out.family(
            "meshfit_gpu_nvlink_errors_total",
            Type::Counter,
            "NVLink data-link errors over the GPU's active links, by kind (replay, recovery, crc_flit, crc_data).",
        );
        for (labels, r) in &rows {
            if let Some(e) = r.nvlink_errors {
                for (kind, v) in [
                    ("replay", e.replay),
                    ("recovery", e.recovery),
                    ("crc_flit", e.crc_flit),
                    ("crc_data", e.crc_data),
                ] {
                    // An unreadable counter has no series rather than a 0 (issue 10).
                    let Some(v) = v else { continue };
                    let mut l = borrow(labels);
                    l.push(("error", kind));
                    errors.sample(&l, v as f64);
                }
            }
        }
        if let Some(at) = s.counters_at {
            out.family(
                "meshfit_sample_timestamp_seconds",
                Type::Gauge,
                "When the live counters above were read, seconds since the Unix epoch.",
            )
            .sample(&[], at);
        }
        Ok(())
    }
}
