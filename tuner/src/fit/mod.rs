//! Curves fitted to measurements: alpha-beta per collective, scope, rank count and node; GEMM
//! efficiency per GPU; memory bandwidth; each node's NICs from a fabric run's pairs; and the
//! fleet view over nodes.

mod all;
pub mod alpha_beta;
pub mod attention_table;
pub mod fleet;
pub mod gemm;
pub mod gemm_table;
pub mod pairs;
pub mod size_table;

use std::collections::BTreeSet;
use std::sync::Arc;

use record::{Dtype, Kind, Record, Scope};

use crate::catalog::Cluster;
use crate::placement::{span, GroupSpan, LinkClass};
use serde::Serialize;

use alpha_beta::Curve;
use attention_table::AttentionTable;
use fleet::{Aggregate, Straggler};
use gemm::GemmCurve;
use gemm_table::GemmTable;
use pairs::NicFigure;
use size_table::SizeTable;

pub use all::fit_all;

/// How to turn per-node curves into fleet figures.
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// Aggregate over nodes.
    pub aggregate: Aggregate,
    /// A node more than this fraction below the fleet median is a straggler.
    pub threshold: f64,
    /// Nodes to leave out.
    pub exclude: Vec<String>,
    /// Leave out every straggler as well.
    pub exclude_degraded: bool,
    /// GEMM operand type whose curve the cost model reads.
    pub gemm_dtype: Dtype,
    /// The bf16 datasheet peak of the GPU priced, past which an attention point is refused;
    /// `None` takes every point.
    pub attention_peak_flops: Option<f64>,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            aggregate: Aggregate::Slowest,
            threshold: 0.10,
            exclude: Vec::new(),
            exclude_degraded: false,
            gemm_dtype: Dtype::Bf16,
            attention_peak_flops: None,
        }
    }
}

/// One node's curve for one collective, scope and rank count.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCurve {
    /// Node name.
    pub node: String,
    /// Every node the sweep ran on: this one, and for a job-wide inter-node sweep the others
    /// its records name (`detail.nodes`); leaving any of them out leaves the curve out.
    pub members: BTreeSet<String>,
    /// Collective.
    pub kind: Kind,
    /// Intra- or inter-node.
    pub scope: Scope,
    /// Ranks.
    pub ranks: u32,
    /// Ranks on each node: all of them inside a node; see [`members_per_node`].
    pub members_per_node: u32,
    /// NVLink domains the sweep's ranks spanned, where its records say (`nvlink_domains`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_domains: Option<u32>,
    /// The fit.
    pub curve: Curve,
    /// Bus bandwidth of the large-size piece, beta x the nccl-tests factor, bytes/s.
    pub busbw_bytes_per_s: f64,
    /// Smallest and largest size swept, bytes.
    pub bytes_range: (f64, f64),
    /// The measured times by size.
    #[serde(skip)]
    pub table: Option<Arc<SizeTable>>,
}

/// A fleet figure for one collective, scope and rank count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetCurve {
    /// Collective.
    pub kind: Kind,
    /// Intra- or inter-node.
    pub scope: Scope,
    /// Ranks.
    pub ranks: u32,
    /// Ranks on each node.
    pub members_per_node: u32,
    /// NVLink domains the measured ranks spanned, where the records say: 1 for trays of one
    /// NVL72 rack, whose curve prices NVLink groups rather than the network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_domains: Option<u32>,
    /// Aggregated latency, seconds.
    pub alpha_s: f64,
    /// Aggregated algorithm bandwidth, bytes/s.
    pub beta_bytes_per_s: f64,
    /// Aggregated bus bandwidth, bytes/s.
    pub busbw_bytes_per_s: f64,
    /// Worst relative RMS residual of the node fits: the figure's uncertainty.
    pub rms_rel_error: f64,
    /// The curve through the aggregated node times, piecewise where the nodes' curves are.
    pub curve: Curve,
    /// Nodes aggregated.
    pub nodes: usize,
    /// Sizes every aggregated node swept, smallest and largest, bytes.
    pub bytes_range: (f64, f64),
    /// Worst R² of log time among the node fits.
    pub r2: f64,
    /// The aggregated node times at the sizes every node measured, which price those sizes.
    #[serde(skip)]
    pub table: Option<Arc<SizeTable>>,
}

/// Least R² of log time a curve needs to price anything: below it the fit does not explain its
/// own points (a 5-row latency-only log fitted at R² of -57 once priced a 16-GPU pipeline at
/// 85 s of send/recv; issue 13).
pub const MIN_R2: f64 = 0.9;

/// How far past the sizes it swept a curve prices, either way; past that the catalog does.
pub const EXTRAPOLATE: f64 = 8.0;

impl FleetCurve {
    /// Why the curve must not price anything, if it must not.
    pub fn unusable(&self) -> Option<String> {
        (self.r2 < MIN_R2).then(|| {
            format!(
                "fits poorly (R² {:.2} < {MIN_R2}): priced from the catalog",
                self.r2
            )
        })
    }

