//! The document `recommend`, `explain` and `compare` print as JSON or YAML.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost::collective::Source;
use crate::cost::memory::MemoryBreakdown;
use crate::cost::timing::{Term, TermKind};
use crate::cost::{Evaluation, Scenario};
use crate::measure::Priced;
use crate::mesh::{Mesh, Optimizer};

/// The whole output document.
#[derive(Debug, Clone, Serialize)]
pub struct Document {
    /// Model summary.
    pub model: ModelDoc,
    /// Cluster summary.
    pub cluster: ClusterDoc,
    /// Training inputs, after defaults.
    pub training: TrainingDoc,
    /// Lines about defaults, aliases and fallbacks; also printed on stderr.
    pub notes: Vec<String>,
    /// Where measured figures came from, what was odd about them, and the fleet view; absent
    /// when only catalog figures were used.
    pub measurements: Option<MeasurementsDoc>,
    /// With `--compare-nominal`, said first when the measured top pick differs from the
    /// catalog's.
    pub top_pick_changed: Option<String>,
    /// Meshes priced.
    pub evaluated: usize,
    /// Meshes that fit memory.
    pub fitting: usize,
    /// The ranked meshes, best first.
    pub meshes: Vec<MeshDoc>,
}

/// The measurements behind a ranking.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MeasurementsDoc {
    /// What was read.
    pub sources: Vec<String>,
    /// Stale, simulated or unreadable data, by name.
    pub notes: Vec<String>,
    /// Nodes seen.
    pub nodes: Vec<String>,
    /// How node figures were aggregated.
    pub aggregate: String,
    /// Nodes behind the fleet median.
    pub stragglers: Vec<StragglerDoc>,
    /// Nodes left out, with the reason.
    pub excluded: Vec<(String, String)>,
    /// What keeping the excluded nodes would cost the best layout.
    pub keep_cost: Option<String>,
}

impl MeasurementsDoc {
    /// The section for a priced scenario; none without measurements.
    pub fn of(priced: &Priced) -> Option<MeasurementsDoc> {
        let read = priced.read.as_ref()?;
        let mut doc = MeasurementsDoc {
            sources: read.sources.clone(),
            notes: read.notes.clone(),
            keep_cost: priced.keep_cost.clone(),
            ..Default::default()
        };
        if let Some(fits) = &priced.fits {
            doc.nodes = fits.nodes.clone();
            doc.aggregate = format!("{:?}", fits.aggregate).to_lowercase();
            doc.stragglers = fits
                .stragglers
                .iter()
                .map(|s| StragglerDoc {
                    node: s.node.clone(),
                    what: s.what.clone(),
                    value: s.value,
                    fleet_median: s.fleet_median,
                    shortfall: s.shortfall(),
                })
                .collect();
            doc.excluded = fits.excluded.clone();
        }
        Some(doc)
    }
}

/// A node behind the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct StragglerDoc {
    /// Node.
    pub node: String,
    /// Figure.
    pub what: String,
    /// The node's value.
    pub value: f64,
    /// Fleet median.
    pub fleet_median: f64,
    /// Shortfall against the median, fraction.
    pub shortfall: f64,
}

/// Model summary.
#[derive(Debug, Clone, Serialize)]
pub struct ModelDoc {
    /// Name.
    pub name: String,
    /// Parameters.
    pub params: f64,
    /// Parameters per token (MoE: active).
    pub active_params: f64,
    /// Model FLOPs per token, forward and backward.
    pub flops_per_token: f64,
}

/// Cluster summary.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterDoc {
    /// Preset or origin.
    pub name: String,
    /// GPU catalog id.
    pub gpu: String,
    /// GPUs in the job.
    pub gpus: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// NVLink domain.
    pub nvlink_domain: u32,
    /// NICs per node.
    pub nics_per_node: u32,
    /// NIC line rate, bits/s.
    pub nic_bits_per_s: f64,
    /// Where the link and compute figures come from: `nominal` for catalog figures,
    /// `measured` where measurements were given (per term in each mesh's `sources`).
    pub figures: String,
}

/// Training inputs.
#[derive(Debug, Clone, Serialize)]
pub struct TrainingDoc {
    /// Sequence length.
    pub seq_len: u32,
    /// Global batch, sequences.
    pub global_batch_sequences: u32,
    /// Global batch, tokens.
    pub global_batch_tokens: f64,
    /// GEMM precision.
    pub precision: String,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Fused attention.
    pub flash_attention: bool,
    /// Gradient reduction overlapped with backward.
    pub overlap_grad_reduce: bool,
}

