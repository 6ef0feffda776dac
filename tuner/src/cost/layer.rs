//! One transformer layer of one microbatch on one GPU, quantity by quantity: its GEMMs, the
//! attention core, the memory-bound kernels, and the tensor-, expert- and context-parallel
//! collectives. Each quantity is a function of plain numbers; [`layer`] reads them off the
//! job and adds up the kernels.

use super::collective::{Collective, CollectiveModel};
use super::compute::ComputeModel;
use super::inputs::Inputs;
use crate::catalog::Efficiency;
use crate::mesh::{ExpertGemms, Mesh, MoeDispatch, Precision, Training};
use crate::model::{FfnAct, Moe};
use crate::placement::GroupSpan;

/// Forward and backward seconds of one quantity.
pub(super) type Pass = (f64, f64);

/// Per-microbatch forward figures of one average layer.
#[derive(Default, Clone, Copy)]
pub(super) struct Layer {
    /// GEMMs.
    pub gemm: f64,
    /// Their input and weight gradients.
    pub gemm_bwd: f64,
    /// Attention core.
    pub attention: f64,
    /// Backward of the attention core.
    pub attention_bwd: f64,
    /// Memory-bound kernels.
    pub elementwise: f64,
    /// GEMMs that torchtitan's per-op selective checkpointing replays.
    pub op_sac_gemm: f64,
    /// Tensor-parallel collectives of one pass.
    pub tp: f64,
    /// The part of them that is not a reduce-scatter, which per-op checkpointing replays.
    pub tp_replayed: f64,
    /// All-to-all of one pass.
    pub a2a: f64,
    /// Context-parallel exchange of one forward pass.
    pub cp: f64,
    /// Kernels and collectives launched in one forward pass.
    pub kernels: f64,
    /// Forward GEMMs of MLA's up-projections from its latents, which its selective
    /// recomputation replays.
    pub mla_up: f64,
}

impl Layer {
    pub fn fwd(&self) -> f64 {
        self.gemm + self.attention + self.elementwise
    }

    /// Backward: data and weight gradients of every GEMM, the attention backward, and the
    /// elementwise kernels' gradients.
    pub fn bwd(&self) -> f64 {
        self.gemm_bwd + self.attention_bwd + 2.0 * self.elementwise
    }

    /// The layer a model of `moe_share` MoE layers averages to, field by field.
    pub fn average(dense: &Layer, moe: &Layer, moe_share: f64) -> Layer {
        let mix = |f: fn(&Layer) -> f64| (1.0 - moe_share) * f(dense) + moe_share * f(moe);
        Layer {
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
            mla_up: mix(|l| l.mla_up),
        }
    }
}

/// Host-bound time of one pass over a layer: how much longer issuing its kernels takes than
/// running them (the host runs ahead asynchronously, so the GPU waits only on the difference).
pub(super) fn launch_excess(gpu_s: f64, kernels: f64, host_s_per_kernel: f64) -> f64 {
    (kernels * host_s_per_kernel - gpu_s).max(0.0)
}

/// Tokens one GPU processes per microbatch: mb x s / cp.
pub(super) fn tokens_per_microbatch(mesh: &Mesh, seq_len: u32) -> f64 {
    f64::from(mesh.microbatch_size) * f64::from(seq_len) / f64::from(mesh.cp)
}

/// Kernels one forward pass of a layer launches, besides its collectives: two norms, the QKV,
/// output and MLP GEMMs, rotary or bias, the activation, two residual adds (Megatron-Core's
/// fused layer: ~12), plus the attention core (1 fused kernel, 6 unfused: baddbmm, scale,
/// mask-softmax, dropout, bmm, transpose).
const LAYER_KERNELS: f64 = 12.0;
const UNFUSED_ATTENTION_KERNELS: f64 = 6.0;
/// Per-head query and key norms add one kernel each.
const QK_NORM_KERNELS: f64 = 2.0;
/// An MoE block adds the router, top-k, permute and unpermute (Megatron-Core's token
/// dispatcher).
const MOE_KERNELS: f64 = 6.0;

/// Forward and backward times added pass by pass.
fn sum(a: Pass, b: Pass) -> Pass {
    (a.0 + b.0, a.1 + b.1)
}

