//! Step time, term by term. [`step_time`] is the only place that adds terms up.
//!
//! Every term is computed for the last pipeline stage (which also runs the output layer) and
//! for one microbatch, then scaled by the microbatch count. Each term reports its full time
//! and the part of it that the step waits for (exposed).

use serde::Serialize;

use super::collective::{Collective, CollectiveModel};
use super::compute::ComputeModel;
use crate::catalog::Efficiency;
use crate::mesh::{Mesh, Recompute, Training};
use crate::model::{FfnAct, ModelShape};
use crate::placement::Placement;

/// One term of the step time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Term {
    /// Time the work takes, seconds.
    pub time_s: f64,
    /// Part of it not hidden behind other work, seconds.
    pub exposed_s: f64,
}

impl Term {
    fn exposed(time_s: f64) -> Term {
        Term {
            time_s,
            exposed_s: time_s,
        }
    }
}

/// The step time of one mesh, one named field per term.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// GEMMs, attention, memory-bound kernels and launch overhead: forward, backward and
    /// recomputation of every microbatch.
    pub compute: Term,
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
}

impl Breakdown {
    /// Every term with its report name, in report order.
    pub fn terms(&self) -> [(&'static str, Term); 9] {
        [
            ("compute", self.compute),
            ("tp_comm", self.tp_comm),
            ("cp_comm", self.cp_comm),
            ("ep_all_to_all", self.ep_all_to_all),
            ("pp_p2p", self.pp_p2p),
            ("pipeline_bubble", self.pipeline_bubble),
            ("dp_grad_sync", self.dp_grad_sync),
            ("zero_gather", self.zero_gather),
            ("optimizer", self.optimizer),
        ]
    }

    /// Seconds per step: the exposed parts added.
    pub fn step_time_s(&self) -> f64 {
        self.terms().iter().map(|(_, t)| t.exposed_s).sum()
    }
}

/// Share of a training step lost to the pipeline bubble: (p - 1) / (v·m + p - 1), for p
/// stages, m microbatches and v virtual stages (v = 1 is plain 1F1B).
/// Narayanan et al. 2021, arXiv 2104.04473, §2.2: bubble = (p-1)/m of compute, divided by v.
pub fn bubble_fraction(p: u32, m: u32, v: u32) -> f64 {
    f64::from(p - 1) / f64::from(v * m + p - 1)
}

/// Everything the step-time model reads.
pub struct Inputs<'a> {
    /// Model shape.
    pub model: &'a ModelShape,
    /// Training inputs.
    pub training: &'a Training,
    /// Layout.
    pub mesh: &'a Mesh,
    /// Where the groups land.
    pub placement: &'a Placement,
    /// Kernel times.
    pub compute: &'a dyn ComputeModel,
    /// Collective times.
    pub collectives: &'a dyn CollectiveModel,
    /// Elementwise traffic and optimizer bytes.
    pub efficiency: &'a Efficiency,
}

/// Per-microbatch times of one average layer.
#[derive(Default, Clone, Copy)]
struct Layer {
    /// Forward compute (GEMMs, attention, memory-bound kernels).
    fwd: f64,
    /// Forward attention core alone (what selective recomputation repeats).
    attention: f64,
    /// Tensor-parallel collectives of one pass.
    tp: f64,
    /// All-to-all of one pass.
    a2a: f64,
    /// Context-parallel exchange of one forward pass.
    cp: f64,
}