/// One mesh in the document.
#[derive(Debug, Clone, Serialize)]
pub struct MeshDoc {
    /// 1 = best.
    pub rank: usize,
    /// The layout: tp, pp, dp, cp, ep, microbatch size, virtual stages, ZeRO stage,
    /// recomputation and sequence parallelism, each under its own key.
    #[serde(flatten)]
    pub mesh: Mesh,
    /// Microbatches per step.
    pub microbatches: u32,
    /// Memory per GPU, bytes.
    pub memory_per_gpu_bytes: MemoryBreakdown,
    /// GPU capacity, bytes.
    pub memory_capacity_bytes: f64,
    /// Whether it fits.
    pub fits: bool,
    /// Predicted step time, seconds.
    pub step_time_s: f64,
    /// Tokens per second, whole job.
    pub tokens_per_s: f64,
    /// Model FLOPs utilisation.
    pub mfu: f64,
    /// Pipeline bubble share.
    pub bubble_fraction: f64,
    /// Every step-time term.
    pub time_s: BTreeMap<TermKind, Term>,
    /// Pitfalls.
    pub warnings: Vec<String>,
    /// Why it stands below the layout it is ranked against: the first layout of the
    /// distinct group above for the first of a group, its group's first layout for one that
    /// prices alike; `None` for the first.
    pub why_below: Option<String>,
    /// Where each term's figures come from.
    pub sources: BTreeMap<TermKind, Source>,
    /// Step time low end from the fit residuals.
    pub step_time_low_s: f64,
    /// Step time high end.
    pub step_time_high_s: f64,
    /// Its band overlaps the band of the layout `why_below` ranks it against: a tie, not a
    /// ranking.
    pub tie_with_above: bool,
    /// The rank of the first layout of its group when it prices alike (step time and memory
    /// per GPU within 0.5%, `search::ALIKE_WITHIN`); `None` for a group's first layout, which
    /// the table prints as the group's row.
    pub equivalent_to: Option<usize>,
    /// Its rank under catalog figures (`--compare-nominal`).
    pub nominal_rank: Option<usize>,
    /// The term that moved it against the catalog ranking.
    pub shift_cause: Option<String>,
}

impl MeshDoc {
    /// Builds the entry of one evaluation.
    pub fn new(
        rank: usize,
        e: &Evaluation,
        scenario: &Scenario,
        why_below: Option<String>,
    ) -> MeshDoc {
        let (low, high) = scenario.band(e);
        MeshDoc {
            rank,
            mesh: e.mesh,
            microbatches: e.microbatches,
            memory_per_gpu_bytes: e.memory,
            memory_capacity_bytes: e.capacity_bytes,
            fits: e.fits(),
            step_time_s: e.step_time_s,
            tokens_per_s: e.tokens_per_s,
            mfu: e.mfu,
            bubble_fraction: e.bubble_fraction,
            time_s: e.breakdown.terms().into_iter().collect(),
            warnings: scenario
                .warnings(e)
                .iter()
                .map(ToString::to_string)
                .collect(),
            why_below,
            sources: scenario.term_sources(e).into_iter().collect(),
            step_time_low_s: low,
            step_time_high_s: high,
            tie_with_above: false,
            equivalent_to: None,
            nominal_rank: None,
            shift_cause: None,
        }
    }
}

impl Document {
    /// Every distinct warning of its meshes, once each, in the order they first appear in
    /// the groups' first layouts and then in the layouts that price like them (the order a
    /// table prints them in).
    pub fn distinct_warnings(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        let (firsts, alike): (Vec<&MeshDoc>, Vec<&MeshDoc>) =
            self.meshes.iter().partition(|m| m.equivalent_to.is_none());
        for w in firsts.into_iter().chain(alike).flat_map(|m| &m.warnings) {
            if !seen.contains(&w.as_str()) {
                seen.push(w);
            }
        }
        seen
    }

    /// The document head for a scenario; meshes are added by the caller.
    pub fn new(
        scenario: &Scenario,
        notes: Vec<String>,
        evaluated: usize,
        fitting: usize,
        meshes: Vec<MeshDoc>,
    ) -> Document {
        let m = &scenario.model;
        let c = &scenario.cluster;
        let t = &scenario.training;
        Document {
            model: ModelDoc {
                name: m.name.clone(),
                params: m.params().total(),
                active_params: m.active_params(),
                flops_per_token: m.model_flops_per_token(),
            },
            cluster: ClusterDoc {
                name: c.name.clone(),
                gpu: c.gpu.id.to_string(),
                gpus: scenario.gpus,
                gpus_per_node: c.gpus_per_node,
                nvlink_domain: c.nvlink_domain,
                nics_per_node: c.nics_per_node,
                nic_bits_per_s: c.nic_bits_per_s,
                figures: "nominal".to_string(),
            },
            training: TrainingDoc {
                seq_len: t.seq_len,
                global_batch_sequences: t.global_batch,
                global_batch_tokens: t.tokens_per_step(),
                precision: t.precision.to_string(),
                optimizer: t.optimizer,
                flash_attention: t.flash_attention,
                overlap_grad_reduce: t.overlap_grad_reduce,
            },
            notes,
            measurements: None,
            top_pick_changed: None,
            evaluated,
            fitting,
            meshes,
        }
    }
}
