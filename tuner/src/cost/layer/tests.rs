use super::*;
use crate::catalog::{self, NOMINAL};
use crate::cost::compute::NominalCompute;
use crate::cost::mocks::{PerCall, PerWireByte, PER_FLOP};
use crate::mesh::{FlashKernel, Precision};
use crate::placement::LinkClass;

fn close(a: f64, b: f64) {
    assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
}

fn group(ranks: u32) -> GroupSpan {
    GroupSpan {
        ranks,
        members_per_node: ranks,
        nodes: 1,
        link: LinkClass::Nvlink,
    }
}

#[test]
fn attention_gemms_are_the_qkv_and_output_projections() {
    // Llama 3 8B at TP 2 over 8,192 tokens: QKV 4,096 -> (4,096 + 2 x 1,024) / 2 = 3,072 and
    // output 2,048 -> 4,096, 2 x 8,192 x 4,096 x (3,072 + 2,048) FLOPs = 343.6 GFLOP forward,
    // twice that backward, at 1 PFLOP/s.
    let (fwd, bwd) = attention_gemms(&PER_FLOP, 8192.0, 4096.0, 4096.0, 1024.0, 2.0);
    close(fwd, 2.0 * 8192.0 * 4096.0 * 5120.0 * 1e-15);
    close(bwd, 2.0 * fwd);
}

#[test]
fn a_swiglu_mlp_has_two_up_projections_and_one_down() {
    // Llama 3 8B: 3 x 4,096 x 14,336 weights, 2 FLOPs each per token, over TP 4.
    let (fwd, _) = dense_mlp_gemms(&PER_FLOP, 1000.0, 4096.0, 14336.0, 2.0, 4.0);
    close(fwd, 2.0 * 1000.0 * 3.0 * 4096.0 * 14336.0 / 4.0 * 1e-15);
}

#[test]
fn grouped_expert_gemms_launch_once_and_the_others_once_per_expert() {
    // Mixtral 8x7B at EP 8 over 4,096 tokens, imbalance 1: each GPU holds one expert, which
    // receives 4,096 x 8 x 2 / 8 = 8,192 tokens, computed as 8,192 + 64 rows in a grouped
    // GEMM (its last 128-row block half full on average); 3 x 4,096 x 14,336 weights; and the
    // router 4,096 -> 8.
    let moe = catalog::model("mixtral-8x7b").unwrap().shape.moe.unwrap();
    let expert = 2.0 * 8256.0 * 3.0 * 4096.0 * 14336.0 * 1e-15;
    let router = 2.0 * 4096.0 * 8.0 * 4096.0 * 1e-15;
    // 4,096 tokens of width 4,096 through SwiGLU's two up projections, at TP 1.
    let gemms = |ep, how| {
        let t = 4096.0;
        moe_mlp_gemms(&PER_FLOP, &moe, t, 4096.0, 2.0, (1.0, 1.0, ep), (1.0, how))
    };
    let ((fwd, bwd), launches) = gemms(8.0, ExpertGemms::Grouped);
    close(fwd, expert + router);
    close(bwd, 2.0 * fwd);
    assert_eq!(launches, 1.0);
    // At EP 2, four experts a GPU of 2,048 tokens each: one launch of 4 x 2,112 rows, or four
    // launches of 2,048, each quantized by its own GEMM (which one rate per FLOP does not
    // price): 8,448 / 8,192 the time. Transformer Engine's four streams launch four GEMMs
    // whose tiles run together, as the grouped launch's do.
    let grouped = gemms(2.0, ExpertGemms::Grouped);
    let streams = gemms(2.0, ExpertGemms::PerExpertStreams);
    let looped = gemms(2.0, ExpertGemms::Looped);
    assert_eq!((grouped.1, streams.1, looped.1), (1.0, 4.0, 4.0));
    let experts = |p: ((f64, f64), f64)| p.0 .0 - router;
    close(experts(grouped) / experts(looped), 8448.0 / 8192.0);
    close(experts(streams), experts(grouped));
}

