//! Step time, term by term. [`step_time`] is the only place that adds terms up.
//!
//! Every term is computed for the last pipeline stage (which also runs the output layer) and
//! for one microbatch, then scaled by the microbatch count. Each term reports its full time
//! and the part of it that the step waits for (exposed).

use serde::Serialize;

use super::collective::{Collective, CollectiveModel};
use super::compute::ComputeModel;
use crate::catalog::Efficiency;
use crate::mesh::{Framework, Mesh, ParamFetch, Recompute, Training};
use crate::model::{FfnAct, ModelShape};
use crate::placement::{LinkClass, Placement};

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

    /// A collective of which `window` seconds of compute can hide all but `floor`; the compute
    /// that runs beside the hidden part loses `slowdown` of its throughput meanwhile, which the
    /// step pays.
    fn overlapped(time_s: f64, window: f64, floor: f64, slowdown: f64) -> Term {
        if time_s <= 0.0 {
            return Term::default();
        }
        let exposed = (time_s - window).max(floor.min(time_s));
        let hidden = time_s - exposed;
        Term {
            time_s,
            exposed_s: exposed + hidden * slowdown,
        }
    }
}

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
    /// Report name, as the JSON keys spell it.
    pub fn name(self) -> &'static str {
        match self {
            TermKind::Compute => "compute",
            TermKind::Launch => "launch",
            TermKind::TpComm => "tp_comm",
            TermKind::CpComm => "cp_comm",
            TermKind::EpAllToAll => "ep_all_to_all",
            TermKind::PpP2p => "pp_p2p",
            TermKind::PipelineBubble => "pipeline_bubble",
            TermKind::DpGradSync => "dp_grad_sync",
            TermKind::ZeroGather => "zero_gather",
            TermKind::Optimizer => "optimizer",
            TermKind::Straggler => "straggler",
        }
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
        [
            (TermKind::Compute, self.compute),
            (TermKind::Launch, self.launch),
            (TermKind::TpComm, self.tp_comm),
            (TermKind::CpComm, self.cp_comm),
            (TermKind::EpAllToAll, self.ep_all_to_all),
            (TermKind::PpP2p, self.pp_p2p),
            (TermKind::PipelineBubble, self.pipeline_bubble),
            (TermKind::DpGradSync, self.dp_grad_sync),
            (TermKind::ZeroGather, self.zero_gather),
            (TermKind::Optimizer, self.optimizer),
            (TermKind::Straggler, self.straggler),
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
    // In f64: v x m overflows u32 for absurd batches.
    let (p, m, v) = (f64::from(p), f64::from(m), f64::from(v));
    (p - 1.0) / (v * m + p - 1.0)
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

/// Per-microbatch forward figures of one average layer.
#[derive(Default, Clone, Copy)]
struct Layer {
    /// GEMMs.
    gemm: f64,
    /// Their input and weight gradients.
    gemm_bwd: f64,
    /// Attention core.
    attention: f64,
    /// Backward of the attention core.
    attention_bwd: f64,
    /// Memory-bound kernels.
    elementwise: f64,
    /// GEMMs that torchtitan's per-op selective checkpointing replays.
    op_sac_gemm: f64,
    /// Tensor-parallel collectives of one pass.
    tp: f64,
    /// The part of them that is not a reduce-scatter, which per-op checkpointing replays.
    tp_replayed: f64,
    /// All-to-all of one pass.
    a2a: f64,
    /// Context-parallel exchange of one forward pass.
    cp: f64,
    /// Kernels and collectives launched in one forward pass.
    kernels: f64,
}

impl Layer {
    fn fwd(&self) -> f64 {
        self.gemm + self.attention + self.elementwise
    }

    /// Backward: data and weight gradients of every GEMM, the attention backward, and the
    /// elementwise kernels' gradients.
    fn bwd(&self) -> f64 {
        self.gemm_bwd + self.attention_bwd + 2.0 * self.elementwise
    }
}

/// Host-bound time of one pass over a layer: how much longer issuing its kernels takes than
/// running them (the host runs ahead asynchronously, so the GPU waits only on the difference).
fn launch_excess(gpu_s: f64, kernels: f64, host_s_per_kernel: f64) -> f64 {
    (kernels * host_s_per_kernel - gpu_s).max(0.0)
}

/// What recomputation replays of one layer in backward, per microbatch.
struct Replay {
    /// GPU time of the replayed kernels.
    gpu: f64,
    /// Host-bound time beyond it.
    launch: f64,
    /// Passes of the tensor-parallel collectives replayed.
    tp_passes: f64,
    /// Passes of the other collectives (all-to-all, ring exchange) replayed.
    comm_passes: f64,
    /// Attention core replayed, which the ring exchange can hide behind.
    attention: f64,
}

/// Kernels that torchtitan's per-op selective checkpointing does not replay: the four
/// saved matmuls and the attention core.
const OP_SAC_SAVED_KERNELS: f64 = 5.0;

/// The recomputation of `x.mesh.recompute` as the framework runs it. Megatron's selective
/// recomputation replays the attention core (Korthikanti et al. 2022 §5); torchtitan's
/// ("selective", `selective_ac_option = "op"`) replays every op but the attention and every
/// other matmul, and the all-gathers of sequence parallelism; full recomputation replays the
/// whole forward with its collectives.
fn replay(x: &Inputs, avg: &Layer, comm: f64, host: f64) -> Replay {
    let none = Replay {
        gpu: 0.0,
        launch: 0.0,
        tp_passes: 0.0,
        comm_passes: 0.0,
        attention: 0.0,
    };
    match x.mesh.recompute {
        Recompute::None => none,
        r if r.per_op(x.training.framework) => {
            let gpu = avg.op_sac_gemm + avg.elementwise;
            // Nor the two reduce-scatters of sequence parallelism, whose outputs it saves,
            // with their re-layout copies where DTensor makes them.
            let scatters = if x.mesh.tp > 1 && x.mesh.sequence_parallel {
                if x.training.sp_relayout_copies() {
                    4.0
                } else {
                    2.0
                }
            } else {
                0.0
            };
            let kernels = (avg.kernels - OP_SAC_SAVED_KERNELS - scatters).max(0.0);
            Replay {
                gpu,
                launch: launch_excess(gpu + avg.tp_replayed, kernels, host),
                tp_passes: if avg.tp > 0.0 {
                    avg.tp_replayed / avg.tp
                } else {
                    0.0
                },
                ..none
            }
        }
        Recompute::Selective => Replay {
            gpu: avg.attention,
            attention: avg.attention,
            ..none
        },
        Recompute::Full => {
            let gpu = avg.fwd() * x.efficiency.recompute_pass;
            Replay {
                gpu,
                launch: launch_excess(gpu + comm, avg.kernels, host),
                tp_passes: 1.0,
                comm_passes: 1.0,
                attention: avg.attention,
            }
        }
    }
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
    let mix = |f: fn(&Layer) -> f64| (1.0 - moe_share) * f(&dense) + moe_share * f(&moe);
    let avg = Layer {
        gemm: mix(|l| l.gemm),
        gemm_bwd: mix(|l| l.gemm_bwd),
        op_sac_gemm: mix(|l| l.op_sac_gemm),
        attention: mix(|l| l.attention),
        attention_bwd: mix(|l| l.attention_bwd),
        elementwise: mix(|l| l.elementwise),
        tp: mix(|l| l.tp),
        tp_replayed: mix(|l| l.tp_replayed),
        a2a: mix(|l| l.a2a),
        cp: mix(|l| l.cp),
        kernels: mix(|l| l.kernels),
    };
    let host = x.compute.host_s_per_kernel();
    // With TP overlap the collectives run under the GEMMs they feed, chunk by chunk; Transformer
    // Engine's userbuffers do that over NVLink only. torchtitan's async TP is priced by the
    // copies it saves (`layer`), not by overlap: its measured end-to-end gains (8% on Llama3
    // 70B in PyTorch's async-TP post, 1.04-1.16x in torchtitan's 2025-06 table) are what those
    // copies cost.
    let overlaps = x.training.tp_comm_overlap && !x.training.framework.sp_copies();
    let tp_exposed = if overlaps && x.placement.tp.link == LinkClass::Nvlink {
        Term::overlapped(avg.tp, avg.gemm, 0.0, x.efficiency.overlap_slowdown).exposed_s
    } else {
        avg.tp
    };
    let comm = tp_exposed + avg.a2a;

    // Forward, backward (twice the kernels) and recomputation passes of one layer.
    let (fwd, bwd) = (avg.fwd() + comm, avg.bwd() + comm);
    let fwd_launch = launch_excess(fwd, avg.kernels, host);
    let bwd_launch = launch_excess(bwd, 2.0 * avg.kernels, host * x.efficiency.host_bwd_share);
    let replay = replay(x, &avg, comm, host);
    let (recompute, recompute_launch) = (replay.gpu, replay.launch);
    let comm_passes = 2.0 + replay.comm_passes;
    let tp_passes = 2.0 + replay.tp_passes;
    let layer_compute = avg.fwd() + avg.bwd() + recompute;
    let t = tokens_per_microbatch(x);
    let tp_f = f64::from(mesh.tp);
    let vocab = f64::from(model.vocab);
    // Output layer (forward and backward) and the cross-entropy over its logits, on the last
    // stage.
    let (logits_fwd, logits_bwd) = x.compute.linear_s(t, vocab / tp_f, f64::from(model.hidden));
    let logits = logits_fwd
        + logits_bwd
        + x.compute
            .memory_s(x.training.loss.bytes_per_logit() * t * vocab / tp_f);
    let compute_mb = stage_layers * layer_compute + logits;
    let launch_mb = stage_layers * (fwd_launch + bwd_launch + recompute_launch);
    let tp_mb = stage_layers * avg.tp * tp_passes;
    let tp_exposed_mb = stage_layers * tp_exposed * tp_passes;
    let a2a_mb = stage_layers * avg.a2a * comm_passes;
    // Ring attention overlaps the K/V exchange with the attention of the block in hand
    // (Liu et al. 2023, Ring Attention §3); backward moves twice the bytes and hides behind
    // the attention backward.
    let cp_time_mb = stage_layers * avg.cp * (3.0 + replay.comm_passes);
    let cp_exposed_mb = (cp_time_mb
        - stage_layers * (avg.attention + avg.attention_bwd + replay.attention))
        .max(0.0);
    let stage_mb = compute_mb + launch_mb + tp_exposed_mb + a2a_mb + cp_exposed_mb;

    let p2p_mb = if mesh.pp > 1 {
        pipeline_transfer(x, t)
    } else {
        0.0
    };
    let m_f = f64::from(m);
    let bubble = if mesh.pp > 1 {
        f64::from(mesh.pp - 1) / f64::from(mesh.virtual_stages) * (stage_mb + p2p_mb)
    } else {
        0.0
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
        ep_all_to_all: Term::exposed(m_f * a2a_mb),
        pp_p2p: Term::exposed(m_f * p2p_mb),
        pipeline_bubble: Term::exposed(bubble),
        dp_grad_sync,
        zero_gather,
        optimizer: Term::exposed(optimizer),
        straggler: Term::exposed(straggler),
    }
}

/// Pipeline sends of one microbatch: activations forward and gradients back, v times each
/// with interleaving. Without sequence parallelism Megatron's scatter/gather sends 1/t of the
/// activation per TP rank and all-gathers it over TP after the receive (Narayanan et al.
/// 2021 §4.1); with it the activation is already split.
fn pipeline_transfer(x: &Inputs, t: f64) -> f64 {
    let mesh = x.mesh;
    let tp_f = f64::from(mesh.tp);
    let full = t * f64::from(x.model.hidden) * 2.0;
    let send = x
        .collectives
        .time_s(Collective::SendRecv, &x.placement.pp, full / tp_f);
    let gather = if mesh.tp > 1 && !mesh.sequence_parallel {
        x.collectives
            .time_s(Collective::AllGather, &x.placement.tp, full)
    } else {
        0.0
    };
    2.0 * f64::from(mesh.virtual_stages) * (send + gather)
}

/// Tokens one GPU processes per microbatch: mb x s / cp.
fn tokens_per_microbatch(x: &Inputs) -> f64 {
    f64::from(x.mesh.microbatch_size) * f64::from(x.training.seq_len) / f64::from(x.mesh.cp)
}

/// Kernels one forward pass of a layer launches, besides its collectives: two norms, the QKV,
/// output and MLP GEMMs, rotary or bias, the activation, two residual adds (Megatron-Core's
/// fused layer: ~12), plus the attention core (1 fused kernel, 6 unfused: baddbmm, scale,
/// mask-softmax, dropout, bmm, transpose).
const LAYER_KERNELS: f64 = 12.0;
const UNFUSED_ATTENTION_KERNELS: f64 = 6.0;
/// An MoE block adds the router, top-k, permute and unpermute (Megatron-Core's token
/// dispatcher).
const MOE_KERNELS: f64 = 6.0;

/// Forward time of attention without a fused kernel over `t` tokens of `s`-token sequences,
/// `heads` heads of width `d` on this GPU: the scores Q K^T (s x s, k = d) and P V (s x d,
/// k = s), each one batched launch over microbatch x heads whose tiles quantize over the SMs
/// once, and the score matrix through HBM at 11 bytes per score.
fn unfused_attention_s(c: &dyn ComputeModel, heads: f64, t: f64, s: f64, d: f64) -> f64 {
    c.gemm_s(heads * t, s, d) + c.gemm_s(heads * t, d, s) + c.memory_s(11.0 * heads * t * s)
}

/// Forward and backward times added pass by pass.
fn sum(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 + b.0, a.1 + b.1)
}