    /// Whether the measured ranks crossed nodes over one NVLink fabric: such a curve prices
    /// NVLink groups that span trays, never the network between domains.
    pub fn inside_one_nvlink_domain(&self) -> bool {
        self.scope == Scope::InterNode && self.nvlink_domains == Some(1)
    }

    /// Whether `bytes` lies within [`EXTRAPOLATE`] of the swept sizes.
    pub fn covers(&self, bytes: f64) -> bool {
        let (lo, hi) = self.bytes_range;
        bytes >= lo / EXTRAPOLATE && bytes <= hi * EXTRAPOLATE
    }
}

/// One node's GEMM curve: its slowest GPU's.
#[derive(Debug, Clone, Serialize)]
pub struct NodeGemm {
    /// Node name.
    pub node: String,
    /// Slowest GPU.
    pub gpu: u32,
    /// Its curve, efficiency against `peak_flops`.
    pub curve: GemmCurve,
}

/// Everything fitted from one set of records.
#[derive(Debug, Clone, Serialize)]
pub struct Fits {
    /// Nodes seen, excluded ones included.
    pub nodes: Vec<String>,
    /// Nodes left out of the fleet figures, and why.
    pub excluded: Vec<(String, String)>,
    /// Per-node collective curves.
    pub curves: Vec<NodeCurve>,
    /// Fleet collective curves.
    pub fleet: Vec<FleetCurve>,
    /// Per-node GEMM curves.
    pub gemm: Vec<NodeGemm>,
    /// Fleet GEMM curve.
    pub fleet_gemm: Option<GemmCurve>,
    /// Measured GEMM efficiency by shape and layout over the kept nodes, which prices GEMMs.
    #[serde(skip)]
    pub gemm_table: Option<Arc<GemmTable>>,
    /// The dtype of the GEMMs in `gemm_table`: the one asked for, or fp16 standing in for
    /// bf16 (one tensor-core rate) when only fp16 was measured.
    pub gemm_table_dtype: Option<Dtype>,
    /// Measured attention rates over the kept nodes.
    #[serde(skip)]
    pub attention_table: Option<Arc<AttentionTable>>,
    /// Points refused as faster than the datasheet allows (a wrong unit or another GPU).
    pub refused: Vec<String>,
    /// Per-node HBM copy bandwidth, reads plus writes, bytes/s.
    pub memory: Vec<(String, f64)>,
    /// Fleet HBM bandwidth.
    pub fleet_memory: Option<f64>,
    /// Each node's NICs, from the pairwise send/recv points of a fabric run.
    pub nics: Vec<NicFigure>,
    /// The per-NIC send/recv bandwidth of the kept nodes, aggregated from each node's slowest
    /// NIC, with the node and rail that set it: no inter-node term is faster than it allows.
    pub fleet_nic: Option<NicFigure>,
    /// Nodes behind the fleet median.
    pub stragglers: Vec<Straggler>,
    /// The aggregate used.
    pub aggregate: Aggregate,
}

/// Ranks a collective record puts on each node. Inside a node, all of them. Across nodes, what
/// the record says (`ranks_per_node`, written by `microbench fabric`), else the distinct device
/// indices of its rank list (nccl-tests' device list; a uniform launch puts the same devices
/// on every host), and one per node when the log printed no device list: the `-g 1` sweep
/// that data-parallel groups look like.
pub fn members_per_node(r: &Record) -> u32 {
    match (r.group.scope, r.detail.ranks_per_node) {
        (Scope::IntraNode, _) => r.group.ranks,
        (Scope::InterNode, Some(per_node)) => per_node.clamp(1, r.group.ranks.max(1)),
        (Scope::InterNode, None) => {
            let distinct: std::collections::BTreeSet<u32> = r.group.gpus.iter().copied().collect();
            (distinct.len() as u32).clamp(1, r.group.ranks.max(1))
        }
    }
}

/// The group a curve measured, placed on `cluster` to price it from the catalog. Across
/// nodes the records' NVLink domains decide the link where the cluster's domain spans nodes:
/// one domain is NVLink, and several or unknown the network, as the lookup prices them.
pub fn measured_group(
    scope: Scope,
    ranks: u32,
    members_per_node: u32,
    nvlink_domains: Option<u32>,
    cluster: &Cluster,
) -> GroupSpan {
    let stride = match scope {
        Scope::IntraNode => 1,
        Scope::InterNode => (cluster.gpus_per_node / members_per_node.max(1)).max(1),
    };
    let mut group = span(ranks, stride, cluster);
    if scope == Scope::InterNode && group.nodes > 1 {
        group.link = if nvlink_domains == Some(1) {
            LinkClass::Nvlink
        } else {
            LinkClass::Network
        };
    }
    group
}

#[cfg(test)]
mod tests;
