//! The host and the agent's own process, from /proc as last sampled.

use super::{Collector, Out, Type};
use crate::cache::Snapshot;

/// Host families.
pub struct Host;

impl Collector for Host {
    fn name(&self) -> &'static str {
        "host"
    }

    fn collect(&self, s: &Snapshot, out: &mut Out) -> Result<(), String> {
        let h = s.host;
        if h.cpus == 0 {
            // Not sampled yet.
            return Ok(());
        }
        for (name, kind, help, value) in [
            (
                "meshfit_host_cpus",
                Type::Gauge,
                "Online CPUs of the host.",
                h.cpus as f64,
            ),
            (
                "meshfit_host_memory_total_bytes",
                Type::Gauge,
                "Host memory in bytes (MemTotal).",
                h.memory_total_bytes as f64,
            ),
            (
                "meshfit_host_memory_available_bytes",
                Type::Gauge,
                "Host memory available in bytes (MemAvailable).",
                h.memory_available_bytes as f64,
            ),
            (
                "meshfit_process_resident_memory_bytes",
                Type::Gauge,
                "Resident memory of the agent in bytes.",
                h.resident_bytes as f64,
            ),
            (
                "meshfit_process_cpu_seconds_total",
                Type::Counter,
                "CPU time of the agent (user plus system) in seconds.",
                h.cpu_seconds,
            ),
        ] {
            out.family(name, kind, help).sample(&[], value);
        }
        Ok(())
    }
}
