//! The snapshot file: what the tuner reads offline (docs/design.md, "Snapshot file").

use record::Record;
use serde::{Deserialize, Serialize};

/// The format version this build writes. Older versions stay readable.
pub const FORMAT_VERSION: u32 = 1;

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
    /// Per node.
    pub nodes: Vec<Node>,
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