/// The attention block's GEMMs over `t` tokens of width `h`: the fused QKV projection to
/// `q + 2 kv` features and the output projection from `q`, both split over `tp` ranks
/// (Megatron's column- and row-parallel linears; Shoeybi et al. 2019 §3).
fn attention_gemms(c: &dyn ComputeModel, t: f64, h: f64, q: f64, kv: f64, tp: f64) -> Pass {
    sum(
        c.linear_s(t, (q + 2.0 * kv) / tp, h),
        c.linear_s(t, h, q / tp),
    )
}

/// A dense MLP of `up` input projections to `f` features and one back to `h`, split over
/// `tp` ranks.
fn dense_mlp_gemms(c: &dyn ComputeModel, t: f64, h: f64, f: f64, up: f64, tp: f64) -> Pass {
    sum(c.linear_s(t, up * f / tp, h), c.linear_s(t, h, f / tp))
}

/// The GEMMs of an MoE block over `t` tokens, and how many launches each expert projection
/// takes. The busiest expert sets the pace: its tokens are the mean share times `imbalance`
/// ([`Moe::load`]: capped by the capacity where the router drops tokens, the capacity where
/// inputs are padded to it). A grouped launch and Transformer Engine's GEMMs over four
/// streams spread the experts' tiles over the SMs together, priced as one GEMM over every
/// expert's padded rows; a loop runs each expert's GEMM alone ([`ExpertGemms`]). Each launch
/// is a kernel the host issues. Shared experts see every token; the router is one GEMM to
/// the expert count, in bf16 under fp8 ([`ComputeModel::bf16_linear_s`]). The routed experts
/// split over `etp` of the `tp` ranks: where that is fewer (MoE Parallel Folding, arXiv
/// 2504.14960), each rank routes its own 1 / tp of the tokens to experts of etp / tp of the
/// width, so an expert sees the tokens of `tp / etp` times the ranks at full width.
fn moe_mlp_gemms(
    c: &dyn ComputeModel,
    moe: &Moe,
    t: f64,
    h: f64,
    up: f64,
    (tp, etp, ep): (f64, f64, f64),
    (imbalance, gemms): (f64, ExpertGemms),
) -> (Pass, f64) {
    let e = f64::from(moe.experts);
    let fe = f64::from(moe.expert_ffn_hidden);
    let local_experts = e / ep;
    let per_expert = tokens_per_expert(moe, t, (tp, etp, ep)) * imbalance;
    let grouped = local_experts * grouped_rows(per_expert);
    // (launches per projection, GEMMs priced one after another, rows of each)
    let (launches, serial, rows) = match gemms {
        ExpertGemms::Grouped => (1.0, 1.0, grouped),
        ExpertGemms::PerExpertStreams => (local_experts, 1.0, grouped),
        ExpertGemms::Looped => (local_experts, local_experts, per_expert),
    };
    let (fwd, bwd) = sum(
        c.linear_s(rows, up * fe / etp, h),
        c.linear_s(rows, h, fe / etp),
    );
    let routed = (serial * fwd, serial * bwd);
    let shared = if moe.shared_experts > 0 {
        let fs = fe * f64::from(moe.shared_experts);
        dense_mlp_gemms(c, t, h, fs, up, tp)
    } else {
        (0.0, 0.0)
    };
    (sum(sum(routed, shared), c.bf16_linear_s(t, e, h)), launches)
}

/// Tokens one expert receives on average from a microbatch of `t` tokens a GPU: each rank
/// routes its own t x etp / tp (gathered over the ranks that share its experts) to `top_k`
/// experts, and an expert hears from `ep` ranks.
pub(super) fn tokens_per_expert(moe: &Moe, t: f64, (tp, etp, ep): (f64, f64, f64)) -> f64 {
    t * etp / tp * ep * f64::from(moe.top_k) / f64::from(moe.experts)
}

/// Rows of one expert's share of a grouped GEMM over `tokens` tokens: the tiles of a grouped
/// kernel never span two experts, so each expert's last row block is padded (DeepGEMM's
/// contiguous layout aligns every expert's segment to its 128-row M block,
/// `get_m_alignment_for_contiguous_layout`; CUTLASS grouped GEMMs tile each problem apart).
/// Token counts vary from expert to expert and step to step, so the last block is on average
/// half full; an expert with fewer tokens than a block still computes a whole one.
pub(super) fn grouped_rows(tokens: f64) -> f64 {
    (tokens + GROUPED_M_BLOCK / 2.0).max(GROUPED_M_BLOCK)
}