/// Forward time and communication of one layer for one microbatch on one GPU.
fn layer(x: &Inputs, moe_layer: bool) -> Layer {
    let (model, mesh, c) = (x.model, x.mesh, x.compute);
    let t = tokens_per_microbatch(x);
    let h = f64::from(model.hidden);
    let s = f64::from(x.training.seq_len);
    let tp = f64::from(mesh.tp);
    let kv = model.kv_dim();
    let q = model.q_dim();
    let up = model.ffn_act.matrices() - 1.0;
    let mut kernels = LAYER_KERNELS;

    let attn_gemms = sum(
        c.linear_s(t, (q + 2.0 * kv) / tp, h),
        c.linear_s(t, h, q / tp),
    );
    // torchtitan's per-op checkpointing saves the output of every odd matmul of the layer
    // (wq, wv, w1, then w2 under SwiGLU) and replays the even ones: wk, wo, and w3 (SwiGLU)
    // or w2 (GeLU). Grouped expert GEMMs are not counted as matmuls there.
    let f = f64::from(model.ffn_hidden);
    let op_sac_gemm = if mesh.recompute.per_op(x.training.framework) {
        c.gemm_s(t, kv / tp, h)
            + c.gemm_s(t, h, q / tp)
            + match (&model.moe, moe_layer, model.ffn_act) {
                (Some(_), true, _) => 0.0,
                (_, _, FfnAct::Swiglu) => c.gemm_s(t, f / tp, h),
                (_, _, FfnAct::Gelu) => c.gemm_s(t, h, f / tp),
            }
    } else {
        0.0
    };
    let mlp_gemms = match (&model.moe, moe_layer) {
        (Some(moe), true) => {
            let e = f64::from(moe.experts);
            let fe = f64::from(moe.expert_ffn_hidden);
            let local_experts = e / f64::from(mesh.ep);
            // The busiest expert sets the pace: its tokens are the mean share times the
            // imbalance (the capacity factor where the router drops tokens).
            let per_expert =
                t * f64::from(mesh.ep) * f64::from(moe.top_k) / e * x.efficiency.moe_imbalance;
            // Megatron-Core (`--moe-grouped-gemm`, Transformer Engine's GroupedLinear) and
            // torchtitan (`torch._grouped_mm`) run every local expert's projection in one
            // launch whose tiles spread over the SMs together; DeepSpeed-MoE loops over them.
            // (launches per projection, rows of each launch)
            let (launches, rows) = if x.training.framework == Framework::Deepspeed {
                (local_experts, per_expert)
            } else {
                (1.0, local_experts * per_expert)
            };
            kernels += MOE_KERNELS + 2.0 * launches;
            let (fwd, bwd) = sum(
                c.linear_s(rows, up * fe / tp, h),
                c.linear_s(rows, h, fe / tp),
            );
            let routed = (launches * fwd, launches * bwd);
            let shared = if moe.shared_experts > 0 {
                let fs = fe * f64::from(moe.shared_experts);
                sum(c.linear_s(t, up * fs / tp, h), c.linear_s(t, h, fs / tp))
            } else {
                (0.0, 0.0)
            };
            sum(sum(routed, shared), c.linear_s(t, e, h))
        }
        _ => sum(c.linear_s(t, up * f / tp, h), c.linear_s(t, h, f / tp)),
    };
    // Causal attention: 4·t·s·q/tp FLOPs over the full square, half of it executed by fused
    // kernels; the unfused path computes the full square and moves the score matrix through
    // HBM (write, softmax read/write, dropout mask and output, read by the second bmm: 11
    // bytes per score), and its backward costs twice its forward.
    let (attention, attention_bwd) = if x.training.flash_attention {
        // Each kernel call covers a sequence, or with context parallelism one ring block.
        let (flops, block, d) = (
            2.0 * t * s * q / tp,
            s / f64::from(mesh.cp),
            model.head_dim(),
        );
        (
            c.attention_s(flops, block, d),
            c.attention_bwd_s(flops, block, d),
        )
    } else {
        kernels += UNFUSED_ATTENTION_KERNELS - 1.0;
        let fwd = unfused_attention_s(c, f64::from(model.heads) / tp, t, s, model.head_dim());
        (fwd, 2.0 * fwd)
    };
    let width = model.mlp_width_per_token(moe_layer);
    let glu = match model.ffn_act {
        FfnAct::Gelu => 1.0,
        FfnAct::Swiglu => 1.5,
    };
    let sp_div = if mesh.sequence_parallel { tp } else { 1.0 };
    let eff = x.efficiency;
    // Eager PyTorch stacks run norms, rotary and gating as separate kernels with fp32
    // upcasts, where Megatron-Core's Transformer Engine layer fuses them.
    let eager = if x.training.fused_elementwise {
        1.0
    } else {
        eff.eager_elementwise
    };
    let elementwise = c.memory_s(
        eager
            * t
            * (eff.elementwise_bytes_per_hidden * h / sp_div
                + eff.elementwise_bytes_per_ffn * width * glu / tp),
    );

    let act_bytes = t * h * 2.0;
    // Two all-reduces (or two reduce-scatter + all-gather pairs) per pass.
    let (tp_comm, tp_replayed) = if mesh.tp > 1 {
        let g = &x.placement.tp;
        if mesh.sequence_parallel {
            kernels += 4.0;
            // A re-laying copy reads and writes the whole tensor beside each collective.
            let relays = x.training.sp_relayout_copies();
            let relay = |bytes: f64| {
                if relays {
                    c.memory_s(2.0 * bytes)
                } else {
                    0.0
                }
            };
            if relays {
                kernels += 4.0;
            }
            let gathered = act_bytes / 2.0 * x.training.tp_gather_bytes();
            let gather = x.collectives.time_s(Collective::AllGather, g, gathered) + relay(gathered);
            let scatter = x
                .collectives
                .time_s(Collective::ReduceScatter, g, act_bytes)
                + relay(act_bytes);
            (2.0 * (scatter + gather), 2.0 * gather)
        } else {
            kernels += 2.0;
            let all = 2.0 * x.collectives.time_s(Collective::AllReduce, g, act_bytes);
            (all, all)
        }
    } else {
        (0.0, 0.0)
    };
    let a2a = match (&model.moe, moe_layer) {
        (Some(moe), true) if mesh.ep > 1 => {
            kernels += 2.0;
            // A deduplicating dispatcher sends fewer copies across nodes; across nodes the
            // network bounds the exchange, so its share of the bytes prices it.
            let ep = &x.placement.ep;
            let share = x.training.moe_dispatch.network_share(
                f64::from(moe.experts),
                f64::from(moe.top_k),
                f64::from(ep.nodes),
            );
            let bytes = act_bytes * f64::from(moe.top_k) / tp * x.efficiency.moe_imbalance * share;
            2.0 * x
                .collectives
                .time_s(Collective::AllToAll, &x.placement.ep, bytes)
        }
        _ => 0.0,
    };
    let cp = if mesh.cp > 1 {
        kernels += f64::from(mesh.cp - 1);
        let kv_bytes = t * 2.0 * kv * 2.0 / tp;
        f64::from(mesh.cp - 1)
            * x.collectives
                .time_s(Collective::SendRecv, &x.placement.cp, kv_bytes)
    } else {
        0.0
    };
    Layer {
        gemm: attn_gemms.0 + mlp_gemms.0,
        gemm_bwd: attn_gemms.1 + mlp_gemms.1,
        op_sac_gemm,
        attention,
        attention_bwd,
        elementwise,
        tp: tp_comm,
        tp_replayed,
        a2a,
        cp,
        kernels,
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

/// Parameters whose optimizer state this GPU updates: ZeRO shards them over the gradient
/// group (DP x CP).
fn owned_params(x: &Inputs) -> f64 {
    let (dense, experts) = stage_params(x);
    if x.mesh.zero_stage >= 1 {
        dense / f64::from(x.mesh.dp * x.mesh.cp)
            + experts / (f64::from(x.mesh.dp / x.mesh.ep)).max(1.0)
    } else {
        dense + experts
    }
}

/// The compute a data-parallel collective can hide behind.
struct Windows {
    /// Microbatches per step.
    m: f64,
    /// Layers on the stage.
    stage_layers: f64,
    /// One layer's forward pass of one microbatch.
    fwd_layer: f64,
    /// One layer's backward pass of one microbatch, with its recomputation.
    bwd_layer: f64,
    /// Pipeline idle time at the end (and start) of the step.
    idle: f64,
}

/// Gradient buckets per step for `params` parameters: Megatron-Core's max(40M, 1M x dp)
/// parameters, DDP's 25 MB, DeepSpeed's 500M-element reduce bucket (`reduce_bucket_size`).
fn buckets(x: &Inputs, params: f64, ranks: u32) -> f64 {
    let bucket = match x.training.framework {
        Framework::Megatron => 40e6_f64.max(1e6 * f64::from(ranks)),
        Framework::Fsdp => 25.0 * 1024.0 * 1024.0 / x.training.grad_reduce.bytes(),
        Framework::Deepspeed => 5e8,
    };
    (params / bucket).ceil().max(1.0)
}

/// Elements below which DeepSpeed's ZeRO-3 keeps a parameter whole on every rank instead of
/// sharding it (`stage3_param_persistence_threshold`, default 100,000 in
/// `deepspeed/runtime/zero/constants.py` at v0.4.0): LayerNorm weights and biases.
const DEEPSPEED_PERSISTENCE_THRESHOLD: f64 = 1e5;

/// Data-parallel terms: gradient reduction and ZeRO gathers, one call per bucket or layer.
///
/// ZeRO-0 all-reduces gradients once per step; ZeRO-1 reduce-scatters them and all-gathers
/// the updated bf16 parameters, the same volume (Rajbhandari et al. 2020 §7.2); ZeRO-2
/// reduce-scatters after every microbatch's backward. Where the framework overlaps the
/// reduction, only what exceeds the last microbatch's backward is exposed, and at least the
/// last bucket. ZeRO-3 (FSDP) gathers each layer's parameters before its forward and again
/// before its backward, and reduce-scatters its gradients, for every microbatch, prefetching
/// one layer ahead: what exceeds each layer's compute is exposed, plus the first gather;
/// under [`ParamFetch::PostBackward`] the backward's gathers are exposed whole.
/// DeepSpeed's ZeRO-3 before v0.6.0 ([`ParamFetch::PerTensor`]) did the same per parameter
/// tensor, each call behind a device-wide synchronize and handing c10d one tensor per rank:
/// all of it is priced exposed, and each call pays host time per rank. Two things of v0.4's
/// `stage3.py` are left out, and they pull opposite ways: a module's hook prefetches the next
/// tensor while fewer than `stage3_max_live_parameters` (1e9) elements are gathered, and that
/// gather runs beside the module's compute; under full recomputation the replay gathers every
/// tensor again, and the backward after it again those whose next use lies more than
/// `stage3_max_reuse_distance` (1e9) elements of other modules away. Followed by hand through
/// one layer of the 175B GPT on 1,536 GPUs at the model's per-call times, the prefetch hides
/// more of the forward than the re-gathers add to the backward, so together they would make a
/// step the model already prices 33% too fast faster still: the missing cost is elsewhere.
fn data_parallel(x: &Inputs, w: &Windows) -> (Term, Term) {
    let mesh = x.mesh;
    let g = &x.placement.grad;
    if g.ranks <= 1 {
        return (Term::default(), Term::default());
    }
    let (dense, experts) = stage_params(x);
    let grad_bytes = x.training.grad_reduce.bytes();
    // Both weight kinds, each over its own group, in its own buckets.
    let groups = [(dense, *g), (experts, x.placement.expert_dp)];
    // Time and calls of one pass of collective c over both weight kinds: `calls_per_layer`
    // where the framework calls per layer or per tensor, else one call per gradient bucket;
    // plus host time where each call takes a list of the ranks' tensors. The bytes split
    // evenly over the calls, which prices each call's latency exactly and its bandwidth
    // within NCCL's choice of protocol by size.
    let per_tensor = x.training.param_fetch == ParamFetch::PerTensor && mesh.zero_stage >= 3;
    let coll = |c: Collective, bytes_per_param: f64, calls_per_layer: Option<f64>| -> (f64, f64) {
        let mut total = 0.0;
        let mut calls = 0.0;
        for (params, group) in groups {
            if params <= 0.0 || group.ranks <= 1 {
                continue;
            }
            let n = match calls_per_layer {
                Some(k) => k * w.stage_layers.ceil(),
                None => buckets(x, params, group.ranks),
            };
            total += x
                .collectives
                .calls_s(c, &group, params * bytes_per_param, n);
            if per_tensor {
                total += n * f64::from(group.ranks) * x.efficiency.list_host_s_per_rank;
            }
            calls += n;
        }
        (total, calls)
    };
    let backward = w.stage_layers * w.bwd_layer + w.idle;
    let forward = w.stage_layers * w.fwd_layer + w.idle;
    let overlap = x.training.overlap_grad_reduce;
    let slowdown = x.efficiency.overlap_slowdown;
    let exposure = |(t, calls): (f64, f64), window: f64| {
        if overlap {
            Term::overlapped(t, window, t / calls.max(1.0), slowdown)
        } else {
            Term::exposed(t)
        }
    };
    match mesh.zero_stage {
        0 => (
            exposure(coll(Collective::AllReduce, grad_bytes, None), backward),
            Term::default(),
        ),
        1 | 2 => {
            let rs = coll(Collective::ReduceScatter, grad_bytes, None);
            let ag = coll(Collective::AllGather, 2.0, None);
            let reduce = if mesh.zero_stage == 2 {
                let all = exposure(rs, backward);
                Term {
                    time_s: w.m * all.time_s,
                    exposed_s: w.m * all.exposed_s,
                }
            } else {
                exposure(rs, backward)
            };
            // Megatron-Core overlaps the parameter gather with the next step's forward.
            (reduce, exposure(ag, forward))
        }
        _ if per_tensor => {
            // Tensors under DeepSpeed's persistence threshold stay whole on every rank and
            // are gathered once per step; every tensor's gradient is reduce-scattered.
            let tensors = x.model.layer_tensors();
            let gathered = tensors
                .iter()
                .filter(|&&n| n >= DEEPSPEED_PERSISTENCE_THRESHOLD)
                .count();
            let (ag, _) = coll(Collective::AllGather, 2.0, Some(gathered as f64));
            let (rs, _) = coll(
                Collective::ReduceScatter,
                grad_bytes,
                Some(tensors.len() as f64),
            );
            (Term::exposed(w.m * rs), Term::exposed(w.m * 2.0 * ag))
        }
        _ => {
            let (ag, layers) = coll(Collective::AllGather, 2.0, Some(1.0));
            let (rs, _) = coll(Collective::ReduceScatter, grad_bytes, Some(1.0));
            let (ag_l, rs_l) = (ag / layers, rs / layers);
            let fwd = Term::overlapped(ag_l, w.fwd_layer, 0.0, slowdown);
            let bwd = if x.training.param_fetch == ParamFetch::PostBackward {
                let rs = Term::overlapped(rs_l, w.bwd_layer, 0.0, slowdown);
                Term::exposed(ag_l + rs.exposed_s)
            } else {
                Term::overlapped(ag_l + rs_l, w.bwd_layer, 0.0, slowdown)
            };
            let per_mb = layers * (fwd.exposed_s + bwd.exposed_s) + ag_l;
            let total = w.m * layers * (2.0 * ag_l + rs_l);
            let exposed = w.m * per_mb;
            let share = |part: f64| Term {
                time_s: part,
                exposed_s: exposed * part / total,
            };
            (share(w.m * layers * rs_l), share(w.m * layers * 2.0 * ag_l))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};
    use crate::cost::collective::Source;
    use crate::cost::compute::NominalCompute;
    use crate::mesh::{FlashKernel, LossKernel, Precision, ReduceDtype};
    use crate::placement::GroupSpan;

    /// Collectives that cost a fixed time per call, to count calls.
    struct PerCall(f64);

    impl CollectiveModel for PerCall {
        fn time_s(&self, _: Collective, g: &GroupSpan, _: f64) -> f64 {
            if g.ranks <= 1 {
                0.0
            } else {
                self.0
            }
        }
        fn source(&self, _: Collective, _: &GroupSpan) -> Source {
            Source::Nominal
        }
    }

    /// Collectives that cost their wire bytes at 1 GB/s, to count bytes.
    struct PerWireByte;

    impl CollectiveModel for PerWireByte {
        fn time_s(&self, c: Collective, g: &GroupSpan, bytes: f64) -> f64 {
            bytes * c.busbw_factor(g.ranks) / 1e9
        }
        fn source(&self, _: Collective, _: &GroupSpan) -> Source {
            Source::Nominal
        }
    }

    fn training(framework: Framework) -> Training {
        Training {
            global_batch: 512,
            overlap_grad_reduce: false,
            flash_kernel: FlashKernel::Flash2,
            tp_comm_overlap: false,
            framework,
            grad_reduce: ReduceDtype::Bf16,
            ..Training::megatron(8192, 512)
        }
    }

    fn mesh(tp: u32, dp: u32, mb: u32, zero_stage: u8, sp: bool) -> Mesh {
        Mesh {
            tp,
            pp: 1,
            dp,
            cp: 1,
            ep: 1,
            microbatch_size: mb,
            virtual_stages: 1,
            zero_stage,
            recompute: Recompute::None,
            sequence_parallel: sp,
        }
    }

    fn breakdown(mesh: &Mesh, training: &Training, collectives: &dyn CollectiveModel) -> Breakdown {
        let cluster = catalog::cluster("dgx-h100").unwrap();
        let compute = NominalCompute::new(
            &cluster.gpu,
            training.precision,
            training.flash_kernel,
            &NOMINAL,
        );
        breakdown_on(mesh, training, collectives, &compute)
    }

    /// Llama 3 8B on DGX H100 nodes, priced with `compute`.
    fn breakdown_on(
        mesh: &Mesh,
        training: &Training,
        collectives: &dyn CollectiveModel,
        compute: &dyn ComputeModel,
    ) -> Breakdown {
        breakdown_with(mesh, training, collectives, compute, &NOMINAL)
    }

    /// The same with the catalog efficiencies replaced by `efficiency`.
    fn breakdown_with(
        mesh: &Mesh,
        training: &Training,
        collectives: &dyn CollectiveModel,
        compute: &dyn ComputeModel,
        efficiency: &Efficiency,
    ) -> Breakdown {
        let model = catalog::model("llama3-8b").unwrap().shape;
        let cluster = catalog::cluster("dgx-h100").unwrap();
        step_time(&Inputs {
            model: &model,
            training,
            mesh,
            placement: &Placement::of(mesh, &cluster),
            compute,
            collectives,
            efficiency,
        })
    }

    /// A GPU that runs 1 PFLOP/s on every GEMM and attention and moves 1 TB/s, so that compute
    /// times are FLOP and byte counts, behind a host that takes `self.0` seconds to issue a
    /// kernel (none for `PER_FLOP`).
    struct PerFlop(f64);

    const PER_FLOP: PerFlop = PerFlop(0.0);

    impl ComputeModel for PerFlop {
        fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64 {
            2.0 * m * n * k * 1e-15
        }
        fn attention_s(&self, flops: f64, _seq: f64, _head_dim: f64) -> f64 {
            flops * 1e-15
        }
        fn memory_s(&self, bytes: f64) -> f64 {
            bytes * 1e-12
        }
        fn host_s_per_kernel(&self) -> f64 {
            self.0
        }
    }

    #[test]
    fn the_backward_issues_its_kernels_at_its_own_host_rate() {
        // Llama 3 8B on DP 64: 8 microbatches through 32 layers, every pass host-bound at a
        // second a kernel. A layer's forward issues its 12 kernels (TP 1, fused attention),
        // its backward 24 at the share of the forward's host time: each second of host time
        // per kernel adds 8 x 32 x 12 x (1 + 2 x share) s, and halving the share from 1 saves
        // 8 x 32 x 24 x 0.5 = 3,072 s. Full recomputation replays the forward's 12 kernels
        // from Python, at the forward's rate: 8 x 32 x 12 x (2 + 2 x share) s.
        let launch = |recompute: Recompute, host: f64, share: f64| {
            let e = Efficiency {
                host_bwd_share: share,
                ..NOMINAL
            };
            let m = Mesh {
                recompute,
                ..mesh(1, 64, 1, 0, false)
            };
            let t = training(Framework::Megatron);
            breakdown_with(&m, &t, &PerCall(0.0), &PerFlop(host), &e)
                .launch
                .time_s
        };
        let per_host_second =
            |r: Recompute, share: f64| launch(r, 2.0, share) - launch(r, 1.0, share);
        let per_pass = 8.0 * 32.0 * 12.0;
        for (share, passes) in [(1.0, 3.0), (0.5, 2.0)] {
            let t = per_host_second(Recompute::None, share);
            assert!((t - per_pass * passes).abs() < 1e-6, "{t}");
            let t = per_host_second(Recompute::Full, share);
            assert!((t - per_pass * (passes + 1.0)).abs() < 1e-6, "{t}");
        }
        let saved = launch(Recompute::None, 1.0, 1.0) - launch(Recompute::None, 1.0, 0.5);
        assert!((saved - 3072.0).abs() < 1e-6, "{saved}");
    }

    #[test]
    fn the_loss_moves_each_logit_as_often_as_its_kernels_do() {
        // Llama 3 8B (vocab 128,256) on DP 64: 8 microbatches of 8,192 tokens, at 1 TB/s.
        // Megatron's unfused loss moves 52 bytes per logit, eager PyTorch's 48, a fused kernel
        // 8: the step's compute differs by 8 x 44 x 8,192 x 128,256 bytes = 0.369837 s between
        // Megatron's and the fused one, and by 8 x 40 x ... = 0.336215 s between eager and fused.
        let compute = |loss: LossKernel| {
            let t = Training {
                loss,
                ..training(Framework::Megatron)
            };
            breakdown_on(&mesh(1, 64, 1, 0, false), &t, &PerCall(0.0), &PER_FLOP)
                .compute
                .time_s
        };
        let fused = compute(LossKernel::Fused);
        let megatron = compute(LossKernel::Megatron) - fused;
        assert!((megatron - 0.369836949504).abs() < 1e-9, "{megatron}");
        let eager = compute(LossKernel::Eager) - fused;
        assert!((eager - 0.33621540864).abs() < 1e-9, "{eager}");
        assert_eq!(
            LossKernel::default_for(Framework::Deepspeed),
            LossKernel::Megatron
        );
        assert_eq!(LossKernel::default_for(Framework::Fsdp), LossKernel::Eager);
    }

    #[test]
    fn selective_recomputation_replays_what_the_framework_replays() {
        // Llama 3 8B (h 4096, kv 1024, SwiGLU f 14336), 8192 tokens per microbatch, 64
        // microbatches, 32 layers. torchtitan's per-op policy replays wk, wo and w3:
        // 2 x 8192 x 4096 x (1024 + 4096 + 14336) = 1.3057 TFLOP per layer, 36.5% of the
        // forward matmuls, and every elementwise kernel: 8192 x (43 x 4096 + 16 x 1.5 x
        // 14336) = 4.2614 GB. Megatron's replays the attention core: 2 x 8192^2 x 4096 FLOPs.
        let per_layer_op = 2.0 * 8192.0 * 4096.0 * (1024.0 + 4096.0 + 14336.0) * 1e-15
            + 8192.0 * (43.0 * 4096.0 + 16.0 * 1.5 * 14336.0) * 1e-12;
        let per_layer_megatron = 2.0 * 8192.0 * 8192.0 * 4096.0 * 1e-15;
        let compute = |framework, recompute| {
            let m = Mesh {
                recompute,
                ..mesh(1, 8, 1, 3, false)
            };
            breakdown_on(&m, &training(framework), &PerCall(0.0), &PER_FLOP)
                .compute
                .time_s
        };
        let none = compute(Framework::Fsdp, Recompute::None);
        let op = compute(Framework::Fsdp, Recompute::Selective) - none;
        assert!((op - 64.0 * 32.0 * per_layer_op).abs() < 1e-9, "{op}");
        assert!((op / (64.0 * 32.0) - 5.5675e-3).abs() < 1e-6, "{op}");
        let none = compute(Framework::Megatron, Recompute::None);
        let megatron = compute(Framework::Megatron, Recompute::Selective) - none;
        assert!(
            (megatron - 64.0 * 32.0 * per_layer_megatron).abs() < 1e-9,
            "{megatron}"
        );
    }

    #[test]
    fn per_op_recomputation_replays_the_all_gathers_of_sequence_parallelism() {
        // TP 8 with SP: 4 calls per layer per pass, 2 passes; the per-op policy saves the
        // reduce-scatter outputs and replays the 2 all-gathers: 10 calls per layer, against
        // 8 under Megatron's selective recomputation. 8 microbatches x 32 layers x 1 ms.
        // torchtitan's DTensor also re-lays out each of those 10 tensors, a read and a write
        // of 8192 x 4096 x 2 bytes at the 0.86 x 3.35 TB/s an H100 streams: 46.59 us a call.
        let mut m = mesh(8, 64, 1, 0, true);
        m.recompute = Recompute::Selective;
        let relay: f64 = 2.0 * 8192.0 * 4096.0 * 2.0 / (0.86 * 3.35e12);
        assert!((relay - 46.59e-6).abs() < 1e-8, "{relay}");
        let op = breakdown(&m, &training(Framework::Fsdp), &PerCall(1e-3));
        let want = 8.0 * 32.0 * 10.0 * (1e-3 + relay);
        assert!(
            (op.tp_comm.time_s - want).abs() < 1e-9 * want,
            "{}",
            op.tp_comm.time_s
        );
        let megatron = breakdown(&m, &training(Framework::Megatron), &PerCall(1e-3));
        assert!((megatron.tp_comm.time_s - 8.0 * 32.0 * 8.0 * 1e-3).abs() < 1e-9);
    }

    #[test]
    fn torchtitan_gathers_tensorwise_fp8_and_async_tp_drops_the_relayout_copies() {
        // Llama 3 8B, TP 8 with SP, 8 microbatches of one 8192-token sequence, no
        // recomputation: per layer and pass 2 all-gathers and 2 reduce-scatters of a 64 MiB
        // activation, 7/8 of it on the wire at 1 GB/s: 58.72 ms each in bf16. Tensorwise fp8
        // gathers 1 byte an element (29.36 ms); its reduce-scatters stay bf16.
        let m = mesh(8, 64, 1, 0, true);
        let wire = 8192.0 * 4096.0 * 2.0 * 7.0 / 8.0 / 1e9;
        let relay = |bytes: f64| 2.0 * bytes / (0.86 * 3.35e12);
        let act = 8192.0 * 4096.0 * 2.0;
        let per_pass = |gather_share: f64, relays: bool| {
            let copies = if relays {
                2.0 * relay(act * gather_share) + 2.0 * relay(act)
            } else {
                0.0
            };
            2.0 * wire * gather_share + 2.0 * wire + copies
        };
        let tp = |precision, tp_comm_overlap| {
            let t = Training {
                precision,
                tp_comm_overlap,
                ..training(Framework::Fsdp)
            };
            breakdown(&m, &t, &PerWireByte).tp_comm
        };
        let close = |got: f64, want: f64| (got - want).abs() < 1e-9 * want;
        let passes = 8.0 * 32.0 * 2.0;
        let bf16 = tp(Precision::Bf16, false);
        assert!(
            close(bf16.time_s, passes * per_pass(1.0, true)),
            "{}",
            bf16.time_s
        );
        let fp8 = tp(Precision::Fp8, false);
        assert!(
            close(fp8.time_s, passes * per_pass(0.5, true)),
            "{}",
            fp8.time_s
        );
        let rowwise = tp(Precision::Fp8Rowwise, false);
        assert!(close(rowwise.time_s, bf16.time_s), "{}", rowwise.time_s);
        // Async TP: no copies, and no overlap priced either: every second is exposed.
        let async_tp = tp(Precision::Bf16, true);
        assert!(close(async_tp.time_s, passes * per_pass(1.0, false)));
        assert!(close(async_tp.exposed_s, async_tp.time_s));
        // Megatron's [s, b, h] layout gathers in place.
        let te = breakdown(&m, &training(Framework::Megatron), &PerWireByte).tp_comm;
        assert!(close(te.time_s, passes * per_pass(1.0, false)));
    }

    #[test]
    fn four_tp_collectives_per_layer_per_pass_with_sequence_parallelism() {
        // Megatron SP: reduce-scatter + all-gather around attention and around the MLP, in
        // forward and again in backward. Llama 3 8B, 32 layers, TP=8, 512/(64 x 1) = 8
        // microbatches: 8 x 32 x 2 passes x 4 calls x 1 ms = 2.048 s.
        let t = training(Framework::Megatron);
        let b = breakdown(&mesh(8, 64, 1, 0, true), &t, &PerCall(1e-3));
        assert!((b.tp_comm.time_s - 8.0 * 32.0 * 2.0 * 4.0 * 1e-3).abs() < 1e-9);
        // Without SP, one all-reduce in place of each pair: half the calls.
        let b = breakdown(&mesh(8, 64, 1, 0, false), &t, &PerCall(1e-3));
        assert!((b.tp_comm.time_s - 8.0 * 32.0 * 2.0 * 2.0 * 1e-3).abs() < 1e-9);
    }

    #[test]
    fn a_hidden_collective_costs_the_compute_beside_it_its_measured_slowdown() {
        // Lee et al. 2025: compute overlapped with a collective runs 18.9% slower, so 1 s of
        // hidden collective costs 1 - 1/1.189 = 0.15896 s; what exceeds the window is paid
        // in full on top.
        let s = NOMINAL.overlap_slowdown;
        assert!((s - 0.15896).abs() < 1e-5, "{s}");
        let hidden = Term::overlapped(1.0, 2.0, 0.0, s);
        assert!((hidden.exposed_s - 0.15896).abs() < 1e-5, "{hidden:?}");
        let spill = Term::overlapped(3.0, 2.0, 0.0, s);
        assert!(
            (spill.exposed_s - (1.0 + 2.0 * 0.15896)).abs() < 1e-4,
            "{spill:?}"
        );
    }

    #[test]
    fn zero3_moves_one_and_a_half_times_the_bytes_of_data_parallel() {
        // Rajbhandari et al. 2020 §7.2.2: DP all-reduces 2 x Psi per step, ZeRO-3 gathers the
        // parameters for forward and backward and reduce-scatters the gradients, 3 x Psi.
        // One microbatch (512 sequences on 512 GPUs), bf16 gradients.
        let t = training(Framework::Fsdp);
        let dp = breakdown(&mesh(1, 512, 1, 0, false), &t, &PerWireByte);
        let z3 = breakdown(&mesh(1, 512, 1, 3, false), &t, &PerWireByte);
        let ratio = (z3.dp_grad_sync.time_s + z3.zero_gather.time_s) / dp.dp_grad_sync.time_s;
        assert!((ratio - 1.5).abs() < 1e-9, "{ratio}");
        // fp32 gradient reduction doubles the reduce-scatter: (2 + 2) / (2 x 1) over bf16's 1.5.
        let t32 = Training {
            grad_reduce: ReduceDtype::Fp32,
            ..t
        };
        let z3_32 = breakdown(&mesh(1, 512, 1, 3, false), &t32, &PerWireByte);
        let ratio = (z3_32.dp_grad_sync.time_s + z3_32.zero_gather.time_s) / dp.dp_grad_sync.time_s;
        assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
    }

    #[test]
    fn composer_backward_post_prefetch_exposes_the_backward_gathers() {
        // Llama 3 8B on DP 64 under ZeRO-3, 8 microbatches through 32 layers, every call 1 ms
        // against layers of tens of ms. Prefetched, each gather and reduce-scatter hides and
        // costs the compute beside it its overlap slowdown (0.159 of the call). Under
        // BACKWARD_POST the backward's gather waits exposed: 8 x 32 x 1 ms x (1 - 0.15896) =
        // 0.215307 s more, and the time on the wire is the same.
        let priced = |param_fetch| {
            let t = Training {
                param_fetch,
                ..training(Framework::Fsdp)
            };
            breakdown(&mesh(1, 64, 1, 3, false), &t, &PerCall(1e-3))
        };
        let (pre, post) = (
            priced(ParamFetch::Coalesced),
            priced(ParamFetch::PostBackward),
        );
        let sum = |b: &Breakdown, f: fn(&Term) -> f64| f(&b.dp_grad_sync) + f(&b.zero_gather);
        let more = sum(&post, |t| t.exposed_s) - sum(&pre, |t| t.exposed_s);
        let expected = 8.0 * 32.0 * 1e-3 * (1.0 - NOMINAL.overlap_slowdown);
        assert!((more - expected).abs() < 1e-9, "{more}");
        assert!((expected - 0.215307).abs() < 1e-6, "{expected}");
        assert_eq!(sum(&post, |t| t.time_s), sum(&pre, |t| t.time_s));
    }

    #[test]
    fn deepspeed_before_0_6_fetches_tensor_by_tensor_and_hides_nothing() {
        // Llama 3 8B (32 layers of 9 tensors, the two 4,096-element RMSNorm weights under
        // DeepSpeed's persistence threshold) on DP=64, 8 microbatches of 1. Per microbatch:
        // 2 gather passes of 7 x 32 = 224 calls and 1 reduce-scatter pass of 9 x 32 = 288,
        // 736 calls at 1 ms plus 64 ranks x 5 us of list handling each: 8 x 736 x 1.32 ms =
        // 7.77216 s, all of it exposed, 2 x 224 / 288 of it in the gathers. The coalesced
        // fetch makes 96 calls per microbatch and hides what fits behind each layer's compute.
        let per_tensor = Training {
            param_fetch: ParamFetch::PerTensor,
            ..training(Framework::Deepspeed)
        };
        let b = breakdown(&mesh(1, 64, 1, 3, false), &per_tensor, &PerCall(1e-3));
        let total = b.dp_grad_sync.time_s + b.zero_gather.time_s;
        assert!((total - 7.77216).abs() < 1e-9, "{total}");
        let ratio = b.zero_gather.time_s / b.dp_grad_sync.time_s;
        assert!((ratio - 2.0 * 224.0 / 288.0).abs() < 1e-12, "{ratio}");
        let exposed = b.dp_grad_sync.exposed_s + b.zero_gather.exposed_s;
        assert!((exposed - total).abs() < 1e-12, "{exposed}");
        let coalesced = breakdown(
            &mesh(1, 64, 1, 3, false),
            &training(Framework::Deepspeed),
            &PerCall(1e-3),
        );
        let calls = (coalesced.dp_grad_sync.time_s + coalesced.zero_gather.time_s) / 1e-3;
        assert!((calls - 8.0 * 96.0).abs() < 1e-6, "{calls}");
        assert!(coalesced.zero_gather.exposed_s < coalesced.zero_gather.time_s);
        // Below ZeRO-3 nothing is fetched: the gradient buckets are the same either way.
        let zero1 = |t: &Training| {
            let b = breakdown(&mesh(1, 64, 1, 1, false), t, &PerCall(1e-3));
            b.dp_grad_sync.time_s + b.zero_gather.time_s
        };
        assert_eq!(zero1(&per_tensor), zero1(&training(Framework::Deepspeed)));
    }

    #[test]
    fn gradient_calls_follow_the_framework_buckets() {
        // Llama 3 8B, DP=64: Megatron-Core buckets max(40M, 1M x 64) = 64M parameters;
        // PyTorch DDP 25 MiB of bf16 gradients; FSDP one unit per layer (3 calls each per
        // microbatch: gather, gather, reduce-scatter), 8 microbatches.
        let params = catalog::model("llama3-8b").unwrap().shape.params().total();
        let per_call = 1e-3;
        let calls = |framework: Framework, zero: u8| {
            let b = breakdown(
                &mesh(1, 64, 1, zero, false),
                &training(framework),
                &PerCall(per_call),
            );
            (b.dp_grad_sync.time_s + b.zero_gather.time_s) / per_call
        };
        let megatron = calls(Framework::Megatron, 0);
        assert!(
            (megatron - (params / 64e6).ceil()).abs() < 1e-9,
            "{megatron}"
        );
        let ddp = calls(Framework::Fsdp, 0);
        assert!(
            (ddp - (params * 2.0 / (25.0 * 1048576.0)).ceil()).abs() < 1e-9,
            "{ddp}"
        );
        let fsdp = calls(Framework::Fsdp, 3);
        assert!((fsdp - 8.0 * 32.0 * 3.0).abs() < 1e-9, "{fsdp}");
    }

    #[test]
    fn unfused_attention_quantizes_once_over_the_batch_of_heads() {
        // vTrain's GPT h2048 on one A100 at micro batch 2: 16 heads, 2 x 1024 tokens, head
        // width 128. Q K^T as one launch of 32,768 x 1,024 x 128: 1,024 tiles of 256 x 128
        // in 10 waves over 108 SMs (0.948), k / (k + 96) = 0.571, 0.86 x 0.948 x 0.571 of
        // 312 TFLOP/s: 59.1 us. P V, 32,768 x 128 x 1,024: 128 x 64 tiles, 512 in 5 waves
        // (0.948 x 0.80), k / (k + 96) = 0.914: 46.3 us. Scores 11 x 16 x 2,048 x 1,024
        // bytes at 0.87 x 2.039 TB/s: 208.0 us. Per head, one 2,048 x 1,024 GEMM fills 64 of
        // the 108 SMs: Q K^T alone would take 88.8 us.
        let gpu = catalog::gpu("a100-sxm-80gb").unwrap();
        let c = NominalCompute::new(gpu, Precision::Bf16, FlashKernel::Flash2, &NOMINAL);
        let t = unfused_attention_s(&c, 16.0, 2048.0, 1024.0, 128.0);
        assert!((t / 313.4e-6 - 1.0).abs() < 2e-3, "{t}");
        let per_head = 16.0 * c.gemm_s(2048.0, 1024.0, 128.0);
        assert!((per_head / 88.8e-6 - 1.0).abs() < 2e-3, "{per_head}");
    }

    #[test]
    fn stragglers_grow_with_the_log_of_the_gpu_count() {
        // sqrt(2 ln n): 2.04 at 8 GPUs, 4.18 at 6,144.
        assert_eq!(expected_max_of_normals(1), 0.0);
        assert!((expected_max_of_normals(8) - (2.0 * 8f64.ln()).sqrt()).abs() < 1e-12);
        assert!((expected_max_of_normals(6144) - 4.1775).abs() < 1e-3);
    }

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
