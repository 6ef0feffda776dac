//! Step time, term by term. [`step_time`] is the only place that adds terms up.
//!
//! Every term is computed for the last pipeline stage (which also runs the output layer) and
//! for one microbatch, then scaled by the microbatch count. Each term reports its full time
//! and the part of it that the step waits for (exposed).

use serde::Serialize;

pub use super::inputs::Inputs;
pub use super::term::Term;

use super::collective::Collective;
use super::data_parallel::{data_parallel, owned_params, Windows};
use super::layer::{launch_excess, layer, sp_scatter_kernels, tokens_per_microbatch, Layer};
use super::recompute::{replay, Recomputing};
use super::{loss, pipeline};
use crate::mesh::{Mesh, Schedule};
use crate::placement::{GroupSpan, LinkClass, Placement};

/// The terms of a step time, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TermKind {
    /// GEMMs, attention and memory-bound kernels.
    Compute,
    /// Host-bound kernel issue.
    Launch,
    /// Tensor-parallel collectives.
    TpComm,
    /// Context-parallel ring exchange.
    CpComm,
    /// MoE all-to-all.
    EpAllToAll,
    /// Pipeline sends.
    PpP2p,
    /// Pipeline fill and drain.
    PipelineBubble,
    /// Data-parallel gradient reduction.
    DpGradSync,
    /// ZeRO parameter gathers.
    ZeroGather,
    /// Optimizer step.
    Optimizer,
    /// Waiting for the slowest GPU.
    Straggler,
}

impl TermKind {
    /// Every term, in report order.
    pub const ALL: [TermKind; 11] = [
        TermKind::Compute,
        TermKind::Launch,
        TermKind::TpComm,
        TermKind::CpComm,
        TermKind::EpAllToAll,
        TermKind::PpP2p,
        TermKind::PipelineBubble,
        TermKind::DpGradSync,
        TermKind::ZeroGather,
        TermKind::Optimizer,
        TermKind::Straggler,
    ];

    /// What the term is, from [`TERMS`].
    pub fn info(self) -> &'static TermInfo {
        &TERMS[self as usize]
    }

    /// Report name, as the JSON keys spell it.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Human name.
    pub fn label(self) -> &'static str {
        self.info().label
    }

    /// The collective of a communication term on `mesh`, and the group it runs over.
    pub fn collective(self, mesh: &Mesh, placement: &Placement) -> Option<(Collective, GroupSpan)> {
        self.info()
            .comm
            .map(|(group, collective)| (collective(mesh), group.span(placement)))
    }
}

/// The group of ranks a communication term runs over.
#[derive(Debug, Clone, Copy)]
pub enum Group {
    /// Tensor parallel.
    Tp,
    /// Context parallel.
    Cp,
    /// Expert parallel.
    Ep,
    /// Two neighbouring pipeline stages.
    Pp,
    /// Gradient reduction (DP x CP).
    Grad,
}

impl Group {
    /// Where the group lands.
    pub fn span(self, p: &Placement) -> GroupSpan {
        match self {
            Group::Tp => p.tp,
            Group::Cp => p.cp,
            Group::Ep => p.ep,
            Group::Pp => p.pp,
            Group::Grad => p.grad,
        }
    }
}

/// What a term is: its report name, its human name, and for a communication term the group
/// it runs over with the collective that prices it (for sources and uncertainty).
pub struct TermInfo {
    /// Report name, as the JSON keys spell it.
    pub name: &'static str,
    /// Human name.
    pub label: &'static str,
    /// The group and the collective on a mesh.
    pub comm: Option<(Group, CollectiveOn)>,
}

/// The collective of a communication term on a mesh.
pub type CollectiveOn = fn(&Mesh) -> Collective;

