//! The snapshot file: what the tuner reads offline (docs/design.md, "Snapshot file").

use record::Record;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::fit::fleet::{Aggregate, Straggler};

/// The newest format version this build reads and writes. A snapshot of every node's records
/// is written as version 1, which older tuners read too; a compact one (`fleet`) as 2.
pub const FORMAT_VERSION: u32 = 2;

/// The version of snapshots without a `fleet` section.
const PER_NODE_VERSION: u32 = 1;

/// One snapshot document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Format version.
    pub format_version: u32,
    /// When it was written, seconds since the Unix epoch.
    pub created: f64,
    /// Where the measurements came from, e.g. `prometheus http://prom:9090 {pool="a"}`.
    pub source: String,
    /// Time range the measurements cover.
    pub time_range: TimeRange,
    /// Per node; in a compact snapshot, one `fleet/<model>` node per GPU model.
    pub nodes: Vec<Node>,
    /// In a compact snapshot: what its `fleet/<model>` nodes stand for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetSection>,
}

impl Snapshot {
    /// A snapshot of every node's records (format version 1).
    pub fn per_node(source: String, created: f64, time_range: TimeRange, nodes: Vec<Node>) -> Self {
        Snapshot {
            format_version: PER_NODE_VERSION,
            created,
            source,
            time_range,
            nodes,
            fleet: None,
        }
    }

    /// A compact snapshot: the fleet's aggregate per GPU model and its stragglers, reduced in
    /// Prometheus (format version 2).
    pub fn compact(
        source: String,
        created: f64,
        time_range: TimeRange,
        nodes: Vec<Node>,
        fleet: FleetSection,
    ) -> Self {
        Snapshot {
            format_version: FORMAT_VERSION,
            fleet: Some(fleet),
            ..Snapshot::per_node(source, created, time_range, nodes)
        }
    }
}

/// What a compact snapshot's nodes stand for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSection {
    /// Nodes per GPU model that the `fleet/<model>` nodes aggregate.
    pub nodes: BTreeMap<String, usize>,
    /// How their figures were aggregated per point.
    pub aggregate: Aggregate,
    /// The nodes behind their model's median, named.
    pub stragglers: Vec<Straggler>,
    /// The nodes left out of the aggregate, with why.
    pub excluded: Vec<(String, String)>,
}

/// A time range, seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeRange {
    /// Start.
    pub start: f64,
    /// End.
    pub end: f64,
}

/// One node's GPUs, links and records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Node name (the `hostname` label).
    pub name: String,
    /// GPUs.
    #[serde(default)]
    pub gpus: Vec<GpuInfo>,
    /// Pairwise links as `nvidia-smi topo -m` names them.
    #[serde(default)]
    pub links: Vec<LinkInfo>,
    /// Measurement records.
    pub records: Vec<Record>,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Index.
    pub index: u32,
    /// Model name as NVML reports it.
    pub model: String,
}

/// One GPU pair's link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// GPU index.
    pub gpu: u32,
    /// Peer GPU index.
    pub peer_gpu: u32,
    /// NV<n>, PIX, PXB, PHB, NODE or SYS.
    pub link: String,
}