/// Rows of a grouped GEMM's M block on Hopper and Blackwell (DeepGEMM's `BLOCK_M`, the
/// 128-row tiles of CUTLASS's grouped kernels that `torch._grouped_mm` runs).
const GROUPED_M_BLOCK: f64 = 128.0;

/// The MLP GEMMs torchtitan's per-op checkpointing replays.
#[derive(Clone, Copy)]
enum ReplayedMlp {
    /// An MoE block: grouped expert GEMMs are not counted as matmuls there.
    None,
    /// SwiGLU's w3, of `f` outputs.
    Up(f64),
    /// GeLU's w2, from `f` inputs.
    Down(f64),
}

/// Forward seconds of the GEMMs that torchtitan's per-op selective checkpointing replays.
/// It saves the output of every odd matmul of the layer (wq, wv, w1, then w2 under SwiGLU)
/// and replays the even ones: wk, wo, and w3 (SwiGLU) or w2 (GeLU).
fn op_sac_gemms(
    c: &dyn ComputeModel,
    t: f64,
    (h, q, kv): (f64, f64, f64),
    tp: f64,
    mlp: ReplayedMlp,
) -> f64 {
    c.gemm_s(t, kv / tp, h)
        + c.gemm_s(t, h, q / tp)
        + match mlp {
            ReplayedMlp::None => 0.0,
            ReplayedMlp::Up(f) => c.gemm_s(t, f / tp, h),
            ReplayedMlp::Down(f) => c.gemm_s(t, h, f / tp),
        }
}

/// Forward time of attention without a fused kernel over `t` tokens of `s`-token sequences,
/// `heads` heads of width `d` on this GPU: the scores Q K^T (s x s, k = d) and P V (s x d,
/// k = s), each one batched launch over microbatch x heads whose tiles quantize over the SMs
/// once, and the score matrix through HBM at 11 bytes per score (write, softmax read and
/// write, dropout mask and output, read by the second bmm).
fn unfused_attention_s(c: &dyn ComputeModel, heads: f64, t: f64, s: f64, d: f64) -> f64 {
    c.gemm_s(heads * t, s, d) + c.gemm_s(heads * t, d, s) + c.memory_s(11.0 * heads * t * s)
}

/// The causal attention core of `t` tokens of `s`-token sequences and `q` query features
/// over `tp` ranks: 4·t·s·q/tp FLOPs over the full square, half of it executed by fused
/// kernels, each call over a sequence or, with `cp`-way context parallelism, one ring block.
/// The unfused path computes the full square, and its backward costs twice its forward.
/// Sliding-window layers (`window`: their share and span, [`ModelShape::sliding`]) execute
/// the span in place of s, as fused kernels skip the tiles wholly outside the window
/// (FlashAttention-2's local attention, cuDNN's and Transformer Engine's `window_size`),
/// at the rate of a call that short.
///
/// [`ModelShape::sliding`]: crate::model::ModelShape::sliding
fn fused_attention(
    c: &dyn ComputeModel,
    (t, s): (f64, f64),
    window: Option<(f64, f64)>,
    q: f64,
    (tp, cp): (f64, f64),
    d: f64,
) -> Pass {
    let over = |span: f64| {
        let (flops, block) = (2.0 * t * span * q / tp, (s / cp).min(span));
        (
            c.attention_s(flops, block, d),
            c.attention_bwd_s(flops, block, d),
        )
    };
    let full = over(s);
    match window {
        Some((share, span)) => {
            let slid = over(span);
            (
                (1.0 - share) * full.0 + share * slid.0,
                (1.0 - share) * full.1 + share * slid.1,
            )
        }
        None => full,
    }
}

/// HBM time of one layer's memory-bound kernels over `t` tokens: bytes per hidden element
/// (norms, residuals, rotary; split over TP under sequence parallelism) and per MLP element
/// (the activation; half as much again under a GLU, whose gate is a second input), times
/// `eager` where an eager PyTorch stack runs them unfused with fp32 upcasts.
fn elementwise_s(
    c: &dyn ComputeModel,
    eff: &Efficiency,
    t: f64,
    (h, sp_div): (f64, f64),
    (width, glu, tp): (f64, f64, f64),
    eager: f64,
) -> f64 {
    c.memory_s(
        eager
            * t
            * (eff.elementwise_bytes_per_hidden * h / sp_div
                + eff.elementwise_bytes_per_ffn * width * glu / tp),
    )
}