/// One row per [`TermKind`], in its order.
pub static TERMS: [TermInfo; 11] = [
    TermInfo {
        name: "compute",
        label: "compute",
        comm: None,
    },
    TermInfo {
        name: "launch",
        label: "host-bound kernel launch",
        comm: None,
    },
    TermInfo {
        name: "tp_comm",
        label: "TP all-reduce",
        comm: Some((Group::Tp, tp_collective)),
    },
    TermInfo {
        name: "cp_comm",
        label: "CP ring exchange",
        comm: Some((Group::Cp, |_| Collective::SendRecv)),
    },
    TermInfo {
        name: "ep_all_to_all",
        label: "EP all-to-all",
        comm: Some((Group::Ep, |_| Collective::AllToAll)),
    },
    TermInfo {
        name: "pp_p2p",
        label: "PP send/recv",
        comm: Some((Group::Pp, |_| Collective::SendRecv)),
    },
    TermInfo {
        name: "pipeline_bubble",
        label: "pipeline bubble",
        comm: None,
    },
    TermInfo {
        name: "dp_grad_sync",
        label: "DP gradient reduction",
        comm: Some((Group::Grad, grad_collective)),
    },
    TermInfo {
        name: "zero_gather",
        label: "ZeRO parameter gather",
        comm: Some((Group::Grad, |_| Collective::AllGather)),
    },
    TermInfo {
        name: "optimizer",
        label: "optimizer step",
        comm: None,
    },
    TermInfo {
        name: "straggler",
        label: "slowest-GPU wait",
        comm: None,
    },
];

/// Sequence parallelism reduce-scatters and all-gathers where TP alone all-reduces.
fn tp_collective(mesh: &Mesh) -> Collective {
    if mesh.sequence_parallel {
        Collective::ReduceScatter
    } else {
        Collective::AllReduce
    }
}

/// ZeRO reduce-scatters the gradients that plain data parallelism all-reduces.
fn grad_collective(mesh: &Mesh) -> Collective {
    if mesh.zero_stage == 0 {
        Collective::AllReduce
    } else {
        Collective::ReduceScatter
    }
}

/// The step time of one mesh, one named field per term.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// GEMMs, attention and memory-bound kernels: forward, backward and recomputation of
    /// every microbatch.
    pub compute: Term,
    /// Host-bound time: layer passes whose kernels take longer to issue than to run.
    pub launch: Term,
    /// Tensor-parallel all-reduces (or reduce-scatter + all-gather with SP).
    pub tp_comm: Term,
    /// Context-parallel K/V ring exchange, hidden behind attention where it can be.
    pub cp_comm: Term,
    /// MoE token dispatch and combine, forward and backward.
    pub ep_all_to_all: Term,
    /// Activations and gradients sent between pipeline stages.
    pub pp_p2p: Term,
    /// Idle time while the pipeline fills and drains.
    pub pipeline_bubble: Term,
    /// Data-parallel gradient reduction (all-reduce, or reduce-scatter under ZeRO).
    pub dp_grad_sync: Term,
    /// ZeRO-1/2 parameter all-gather after the step, or ZeRO-3 all-gathers before each use.
    pub zero_gather: Term,
    /// The optimizer step over the parameters this GPU owns.
    pub optimizer: Term,
    /// Waiting for the slowest GPU: a synchronous step takes the maximum of N GPUs' times.
    pub straggler: Term,
}

impl Breakdown {
    /// Every term with its kind, in report order.
    pub fn terms(&self) -> [(TermKind, Term); 11] {
        let terms = [
            self.compute,
            self.launch,
            self.tp_comm,
            self.cp_comm,
            self.ep_all_to_all,
            self.pp_p2p,
            self.pipeline_bubble,
            self.dp_grad_sync,
            self.zero_gather,
            self.optimizer,
            self.straggler,
        ];
        std::array::from_fn(|i| (TermKind::ALL[i], terms[i]))
    }

    /// Seconds per step: the exposed parts added.
    pub fn step_time_s(&self) -> f64 {
        self.terms().iter().map(|(_, t)| t.exposed_s).sum()
    }
}

