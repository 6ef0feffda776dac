//! The agent's own process as the standard `process_*` families of the Prometheus client
//! libraries, so dashboards and alerts written for any exporter read it. Host figures are
//! node_exporter's.

use super::{Collector, Out, Type};
use crate::cache::Snapshot;

/// Process families.
pub struct Process;

impl Collector for Process {
    fn name(&self) -> &'static str {
        "process"
    }

    fn collect(&self, s: &Snapshot, out: &mut Out) -> Result<(), String> {
        let p = s.process;
        if p.start_time_seconds == 0.0 {
            // Not sampled yet.
            return Ok(());
        }
        for (name, kind, help, value) in [
            (
                "process_resident_memory_bytes",
                Type::Gauge,
                "Resident memory size in bytes.",
                p.resident_bytes as f64,
            ),
            (
                "process_cpu_seconds_total",
                Type::Counter,
                "Total user and system CPU time spent in seconds.",
                p.cpu_seconds,
            ),
            (
                "process_start_time_seconds",
                Type::Gauge,
                "Start time of the process since unix epoch in seconds.",
                p.start_time_seconds,
            ),
            (
                "process_open_fds",
                Type::Gauge,
                "Number of open file descriptors.",
                p.open_fds as f64,
            ),
        ] {
            out.family(name, kind, help).sample(&[], value);
        }
        if p.max_fds > 0 {
            out.family(
                "process_max_fds",
                Type::Gauge,
                "Maximum number of open file descriptors.",
            )
            .sample(&[], p.max_fds as f64);
        }
        Ok(())
    }
}