/// The tensor-parallel collectives of one pass over a layer.
struct TpComm {
    /// Their time.
    time: f64,
    /// The part that is not a reduce-scatter.
    replayed: f64,
    /// Kernels they launch.
    kernels: f64,
}

/// Tensor parallelism's collectives on `act_bytes` of activations over group `g`: two
/// all-reduces per pass (Shoeybi et al. 2019 §3), or with sequence parallelism two
/// reduce-scatter + all-gather pairs of the same volume (Korthikanti et al. 2022 §4.2.2),
/// each gathered element `gather_bytes` wide, and a re-laying copy reading and writing the
/// whole tensor beside each collective where DTensor makes one (`relays`).
fn tp_collectives(
    x: (&dyn CollectiveModel, &dyn ComputeModel),
    g: &GroupSpan,
    act_bytes: f64,
    sequence_parallel: bool,
    (gather_bytes, relays): (f64, bool),
) -> TpComm {
    let (coll, c) = x;
    if !sequence_parallel {
        let all = 2.0 * coll.time_s(Collective::AllReduce, g, act_bytes);
        return TpComm {
            time: all,
            replayed: all,
            kernels: 2.0,
        };
    }
    let relay = |bytes: f64| {
        if relays {
            c.memory_s(2.0 * bytes)
        } else {
            0.0
        }
    };
    let gathered = act_bytes / 2.0 * gather_bytes;
    let gather = coll.time_s(Collective::AllGather, g, gathered) + relay(gathered);
    let scatter = coll.time_s(Collective::ReduceScatter, g, act_bytes) + relay(act_bytes);
    TpComm {
        time: 2.0 * (scatter + gather),
        replayed: 2.0 * gather,
        kernels: 2.0 * sp_scatter_kernels(relays),
    }
}

/// Kernels of sequence parallelism's two reduce-scatters in one pass (its two all-gathers
/// launch as many), with the re-layout copy beside each where DTensor makes one (`relays`).
pub(super) fn sp_scatter_kernels(relays: bool) -> f64 {
    if relays {
        4.0
    } else {
        2.0
    }
}

/// The MoE token exchange of one pass, dispatch and combine: each token's activation
/// (`act_bytes` over `tp`) to each of its `top_k` experts, the busiest rank's share grown by
/// `imbalance`, and `share` of the bytes where a deduplicating dispatcher sends fewer copies
/// across nodes (across nodes the network bounds the exchange, so its share prices it). The
/// dispatch carries `dispatch_width` of the combine's bytes: 1 in bf16, and with block-scaled
/// fp8 one byte an element plus a 4-byte scale per 128 (DeepSeek-V3 §3.3.2 dispatches the
/// expert inputs in fp8 and combines in bf16).
fn ep_all_to_all(
    coll: &dyn CollectiveModel,
    g: &GroupSpan,
    act_bytes: f64,
    (top_k, tp): (f64, f64),
    imbalance: f64,
    (share, dispatch_width): (f64, f64),
) -> f64 {
    let bytes = act_bytes * top_k / tp * imbalance * share;
    coll.time_s(Collective::AllToAll, g, bytes * dispatch_width)
        + coll.time_s(Collective::AllToAll, g, bytes)
}

/// The all-gather dispatcher's exchange of one pass: every rank gathers each EP rank's
/// `rank_bytes` of tokens, routed anywhere or not, and reduce-scatters as many outputs back
/// (Megatron-Core's `MoEAllGatherTokenDispatcher`: `gather_from_sequence_parallel_region`
/// and `reduce_scatter_to_sequence_parallel_region` over its TP x EP group, priced over EP).
/// The bytes grow with the group, not with top-k or the busiest expert's load.
fn ep_all_gather(coll: &dyn CollectiveModel, g: &GroupSpan, rank_bytes: f64) -> f64 {
    let gathered = rank_bytes * f64::from(g.ranks);
    coll.time_s(Collective::AllGather, g, gathered)
        + coll.time_s(Collective::ReduceScatter, g, gathered)
}