/// Computes the step time of one mesh.
pub fn step_time(x: &Inputs) -> Breakdown {
    let (model, mesh) = (x.model, x.mesh);
    let m = mesh.microbatches(x.training.global_batch);
    let layers = f64::from(model.layers);
    let stage_layers = mesh.stage_layers(model.layers);
    let moe_share = f64::from(model.moe_layers()) / layers;
    let dense = layer(x, false);
    let moe = if moe_share > 0.0 {
        layer(x, true)
    } else {
        Layer::default()
    };
    let avg = |f: fn(&Layer) -> f64| (1.0 - moe_share) * f(&dense) + moe_share * f(&moe);
    let (fwd, attention, tp, a2a, cp) = (
        avg(|l| l.fwd),
        avg(|l| l.attention),
        avg(|l| l.tp),
        avg(|l| l.a2a),
        avg(|l| l.cp),
    );

    // Backward costs two forwards (activation and weight gradients; Narayanan et al. 2021 §3.2)
    // and repeats the forward's communication once.
    let (recompute_compute, recompute_passes) = match mesh.recompute {
        Recompute::None => (0.0, 0.0),
        Recompute::Selective => (attention, 0.0),
        Recompute::Full => (fwd * x.efficiency.recompute_pass, 1.0),
    };
    let passes = 2.0 + recompute_passes;
    let overhead = x.compute.layer_overhead_s() * passes;
    // Backward costs two forwards: data and weight gradients (Narayanan et al. 2021 §3.2).
    let backward = 2.0 * fwd;
    let layer_compute = fwd + backward + recompute_compute + overhead;
    let t = tokens_per_microbatch(x);
    let tp_f = f64::from(mesh.tp);
    let vocab = f64::from(model.vocab);
    // Output layer and fp32 cross-entropy on the last stage: 3 GEMM passes, 24 bytes per logit.
    let logits = 3.0 * x.compute.gemm_s(t, vocab / tp_f, f64::from(model.hidden))
        + x.compute.memory_s(24.0 * t * vocab / tp_f);
    let compute_mb = stage_layers * layer_compute + logits;
    let tp_mb = stage_layers * tp * passes;
    let a2a_mb = stage_layers * a2a * passes;
    // Ring attention overlaps the K/V exchange with the attention of the block in hand
    // (Liu et al. 2023, Ring Attention §3); backward moves twice the bytes.
    let cp_time_mb = stage_layers * cp * (1.0 + 2.0 + recompute_passes);
    let cp_exposed_mb = (cp_time_mb - stage_layers * attention * (3.0 + recompute_passes)).max(0.0);
    let stage_mb = compute_mb + tp_mb + a2a_mb + cp_exposed_mb;

    let p2p_mb = if mesh.pp > 1 {
        // Megatron's scatter/gather optimisation sends 1/t of the activation per TP rank, each
        // over its own NIC (Narayanan et al. 2021 §4.1); interleaving sends v times as often.
        let bytes = t * f64::from(model.hidden) * 2.0 / tp_f;
        2.0 * f64::from(mesh.virtual_stages)
            * x.collectives
                .time_s(Collective::SendRecv, &x.placement.pp, bytes)
    } else {
        0.0
    };
    let m_f = f64::from(m);
    let bubble = if mesh.pp > 1 {
        f64::from(mesh.pp - 1) / f64::from(mesh.virtual_stages) * stage_mb
    } else {
        0.0
    };

    let (dp_grad_sync, zero_gather) =
        data_parallel(x, m_f, compute_mb, backward * stage_layers, stage_layers);
    let optimizer = x
        .compute
        .memory_s(owned_params(x) * x.efficiency.optimizer_bytes_per_param);

    Breakdown {
        compute: Term::exposed(m_f * compute_mb),
        tp_comm: Term::exposed(m_f * tp_mb),
        cp_comm: Term {
            time_s: m_f * cp_time_mb,
            exposed_s: m_f * cp_exposed_mb,
        },
        ep_all_to_all: Term::exposed(m_f * a2a_mb),
        pp_p2p: Term::exposed(m_f * p2p_mb),
        pipeline_bubble: Term::exposed(bubble),
        dp_grad_sync,
        zero_gather,
        optimizer: Term::exposed(optimizer),
    }
}

/// Tokens one GPU processes per microbatch: mb x s / cp.
fn tokens_per_microbatch(x: &Inputs) -> f64 {
    f64::from(x.mesh.microbatch_size) * f64::from(x.training.seq_len) / f64::from(x.mesh.cp)
}