/// Expected maximum of n standard normal draws, the tail a synchronous step waits for:
/// sqrt(2 ln n) (the leading term of the extreme-value asymptote; Gumbel 1958).
pub fn expected_max_of_normals(n: u32) -> f64 {
    if n <= 1 {
        0.0
    } else {
        (2.0 * f64::from(n).ln()).sqrt()
    }
}

/// The average layer of the model: dense and MoE layers weighed by their counts.
pub(super) fn average_layer(x: &Inputs) -> Layer {
    let moe_share = f64::from(x.model.moe_layers()) / f64::from(x.model.layers);
    let dense = layer(x, false);
    let moe = if moe_share > 0.0 {
        layer(x, true)
    } else {
        Layer::default()
    };
    Layer::average(&dense, &moe, moe_share)
}

/// The part of a layer's tensor-parallel collectives the step waits for. With TP overlap the
/// collectives run under the GEMMs they feed, chunk by chunk; Transformer Engine's
/// userbuffers do that over NVLink only. torchtitan's async TP is priced by the copies it
/// saves (`layer`), not by overlap: its measured end-to-end gains (8% on Llama3 70B in
/// PyTorch's async-TP post, 1.04-1.16x in torchtitan's 2025-06 table) are what those copies
/// cost.
fn tp_exposed(x: &Inputs, avg: &Layer) -> f64 {
    let overlaps = x.training.tp_comm_overlap && !x.training.framework.sp_copies();
    if overlaps && x.placement.tp.link == LinkClass::Nvlink {
        Term::overlapped(avg.tp, avg.gemm, 0.0, x.efficiency.overlap_slowdown).exposed_s
    } else {
        avg.tp
    }
}

/// How `x` recomputes.
fn recomputing(x: &Inputs) -> Recomputing {
    let mesh = x.mesh;
    let scatters = if mesh.tp > 1 && mesh.sequence_parallel {
        sp_scatter_kernels(x.training.sp_relayout_copies())
    } else {
        0.0
    };
    Recomputing {
        mode: mesh.recompute,
        per_op: mesh.recompute.per_op(x.training.framework),
        scatters,
        pass: x.efficiency.recompute_pass,
        mla: x.model.mla.is_some(),
    }
}

/// The pipeline stage that sets the pace, with the work it does per microbatch beyond its
/// layers: layers it runs, and seconds of output layers and multi-token-prediction
/// projections.
struct Pacing {
    layers: f64,
    heads_s: f64,
}

/// Which stage paces the pipeline, each stage priced as its layers at `layer_s` each plus, on
/// the last, `heads_s` and the multi-token-prediction modules' layers. Under DualPipe a rank
/// runs stage i and stage pp-1-i for the microbatches of each direction (DeepSeek-V3
/// §3.2.1), so its microbatch costs the mean of the two: the first and last stages pace
/// together.
fn pacing(x: &Inputs, layer_s: f64, heads_s: f64) -> Pacing {
    let (model, mesh) = (x.model, x.mesh);
    let st = mesh.stages(model.layers);
    let mtp = f64::from(model.mtp_layers);
    let last = Pacing {
        layers: st.last + mtp,
        heads_s,
    };
    let cost = |p: &Pacing| p.layers * layer_s + p.heads_s;
    if mesh.pp == 1 {
        return last;
    }
    let first = Pacing {
        layers: st.first,
        heads_s: 0.0,
    };
    let middle = Pacing {
        layers: st.middle,
        heads_s: 0.0,
    };
    let edges = if mesh.schedule == Schedule::Dualpipe {
        Pacing {
            layers: (first.layers + last.layers) / 2.0,
            heads_s: heads_s / 2.0,
        }
    } else if cost(&first) > cost(&last) {
        first
    } else {
        last
    };
    if mesh.pp > 2 && cost(&middle) > cost(&edges) {
        middle
    } else {
        edges
    }
}