/// The expert-TP exchange of one pass where each expert splits over more than one TP rank:
/// the tokens a rank receives (`received_bytes`, its own 1 / tp of the sequence's routed
/// copies) gathered over the `g` ranks that share its experts, and their outputs
/// reduce-scattered back (Megatron-Core's `MoEAlltoAllTokenDispatcher` gathers and scatters
/// over its expert-TP group after and before the all-to-all; the flex dispatcher sends each
/// token to every expert-TP rank instead, `router_topk = tp_size x topk`).
fn expert_tp_exchange(coll: &dyn CollectiveModel, g: &GroupSpan, received_bytes: f64) -> f64 {
    let gathered = received_bytes * f64::from(g.ranks);
    coll.time_s(Collective::AllGather, g, gathered)
        + coll.time_s(Collective::ReduceScatter, g, gathered)
}

/// Bytes of a dispatched element against bf16's under `precision`.
fn dispatch_width(precision: Precision) -> f64 {
    if precision == Precision::Fp8Blockwise {
        (1.0 + 4.0 / 128.0) / 2.0
    } else {
        1.0
    }
}

/// Ring attention's K/V exchange of one forward pass: `cp - 1` sends of the local K and V
/// (`t` tokens of `kv` bf16 features each over `tp`), one per ring step (Liu et al. 2023,
/// Ring Attention §3).
fn cp_exchange(
    coll: &dyn CollectiveModel,
    g: &GroupSpan,
    t: f64,
    kv: f64,
    (tp, cp): (u32, u32),
) -> f64 {
    let kv_bytes = t * 2.0 * kv * 2.0 / f64::from(tp);
    f64::from(cp - 1) * coll.time_s(Collective::SendRecv, g, kv_bytes)
}

/// [`elementwise_s`] of one layer of `x` over `t` tokens.
fn layer_elementwise(x: &Inputs, moe_layer: bool, t: f64) -> f64 {
    let (model, mesh, eff) = (x.model, x.mesh, x.efficiency);
    let (h, tp) = (f64::from(model.hidden), f64::from(mesh.tp));
    let glu = match model.ffn_act {
        FfnAct::Gelu => 1.0,
        FfnAct::Swiglu => 1.5,
    };
    let sp_div = if mesh.sequence_parallel { tp } else { 1.0 };
    // Eager PyTorch stacks run norms, rotary and gating as separate kernels with fp32
    // upcasts, where Megatron-Core's Transformer Engine layer fuses them.
    let eager = if x.training.fused_elementwise {
        1.0
    } else {
        eff.eager_elementwise
    };
    let width = model.mlp_width_per_token(moe_layer);
    let permute = match model.moe.as_ref().filter(|_| moe_layer) {
        Some(moe) => {
            let sort = x.training.moe_dispatch == MoeDispatch::AllToAll
                && mesh.ep > 1
                && moe.experts > mesh.ep;
            x.compute
                .memory_s(permutation_bytes(t / sp_div, h, f64::from(moe.top_k), sort))
        }
        None => 0.0,
    };
    let qk_norm = if model.qk_norm {
        x.compute
            .memory_s(eager * qk_norm_bytes(t, model.q_dim(), model.kv_dim(), tp))
    } else {
        0.0
    };
    elementwise_s(x.compute, eff, t, (h, sp_div), (width, glu, tp), eager) + permute + qk_norm
}

/// HBM bytes of a forward pass of the per-head query and key RMSNorms over `t` tokens: each
/// reads its bf16 input and writes its output, queries `q` and keys `kv` wide split over the
/// `tp` ranks' heads (Megatron-Core builds `q_layernorm` and `k_layernorm` as norm modules
/// of their own, applied to the heads between the QKV projection and the rotary embedding,
/// `attention.py`'s `get_query_key_value_tensors`). Sequence parallelism leaves them whole:
/// the heads are split, not the tokens.
pub(super) fn qk_norm_bytes(t: f64, q: f64, kv: f64, tp: f64) -> f64 {
    2.0 * 2.0 * t * (q + kv) / tp
}