/// Forward time and communication of one layer for one microbatch on one GPU.
fn layer(x: &Inputs, moe_layer: bool) -> Layer {
    let (model, mesh, c) = (x.model, x.mesh, x.compute);
    let t = tokens_per_microbatch(x);
    let h = f64::from(model.hidden);
    let s = f64::from(x.training.seq_len);
    let tp = f64::from(mesh.tp);
    let kv = model.kv_dim();
    let up = model.ffn_act.matrices() - 1.0;

    let attn_gemms = c.gemm_s(t, (h + 2.0 * kv) / tp, h) + c.gemm_s(t, h, h / tp);
    let mlp_gemms = match (&model.moe, moe_layer) {
        (Some(moe), true) => {
            let e = f64::from(moe.experts);
            let fe = f64::from(moe.expert_ffn_hidden);
            let local_experts = e / f64::from(mesh.ep);
            // Balanced routing: the group's t·ep·top_k assignments spread evenly over e experts.
            let per_expert = t * f64::from(mesh.ep) * f64::from(moe.top_k) / e;
            let routed = local_experts
                * (c.gemm_s(per_expert, up * fe / tp, h) + c.gemm_s(per_expert, h, fe / tp));
            let shared = if moe.shared_experts > 0 {
                let fs = fe * f64::from(moe.shared_experts);
                c.gemm_s(t, up * fs / tp, h) + c.gemm_s(t, h, fs / tp)
            } else {
                0.0
            };
            routed + shared + c.gemm_s(t, e, h)
        }
        _ => {
            let f = f64::from(model.ffn_hidden);
            c.gemm_s(t, up * f / tp, h) + c.gemm_s(t, h, f / tp)
        }
    };
    // Causal attention: 4·t·s·h/tp FLOPs over the full square, half of it executed by fused
    // kernels; the unfused path computes the full square and moves the score matrix through
    // HBM (write, softmax read/write, dropout mask and output, read by the second bmm: 11
    // bytes per score).
    let attention = if x.training.flash_attention {
        c.attention_s(2.0 * t * s * h / tp)
    } else {
        let heads = f64::from(model.heads) / tp;
        2.0 * heads * c.gemm_s(t, s, model.head_dim()) + c.memory_s(11.0 * heads * t * s)
    };
    let width = model.mlp_width_per_token(moe_layer);
    let glu = match model.ffn_act {
        FfnAct::Gelu => 1.0,
        FfnAct::Swiglu => 1.5,
    };
    let sp_div = if mesh.sequence_parallel { tp } else { 1.0 };
    let eff = x.efficiency;
    let elementwise = c.memory_s(
        t * (eff.elementwise_bytes_per_hidden * h / sp_div
            + eff.elementwise_bytes_per_ffn * width * glu / tp),
    );

    let act_bytes = t * h * 2.0;
    let tp_comm = if mesh.tp > 1 {
        let g = &x.placement.tp;
        let one = if mesh.sequence_parallel {
            x.collectives
                .time_s(Collective::ReduceScatter, g, act_bytes)
                + x.collectives.time_s(Collective::AllGather, g, act_bytes)
        } else {
            x.collectives.time_s(Collective::AllReduce, g, act_bytes)
        };
        2.0 * one
    } else {
        0.0
    };
    let a2a = match (&model.moe, moe_layer) {
        (Some(moe), true) if mesh.ep > 1 => {
            let bytes = act_bytes * f64::from(moe.top_k) / tp;
            2.0 * x
                .collectives
                .time_s(Collective::AllToAll, &x.placement.ep, bytes)
        }
        _ => 0.0,
    };
    let cp = if mesh.cp > 1 {
        let kv_bytes = t * 2.0 * kv * 2.0 / tp;
        f64::from(mesh.cp - 1)
            * x.collectives
                .time_s(Collective::SendRecv, &x.placement.cp, kv_bytes)
    } else {
        0.0
    };
    Layer {
        fwd: attn_gemms + mlp_gemms + attention + elementwise,
        attention,
        tp: tp_comm,
        a2a,
        cp,
    }
}