#[test]
fn folded_experts_take_their_own_tokens_at_full_width() {
    // Mixtral 8x7B at TP 2 over 8,192 tokens a microbatch, on 8 GPUs. Split as the dense
    // weights (ETP 2) at EP 4, each TP pair gathers the 8,192 tokens and each GPU holds half
    // of 2 experts that see 8,192 x 4 x 2 / 8 = 8,192 tokens each: 2 x 8,256 rows at half
    // the width. Folded (ETP 1) at EP 8, each GPU routes its own 4,096 tokens to 1 whole
    // expert that sees 4,096 x 8 x 2 / 8 = 8,192: 8,256 rows at full width. The same FLOPs a
    // GPU, in GEMMs of another shape.
    let moe = catalog::model("mixtral-8x7b").unwrap().shape.moe.unwrap();
    let router = 2.0 * 8192.0 * 8.0 * 4096.0 * 1e-15;
    let experts = |etp, ep| {
        let ((fwd, _), _) = moe_mlp_gemms(
            &PER_FLOP,
            &moe,
            8192.0,
            4096.0,
            2.0,
            (2.0, etp, ep),
            (1.0, ExpertGemms::Grouped),
        );
        fwd - router
    };
    let full = 2.0 * 8256.0 * 3.0 * 4096.0 * 14336.0 * 1e-15;
    close(experts(1.0, 8.0), full);
    close(experts(2.0, 4.0), full);
}

#[test]
fn an_expert_with_few_tokens_still_computes_a_whole_row_block() {
    // DeepSeek-V3 at EP 64 with one 4,096-token sequence a GPU: 4,096 x 8 x 64 / 256 = 8,192
    // tokens an expert, 0.8% padding; at 16 tokens an expert, a whole 128-row block.
    close(grouped_rows(8192.0), 8256.0);
    close(grouped_rows(16.0), 128.0);
    close(grouped_rows(100.0), 164.0);
}

#[test]
fn the_dispatcher_copies_each_token_top_k_times_each_way() {
    // Qwen3-30B-A3B (h 2,048, top-8) over 4,096 tokens: permute reads 4,096 tokens and
    // writes 32,768 copies, unpermute reads them back and writes 4,096: 2 x 9 x 4,096 x
    // 2,048 x 2 bytes = 302 MB a forward pass. Sorting the all-to-all's chunks by local
    // expert reads and writes every copy once more each way: 2 x 25 x ... = 839 MB.
    close(permutation_bytes(4096.0, 2048.0, 8.0, false), 301_989_888.0);
    close(permutation_bytes(4096.0, 2048.0, 8.0, true), 838_860_800.0);
}

#[test]
fn per_op_checkpointing_replays_wk_wo_and_the_even_mlp_matmul() {
    let (t, h, q, kv, f) = (1.0, 4096.0, 4096.0, 1024.0, 14336.0);
    let attention = 2.0 * (kv * h + h * q) * 1e-15;
    close(
        op_sac_gemms(&PER_FLOP, t, (h, q, kv), 1.0, ReplayedMlp::None),
        attention,
    );
    close(
        op_sac_gemms(&PER_FLOP, t, (h, q, kv), 1.0, ReplayedMlp::Up(f)),
        attention + 2.0 * f * h * 1e-15,
    );
}

#[test]
fn fused_attention_executes_half_the_causal_square() {
    // 8,192 tokens of 8,192-token sequences, 4,096 query features: 2 x 8,192^2 x 4,096 FLOPs
    // forward (half of 4 t s q), the backward 2.5 times it.
    let (fwd, bwd) = fused_attention(&PER_FLOP, (8192.0, 8192.0), None, 4096.0, (1.0, 1.0), 128.0);
    close(fwd, 2.0 * 8192.0 * 8192.0 * 4096.0 * 1e-15);
    close(bwd, crate::catalog::kernels::FLASH_BACKWARD * fwd);
}