/// HBM bytes the token dispatcher's copies move in one forward pass over `t` tokens of width
/// `h` (bf16) routed to `top_k` experts each: the permutation into expert order reads each
/// token and writes its `top_k` copies, and the unpermutation reads the copies back and writes
/// their weighted sum (Megatron-Core `moe/moe_utils.py`, `permute` and `unpermute`). Where an
/// all-to-all brings copies for several local experts from every rank, each direction also
/// sorts the received chunks by expert, reading and writing every copy once more
/// (`sort_chunks_by_idxs` in `MoEAlltoAllTokenDispatcher`, `moe/token_dispatcher.py`).
/// Their backward moves the gradients through the inverse copies, priced as the other
/// memory-bound kernels' backward.
pub(super) fn permutation_bytes(t: f64, h: f64, top_k: f64, sort: bool) -> f64 {
    let sorted = if sort { 2.0 * top_k } else { 0.0 };
    2.0 * (1.0 + top_k + sorted) * t * h * 2.0
}

/// Forward time and communication of one layer for one microbatch on one GPU.
pub(super) fn layer(x: &Inputs, moe_layer: bool) -> Layer {
    let (model, mesh, c) = (x.model, x.mesh, x.compute);
    let t = tokens_per_microbatch(mesh, x.training.seq_len);
    let h = f64::from(model.hidden);
    let s = f64::from(x.training.seq_len);
    let tp = f64::from(mesh.tp);
    let kv = model.kv_dim();
    let q = model.q_dim();
    let up = model.ffn_act.matrices() - 1.0;
    let f = f64::from(model.ffn_hidden);
    let eff = x.efficiency;
    let mut kernels = LAYER_KERNELS + if model.qk_norm { QK_NORM_KERNELS } else { 0.0 };

    // MLA's GEMMs, and the forward of its up-projections that its recomputation replays.
    let (attn_gemms, mla_up) = match model.mla_projections() {
        Some(projections) => projections.fold(((0.0, 0.0), 0.0), |(pass, up), p| {
            let (outputs, inputs) = p.on_rank(tp);
            let gemm = c.linear_s(t, outputs, inputs);
            (
                sum(pass, gemm),
                if p.from_latent(h) { up + gemm.0 } else { up },
            )
        }),
        None => (attention_gemms(c, t, h, q, kv, tp), 0.0),
    };
    let moe = model.moe.as_ref().filter(|_| moe_layer);
    let op_sac_gemm = if mesh.recompute.per_op(x.training.framework) {
        let mlp = match (moe, model.ffn_act) {
            (Some(_), _) => ReplayedMlp::None,
            (None, FfnAct::Swiglu) => ReplayedMlp::Up(f),
            (None, FfnAct::Gelu) => ReplayedMlp::Down(f),
        };
        op_sac_gemms(c, t, (h, q, kv), tp, mlp)
    } else {
        0.0
    };
    let mlp_gemms = match moe {
        Some(moe) => {
            let (ep, etp) = (f64::from(mesh.ep), f64::from(mesh.etp()));
            let (gemms, launches) = moe_mlp_gemms(
                c,
                moe,
                t,
                h,
                up,
                (tp, etp, ep),
                (moe.load(eff.moe_imbalance), x.training.expert_gemms),
            );
            kernels += MOE_KERNELS + 2.0 * launches;
            gemms
        }
        None => dense_mlp_gemms(c, t, h, f, up, tp),
    };
    let (attention, attention_bwd) = if x.training.flash_attention {
        // Scores over q_dim features, values over v_dim: their mean prices both.
        let qv = (q + model.v_dim()) / 2.0;
        let window = model.sliding(s);
        fused_attention(
            c,
            (t, s),
            window,
            qv,
            (tp, f64::from(mesh.cp)),
            model.head_dim(),
        )
    } else {
        kernels += UNFUSED_ATTENTION_KERNELS - 1.0;
        let fwd = unfused_attention_s(c, f64::from(model.heads) / tp, t, s, model.head_dim());
        (fwd, 2.0 * fwd)
    };
    let elementwise = layer_elementwise(x, moe_layer, t);

    let act_bytes = t * h * 2.0;
    // A token dispatcher hands the routed experts their tokens itself
    // ([`expert_tp_exchange`]): the MLP's collectives over the whole sequence stay for shared
    // experts alone. (Megatron-Core trains MoE under TP only with sequence parallelism,
    // `MoELayer.forward`; without it the layer is priced alike.)
    let dispatched =
        moe.filter(|_| mesh.tp > 1 && x.training.moe_dispatch != MoeDispatch::AllGather);
    let (tp_comm, tp_replayed) = if mesh.tp > 1 {
        let training = x.training;
        let gather = (training.tp_gather_bytes(), training.sp_relayout_copies());
        let comm = tp_collectives(
            (x.collectives, c),
            &x.placement.tp,
            act_bytes,
            mesh.sequence_parallel,
            gather,
        );
        let halves = match dispatched {
            Some(moe) if moe.shared_experts == 0 => 0.5,
            _ => 1.0,
        };
        kernels += comm.kernels * halves;
        (comm.time * halves, comm.replayed * halves)
    } else {
        (0.0, 0.0)
    };
    let etp_exchange = match dispatched {
        Some(moe) if mesh.etp() > 1 => {
            kernels += 2.0;
            expert_tp_exchange(
                x.collectives,
                &x.placement.expert_tp,
                act_bytes / tp * f64::from(moe.top_k) * moe.load(eff.moe_imbalance),
            )
        }
        _ => 0.0,
    };
    let a2a = etp_exchange
        + match moe {
            Some(moe) if mesh.ep > 1 => {
                kernels += 2.0;
                let ep = &x.placement.ep;
                let (experts, top_k) = (f64::from(moe.experts), f64::from(moe.top_k));
                if x.training.moe_dispatch == MoeDispatch::AllGather {
                    ep_all_gather(x.collectives, ep, act_bytes / tp)
                } else {
                    let nodes = f64::from(ep.nodes);
                    let share = x.training.moe_dispatch.network_share(
                        experts,
                        top_k,
                        nodes,
                        moe.node_limit(nodes),
                    );
                    ep_all_to_all(
                        x.collectives,
                        ep,
                        act_bytes,
                        (top_k, tp),
                        moe.load(eff.moe_imbalance),
                        (share, dispatch_width(x.training.precision)),
                    )
                }
            }
            _ => 0.0,
        };
    let cp = if mesh.cp > 1 {
        kernels += f64::from(mesh.cp - 1);
        cp_exchange(x.collectives, &x.placement.cp, t, kv, (mesh.tp, mesh.cp))
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
        mla_up,
    }
}