/// Throughput the compute loses while an all-to-all runs beside it: DeepSeek-V3 dedicates 20
/// of the H800's 132 SMs to them under DualPipe (arXiv 2412.19437 §3.2.2), DeepEP's default
/// that Megatron-Core's flex dispatcher takes under combined 1F1B (`moe_deepep_num_sms`,
/// "historical default 20"). Held as a share of an H800's SMs on every GPU.
const EP_OVERLAP_SMS: f64 = 20.0 / 132.0;

/// Computes the step time of one mesh.
pub fn step_time(x: &Inputs) -> Breakdown {
    step_time_of(x, average_layer(x))
}

/// What one layer's terms depend on in a mesh; meshes alike in it share
/// [`average_layer`] under one model, training, cluster and set of figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct LayerKey {
    tp: u32,
    cp: u32,
    ep: u32,
    expert_tp: Option<u32>,
    microbatch_size: u32,
    recompute: crate::mesh::Recompute,
    sequence_parallel: bool,
}

impl LayerKey {
    pub(super) fn of(mesh: &Mesh) -> LayerKey {
        LayerKey {
            tp: mesh.tp,
            cp: mesh.cp,
            ep: mesh.ep,
            expert_tp: mesh.expert_tp,
            microbatch_size: mesh.microbatch_size,
            recompute: mesh.recompute,
            sequence_parallel: mesh.sequence_parallel,
        }
    }
}