#[test]
fn sliding_layers_execute_their_window_not_the_square() {
    // GPT-OSS (Hugging Face config.json): a 128-position window on every other layer, 64
    // query heads of 64. At 4,096 tokens a query sees 128 - 128 x 127 / 8,192 = 126.02
    // positions on average (Megatron-Bridge's calculate_swa_context), a span of 252.03 in
    // place of 4,096: the mean layer executes (4,096 + 252.03) / 2 of it.
    let mut m = crate::model::tests::gpt(36, 2880, 64, 4096);
    m.head_dim = Some(64);
    m.sliding_window = Some(128);
    m.layer_types = Some(
        (0..36)
            .map(|i| match i % 2 {
                0 => crate::model::AttentionType::SlidingAttention,
                _ => crate::model::AttentionType::FullAttention,
            })
            .collect(),
    );
    m.validate().unwrap();
    let window = m.sliding(4096.0);
    let (share, span) = window.unwrap();
    close(share, 0.5);
    close(span, 252.03125);
    let (fwd, _) = fused_attention(
        &PER_FLOP,
        (4096.0, 4096.0),
        window,
        4096.0,
        (1.0, 1.0),
        64.0,
    );
    close(
        fwd,
        2.0 * 4096.0 * (4096.0 + 252.03125) / 2.0 * 4096.0 * 1e-15,
    );
    // A window as long as the sequence does not bind.
    m.sliding_window = Some(4096);
    assert_eq!(m.sliding(4096.0), None);
    // Short calls run below the plateau: the window's tiles cost more a FLOP than the square's.
    let gpu = catalog::gpu("h100-sxm").unwrap();
    let c = NominalCompute::new(gpu, Precision::Bf16, FlashKernel::Newest, &NOMINAL);
    let square = fused_attention(&c, (4096.0, 4096.0), None, 4096.0, (1.0, 1.0), 64.0).0;
    let slid = fused_attention(
        &c,
        (4096.0, 4096.0),
        Some((1.0, 252.03125)),
        4096.0,
        (1.0, 1.0),
        64.0,
    )
    .0;
    assert!(
        slid / square > 252.03125 / 4096.0 && slid < square,
        "{slid} vs {square}"
    );
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
fn elementwise_bytes_split_over_tp_where_they_are_sharded() {
    // 1,000 tokens of Llama 3 8B at TP 4 with sequence parallelism, SwiGLU, fused: 43 bytes
    // per hidden element over 4, 16 per MLP element x 1.5 over 4, at 1 TB/s.
    let e = NOMINAL;
    let t = elementwise_s(
        &PER_FLOP,
        &e,
        1000.0,
        (4096.0, 4.0),
        (14336.0, 1.5, 4.0),
        1.0,
    );
    let bytes = 1000.0 * (43.0 * 4096.0 / 4.0 + 16.0 * 14336.0 * 1.5 / 4.0);
    close(t, bytes * 1e-12);
    let eager = elementwise_s(
        &PER_FLOP,
        &e,
        1000.0,
        (4096.0, 4.0),
        (14336.0, 1.5, 4.0),
        2.0,
    );
    close(eager, 2.0 * t);
}

#[test]
fn tp_moves_the_activation_four_times_a_pass_either_way() {
    // 2 x 100 MB all-reduces over 8 ranks (2 x 7/8 on the wire each), or 2 reduce-scatters
    // and 2 all-gathers (7/8 each): the same wire bytes, 350 MB at 1 GB/s.
    let g = group(8);
    let plain = tp_collectives((&PerWireByte, &PER_FLOP), &g, 1e8, false, (2.0, false));
    let sp = tp_collectives((&PerWireByte, &PER_FLOP), &g, 1e8, true, (2.0, false));
    close(plain.time, 0.35);
    close(sp.time, 0.35);
    assert_eq!((plain.kernels, sp.kernels), (2.0, 4.0));
    // Per-op checkpointing replays the all-reduces whole, but only the gathers under SP.
    close(plain.replayed, plain.time);
    close(sp.replayed, sp.time / 2.0);
    // fp8 gathers move half the gathered bytes; DTensor's copies add 2 bytes read and
    // written per byte of each collective at 1 TB/s, and four kernels.
    let fp8 = tp_collectives((&PerWireByte, &PER_FLOP), &g, 1e8, true, (1.0, false));
    close(fp8.time, 0.35 - 2.0 * 0.5e8 * 7.0 / 8.0 / 1e9);
    let relaid = tp_collectives((&PerWireByte, &PER_FLOP), &g, 1e8, true, (2.0, true));
    close(
        relaid.time - sp.time,
        2.0 * 2.0 * (1e8 + 1e8 / 2.0 * 2.0) * 1e-12,
    );
    assert_eq!(relaid.kernels, 8.0);
}

#[test]
fn the_token_exchange_is_dispatch_and_combine() {
    // 2 calls a pass; 1 MB of activations, top 2 over TP 2: 1 MB a call.
    let t = ep_all_to_all(&PerCall(1.0), &group(8), 1e6, (2.0, 2.0), 1.0, (1.0, 1.0));
    assert_eq!(t, 2.0);
    let t = ep_all_to_all(&PerWireByte, &group(2), 1e6, (2.0, 2.0), 1.2, (0.5, 1.0));
    close(t, 2.0 * 1e6 * 2.0 / 2.0 * 1.2 * 0.5 * 0.5 / 1e9);
    // Block-scaled fp8 dispatches 1 + 4/128 bytes an element and combines 2: 3.03125 of 4.
    let fp8 = ep_all_to_all(
        &PerWireByte,
        &group(2),
        1e6,
        (2.0, 2.0),
        1.2,
        (0.5, dispatch_width(Precision::Fp8Blockwise)),
    );
    close(fp8 / t, 3.03125 / 4.0);
    assert_eq!(dispatch_width(Precision::Fp8), 1.0);
}

#[test]
fn the_all_gather_dispatcher_moves_every_token_of_the_group_both_ways() {
    // EP 8, 1 MB of tokens a rank: each gathers 8 MB and sends 7/8 of it over the wire, and
    // the reduce-scatter back as much: 14 MB at 1 GB/s.
    let t = ep_all_gather(&PerWireByte, &group(8), 1e6);
    close(t, 2.0 * 8e6 * 7.0 / 8.0 / 1e9);
    // Against the all-to-all of the same tokens at top 2 (balanced): EP / top-k = 4 times
    // the bytes, whatever the load of the busiest expert.
    let a2a = ep_all_to_all(&PerWireByte, &group(8), 1e6, (2.0, 1.0), 1.0, (1.0, 1.0));
    close(t / a2a, 4.0);
    assert_eq!(
        MoeDispatch::AllGather.network_share(8.0, 2.0, 4.0, None),
        1.0
    );
}

#[test]
fn ring_attention_sends_its_kv_once_per_other_rank() {
    // CP 4: 3 sends of 1,000 tokens x 1,024 K and V features in bf16 over TP 2.
    let t = cp_exchange(&PerWireByte, &group(4), 1000.0, 1024.0, (2, 4));
    close(t, 3.0 * 1000.0 * 2.0 * 1024.0 * 2.0 / 2.0 / 1e9);
}

#[test]
fn a_deduplicating_dispatcher_sends_a_token_once_per_remote_node() {
    let dedup = |e, k, n| MoeDispatch::NodeDedup.network_share(e, k, n, None);
    // Mixtral (8 experts, top 2) over two nodes: the other node holds 4 experts and is
    // missed with probability C(4,2)/C(8,2) = 6/28, against one remote copy on average.
    assert!((dedup(8.0, 2.0, 2.0) - 22.0 / 28.0).abs() < 1e-12);
    // Qwen3-30B-A3B (128 experts, top 8) over two nodes: the other node is hit 99.7% of the
    // time, against 4 remote copies: a quarter of the all-to-all's network bytes.
    assert!((dedup(128.0, 8.0, 2.0) - 0.249226).abs() < 1e-6);
    // Inside one node, and for NCCL's all-to-all, nothing changes.
    assert_eq!(dedup(128.0, 8.0, 1.0), 1.0);
    assert_eq!(
        MoeDispatch::AllToAll.network_share(128.0, 8.0, 2.0, None),
        1.0
    );
}

#[test]
fn node_limited_routing_bounds_the_nodes_a_token_reaches() {
    // DeepSeek-V3 (256 experts, top 8, 8 groups, 4 picked) over EP 64 on 8 nodes: uniform
    // routing reaches 7 x (1 - C(224,8)/C(256,8)) = 4.63 other nodes; at most 4 nodes of 8
    // leaves 4 x 7/8 = 3.5 of them, against 8 x 7/8 = 7 remote copies: half the bytes.
    let limit = Moe {
        experts: 256,
        top_k: 8,
        shared_experts: 1,
        expert_ffn_hidden: 2048,
        dense_layers: 3,
        n_group: Some(8),
        topk_group: Some(4),
        capacity_factor: None,
        pad_to_capacity: false,
    }
    .node_limit(8.0);
    assert_eq!(limit, Some(4.0));
    let limited = MoeDispatch::NodeDedup.network_share(256.0, 8.0, 8.0, limit);
    assert!((limited - 0.5).abs() < 1e-12, "{limited}");
    let uniform = MoeDispatch::NodeDedup.network_share(256.0, 8.0, 8.0, None);
    assert!((uniform - 4.6328 / 7.0).abs() < 1e-4, "{uniform}");
}

#[test]
fn experts_split_over_tp_gather_what_each_rank_receives() {
    // DeepSeek-V3 (h 7,168, top 8) at TP 2 over a 4,096-token microbatch: a rank receives
    // its 2,048 tokens' 8 routed copies, 16,384 x 7,168 x 2 bytes, and the pair gathers
    // 469.8 MB, then reduce-scatters as much back; each moves (2 - 1) / 2 of it on the wire.
    let received = 4096.0 * 7168.0 * 2.0 / 2.0 * 8.0;
    let t = expert_tp_exchange(&PerWireByte, &group(2), received);
    close(received * 2.0, 469_762_048.0);
    close(t, 2.0 * 469_762_048.0 / 2.0 / 1e9);
}