impl MoeDispatch {
    /// Network bytes against the all-to-all's for an EP group over `nodes` nodes: the remote
    /// nodes a token's `top_k` of `experts` (spread evenly) land on, against its remote
    /// copies. Uniform routing: a given other node is missed with probability
    /// C(E - E/N, k) / C(E, k). Node-limited routing reaches at most `node_limit` nodes, the
    /// token's own among them with probability limit / N.
    pub fn network_share(
        self,
        experts: f64,
        top_k: f64,
        nodes: f64,
        node_limit: Option<f64>,
    ) -> f64 {
        if self != MoeDispatch::NodeDedup || nodes <= 1.0 {
            return 1.0;
        }
        let elsewhere = experts - experts / nodes;
        let missed: f64 = (0..top_k as u32)
            .map(|i| ((elsewhere - f64::from(i)) / (experts - f64::from(i))).max(0.0))
            .product();
        let uniform = (nodes - 1.0) * (1.0 - missed);
        let remote_nodes = node_limit.map_or(uniform, |limit| {
            let limit = limit.min(nodes);
            uniform.min(limit * (nodes - 1.0) / nodes)
        });
        let remote_copies = top_k * (nodes - 1.0) / nodes;
        (remote_nodes / remote_copies).min(1.0)
    }
}

impl Training {
    /// Bytes an element of a sequence-parallel all-gather takes. torchtitan's tensorwise fp8
    /// plan (`Float8ColwiseParallel`, `Float8RowwiseParallel`, `PrepareFloat8ModuleInput` in
    /// torchao's `float8_tensor_parallel.py`) casts before the gather, forward and backward;
    /// rowwise recipes gather in bf16 ("float8 all-gather with TP is only supported for
    /// tensorwise", torchtitan 820504e `parallelize_llama.py`). Reduce-scatters stay in bf16.
    pub fn tp_gather_bytes(&self) -> f64 {
        if self.framework.defaults().fp8_tp_gather && self.precision == crate::mesh::Precision::Fp8
        {
            1.0
        } else {
            2.0
        }
    }
}

#[cfg(test)]
mod tests;
