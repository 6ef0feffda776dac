//! The exporter's own health: `meshfit_up`, the scrape's duration, each collector's success
//! and duration, and when the sampler last completed a pass.

use super::{Out, Type};
use crate::cache::{Discovery, Snapshot};

/// Writes the exporter families after the collectors ran: `(name, ok, seconds)` each.
pub(super) fn write(s: &Snapshot, results: &[(&str, bool, f64)], seconds: f64, out: &mut Out) {
    // One series whatever the state, so `meshfit_up` keeps its identity across a driver
    // coming and going; the reason is an info series of its own (issue 11).
    let down = match &s.discovery {
        Discovery::Found(_) => None,
        Discovery::Down { reason, .. } => Some(reason.as_str()),
        Discovery::Pending => Some("discovering"),
    };
    out.family(
        "meshfit_up",
        Type::Gauge,
        "1 when the agent sees its GPUs, 0 when not (meshfit_down_reason_info says why).",
    )
    .sample(&[], if down.is_some() { 0.0 } else { 1.0 });
    if let Some(reason) = down {
        out.family(
            "meshfit_down_reason_info",
            Type::Info,
            "1 for why the agent sees no GPUs: discovering, no_driver, discovery_failed or no_gpus.",
        )
        .sample(&[("reason", reason)], 1.0);
    }
    let mut success = out.family(
        "meshfit_scrape_collector_success",
        Type::Gauge,
        "1 when the collector rendered its families in this text.",
    );
    for (name, ok, _) in results {
        success.sample(&[("collector", name)], if *ok { 1.0 } else { 0.0 });
    }
    let mut duration = out.family(
        "meshfit_scrape_collector_duration_seconds",
        Type::Gauge,
        "Seconds the collector took when this text was rendered (again only once the cache changed).",
    );
    for (name, _, secs) in results {
        duration.sample(&[("collector", name)], *secs);
    }
    out.family(
        "meshfit_scrape_duration_seconds",
        Type::Gauge,
        "Seconds the collectors took to render this text from the cache (never waiting on NVML); scrapes reuse it until the cache changes.",
    )
    .sample(&[], seconds);
    if let Some(at) = s.sampler_last_pass {
        out.family(
            "meshfit_sampler_last_pass_timestamp_seconds",
            Type::Gauge,
            "Unix time the sampler last completed a pass (process figures, fabric results, GPU counters), every sample_interval; standing still, the sampler is stuck.",
        )
        .sample(&[], at);
    }
    out.family(
        "meshfit_exporter_build_info",
        Type::Info,
        "Agent version; always 1.",
    )
    .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1.0);
}