/// Parameters held by the last stage per GPU, dense and expert, before ZeRO sharding.
fn stage_params(x: &Inputs) -> (f64, f64) {
    let p = x.model.params();
    let tp = f64::from(x.mesh.tp);
    let share = x.mesh.stage_layers(x.model.layers) / f64::from(x.model.layers);
    let output = f64::from(x.model.vocab) * f64::from(x.model.hidden);
    let embed = if x.mesh.pp == 1 { p.embeddings } else { output };
    (
        (p.dense_layers * share + embed) / tp,
        p.experts * share / tp / f64::from(x.mesh.ep),
    )
}

/// Parameters whose optimizer state this GPU updates.
fn owned_params(x: &Inputs) -> f64 {
    let (dense, experts) = stage_params(x);
    if x.mesh.zero_stage >= 1 {
        dense / f64::from(x.mesh.dp) + experts / (f64::from(x.mesh.dp / x.mesh.ep)).max(1.0)
    } else {
        dense + experts
    }
}

/// Data-parallel terms: gradient reduction and ZeRO gathers.
///
/// ZeRO-0 all-reduces gradients once per step; ZeRO-1/2 reduce-scatter them and all-gather the
/// updated parameters, the same volume (Rajbhandari et al. 2020 §7.2). Where the framework
/// overlaps the reduction with backward, only the part longer than one microbatch's backward,
/// and at least the last layer's bucket, is exposed. ZeRO-3 gathers each layer's parameters
/// before forward and backward of every microbatch and reduce-scatters its gradients
/// (PyTorch FSDP), prefetching one layer ahead: only what exceeds the compute, plus the first
/// layer's gather, is exposed.
fn data_parallel(
    x: &Inputs,
    m: f64,
    compute_mb: f64,
    backward_mb: f64,
    stage_layers: f64,
) -> (Term, Term) {
    let mesh = x.mesh;
    if mesh.dp <= 1 {
        return (Term::default(), Term::default());
    }
    let (dense, experts) = stage_params(x);
    let bytes = |params: f64| params * 2.0;
    let coll = |c: Collective| {
        x.collectives.time_s(c, &x.placement.dp, bytes(dense))
            + if experts > 0.0 {
                x.collectives
                    .time_s(c, &x.placement.expert_dp, bytes(experts))
            } else {
                0.0
            }
    };
    match mesh.zero_stage {
        0 => {
            let t = coll(Collective::AllReduce);
            (
                grad_exposure(x, t, backward_mb, stage_layers),
                Term::default(),
            )
        }
        1 | 2 => {
            let rs = coll(Collective::ReduceScatter);
            let ag = coll(Collective::AllGather);
            (
                grad_exposure(x, rs, backward_mb, stage_layers),
                Term::exposed(ag),
            )
        }
        _ => {
            let rs = m * coll(Collective::ReduceScatter);
            let ag = m * 2.0 * coll(Collective::AllGather);
            let total = rs + ag;
            let hidden = total.min(m * compute_mb);
            let exposed = (total - hidden)
                + total / m / stage_layers
                + x.efficiency.overlap_slowdown * hidden;
            let share = |part: f64| Term {
                time_s: part,
                exposed_s: exposed * part / total,
            };
            (share(rs), share(ag))
        }
    }
}

fn grad_exposure(x: &Inputs, time_s: f64, backward_mb: f64, stage_layers: f64) -> Term {
    if x.training.overlap_grad_reduce {
        Term {
            time_s,
            exposed_s: (time_s - backward_mb).max(time_s / stage_layers),
        }
    } else {
        Term::exposed(time_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }

    #[test]
    fn bubble_worked_numbers() {
        // Narayanan et al. 2021 §2.2.1: 7/15 at p=8, m=8 and 7/71 at m=64.
        close(bubble_fraction(8, 8, 1), 7.0 / 15.0);
        close(bubble_fraction(8, 64, 1), 7.0 / 71.0);
        // A p=16, m=16 pipeline idles about half the time: 15/31.
        close(bubble_fraction(16, 16, 1), 15.0 / 31.0);
        // Interleaving with v=4 shrinks the bubble (p-1)/(v m) of compute.
        close(bubble_fraction(8, 8, 4), 7.0 / 39.0);
    }
}