/// [`step_time`] with the mesh's average layer already priced.
pub(super) fn step_time_of(x: &Inputs, avg: Layer) -> Breakdown {
    let (model, mesh) = (x.model, x.mesh);
    let m = mesh.microbatches(x.training.global_batch);
    let tp_exposed = tp_exposed(x, &avg);
    let comm = tp_exposed + avg.a2a;

    // Forward, backward (twice the kernels) and recomputation passes of one layer. A step
    // captured in CUDA graphs replays its kernels without the host.
    let host = if x.training.step_captured(mesh, model.moe.is_some()) {
        0.0
    } else {
        x.compute.host_s_per_kernel()
    };
    let (fwd, bwd) = (avg.fwd() + comm, avg.bwd() + comm);
    let fwd_launch = launch_excess(fwd, avg.kernels, host);
    let bwd_launch = launch_excess(bwd, 2.0 * avg.kernels, host * x.efficiency.host_bwd_share);
    let replay = replay(recomputing(x), &avg, comm, host);
    let (recompute, recompute_launch) = (replay.gpu, replay.launch);
    let comm_passes = 2.0 + replay.comm_passes;
    let tp_passes = 2.0 + replay.tp_passes;
    let layer_compute = avg.fwd() + avg.bwd() + recompute;
    let t = tokens_per_microbatch(mesh, x.training.seq_len);
    let widths = (
        f64::from(model.hidden),
        f64::from(model.vocab),
        f64::from(mesh.tp),
    );
    // The output layer, once more for each multi-token-prediction module, which also
    // projects the concatenated [h; h] back to h (DeepSeek-V3 §2.2).
    let mtp = f64::from(model.mtp_layers);
    let (proj_fwd, proj_bwd) = x.compute.linear_s(t, widths.0, 2.0 * widths.0);
    let heads = (1.0 + mtp) * loss::output_layer_s(x.compute, x.training.loss, t, widths)
        + mtp * (proj_fwd + proj_bwd);
    // Ring attention overlaps the K/V exchange with the attention of the block in hand
    // (Liu et al. 2023, Ring Attention §3); backward moves twice the bytes and hides behind
    // the attention backward.
    let cp_time = avg.cp * (3.0 + replay.comm_passes);
    let cp_exposed = (cp_time - (avg.attention + avg.attention_bwd + replay.attention)).max(0.0);
    let launch = fwd_launch + bwd_launch + recompute_launch;
    let layer_s =
        layer_compute + launch + tp_exposed * tp_passes + avg.a2a * comm_passes + cp_exposed;
    let Pacing {
        layers: stage_layers,
        heads_s,
    } = pacing(x, layer_s, heads);
    let compute_mb = stage_layers * layer_compute + heads_s;
    let launch_mb = stage_layers * launch;
    let tp_mb = stage_layers * avg.tp * tp_passes;
    let tp_exposed_mb = stage_layers * tp_exposed * tp_passes;
    let a2a_mb = stage_layers * avg.a2a * comm_passes;
    let cp_time_mb = stage_layers * cp_time;
    let cp_exposed_mb = stage_layers * cp_exposed;
    // DualPipe and combined 1F1B run one microbatch's all-to-alls beside another's compute,
    // but not in the chunks their schedules run alone, whose all-to-alls wait as under 1F1B.
    let dualpipe = mesh.schedule == Schedule::Dualpipe;
    let unpaired = pipeline::unpaired_share(mesh, m);
    let paired = 1.0 - unpaired;
    let hidden = Term::overlapped(paired * a2a_mb, paired * compute_mb, 0.0, EP_OVERLAP_SMS);
    let a2a = Term {
        time_s: a2a_mb,
        exposed_s: unpaired * a2a_mb + hidden.exposed_s,
    };
    let stage_mb = compute_mb + launch_mb + tp_exposed_mb + a2a.exposed_s + cp_exposed_mb;

    let p2p_mb = if mesh.pp > 1 {
        pipeline::transfer_s(x.collectives, mesh, x.placement, (t, widths.0))
    } else {
        0.0
    };
    let m_f = f64::from(m);
    let bubble = if dualpipe {
        f64::from(mesh.pp / 2 - 1) * pipeline::DUALPIPE_BUBBLE_SHARE * (stage_mb + p2p_mb)
    } else {
        // Combined 1F1B pairs nothing while the pipeline fills and drains.
        let unpaired_mb = stage_mb - a2a.exposed_s + a2a_mb;
        pipeline::bubble_s(mesh.pp, mesh.virtual_stages, unpaired_mb + p2p_mb)
    };

    let windows = Windows {
        m: m_f,
        stage_layers,
        fwd_layer: fwd + fwd_launch,
        // Under recomputation a layer's backward first reruns its forward (checkpointing
        // replays it when the gradient reaches the layer), and collectives hide behind both.
        bwd_layer: bwd + bwd_launch + recompute + recompute_launch,
        // The last stage idles through the pipeline's drain after its last backward, and the
        // first through its fill: half the bubble each.
        idle: bubble / 2.0,
    };
    let (dp_grad_sync, zero_gather) = data_parallel(x, &windows);
    let optimizer = x
        .compute
        .memory_s(owned_params(x) * x.efficiency.optimizer_bytes_per_param);
    let busy = m_f * (compute_mb + launch_mb) + bubble;
    let straggler = x.efficiency.straggler_sigma * expected_max_of_normals(mesh.gpus()) * busy;

    Breakdown {
        compute: Term::exposed(m_f * compute_mb),
        launch: Term::exposed(m_f * launch_mb),
        tp_comm: Term {
            time_s: m_f * tp_mb,
            exposed_s: m_f * tp_exposed_mb,
        },
        cp_comm: Term {
            time_s: m_f * cp_time_mb,
            exposed_s: m_f * cp_exposed_mb,
        },
        ep_all_to_all: Term {
            time_s: m_f * a2a.time_s,
            exposed_s: m_f * a2a.exposed_s,
        },
        pp_p2p: Term::exposed(m_f * p2p_mb),
        pipeline_bubble: Term::exposed(bubble),
        dp_grad_sync,
        zero_gather,
        optimizer: Term::exposed(optimizer),
        straggler: Term::exposed(straggler),
    }
}

#[cfg(test)]
mod tests;
