//! Published model shapes. Each entry names the paper or config it is copied from.

use crate::model::{AttentionType, FfnAct, Mla, ModelShape, Moe};

/// A catalog model with its source.
pub struct CatalogModel {
    /// The shape.
    pub shape: fn() -> ModelShape,
    /// What else defines the model, from the same source.
    pub arch: Architecture,
    /// Where the shape is published.
    pub source: &'static str,
}

/// What defines a model beyond the shape the cost model prices: a launch config must set it,
/// or the framework trains another model of the same size (Megatron-LM's defaults are GPT's:
/// rotary base 10000, dropout 0.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Architecture {
    /// Rotary base (theta); `None` for learned absolute positions.
    pub rotary_base: Option<u32>,
    /// Llama 3.1's rotary frequency scaling (factor 8), which its config.json sets.
    pub llama31_rope_scaling: bool,
    /// Epsilon of every norm.
    pub norm_eps: f64,
    /// Dropout on attention probabilities and on hidden states.
    pub dropout: f64,
    /// torchtitan's model name (v0.2's `[model] name`, 0.3's `--module`) and flavor of this
    /// shape, where it ships one.
    pub torchtitan: Option<(&'static str, &'static str)>,
    /// A bias on every linear layer, the QKV projection's included (GPT-OSS's
    /// `attention_bias` and expert biases); the SwiGLU families have none.
    pub linear_biases: bool,
    /// A learnable per-head logit that each softmax row also normalises over (GPT-OSS's
    /// attention sinks, Megatron-Core's `softmax_type = "learnable"`).
    pub attention_sinks: bool,
    /// YaRN's rotary frequency scaling, where the model's `rope_scaling` sets it.
    pub yarn: Option<Yarn>,
    /// A gated MLP of QuickGELU, x·σ(1.702x), whose inputs are clamped and whose linear half
    /// is offset, in place of SwiGLU (GPT-OSS's `swiglu_limit` and its `+ 1`).
    pub quick_geglu: Option<QuickGeglu>,
}

/// YaRN (Peng et al. 2023, arXiv 2309.00071) as `config.json`'s `rope_scaling` sets it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// Context extension factor.
    pub factor: f64,
    /// Context length the rotary frequencies were trained at.
    pub original_positions: u32,
    /// The frequency ramp's bounds, in rotations over the original context.
    pub beta_fast: f64,
    /// See `beta_fast`.
    pub beta_slow: f64,
    /// Whether the ramp's ends are rounded to whole dimensions (`truncate`).
    pub round_to_int: bool,
}

/// GPT-OSS's gated activation: the gate clamped above at `clamp`, the linear half to
/// [-clamp, clamp] and offset by `linear_offset`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuickGeglu {
    /// Clamp of both halves.
    pub clamp: f64,
    /// Added to the linear half.
    pub linear_offset: f64,
}

/// The Llama family and its descendants: RMSNorm at 1e-5, no dropout.
const fn llama(rotary_base: u32, torchtitan: Option<(&'static str, &'static str)>) -> Architecture {
    Architecture {
        rotary_base: Some(rotary_base),
        llama31_rope_scaling: false,
        norm_eps: 1e-5,
        dropout: 0.0,
        torchtitan,
        linear_biases: false,
        attention_sinks: false,
        yarn: None,
        quick_geglu: None,
    }
}

/// The Qwen3 family (Qwen/Qwen3-*/config.json): RMSNorm at 1e-6, rotary base 1,000,000, no
/// dropout; every layer normalises its query and key heads.
const fn qwen3(torchtitan: Option<(&'static str, &'static str)>) -> Architecture {
    Architecture {
        norm_eps: 1e-6,
        ..llama(1_000_000, torchtitan)
    }
}

/// A Qwen3 MoE model: every layer an MoE layer of 128 experts, top 8, no shared expert, heads
/// 128 wide, 4 KV heads, untied 151,936-token vocabulary, 4,096-token pre-training sequences
/// (Qwen3 technical report, arXiv 2505.09388 §3.2, the general stage), per-head query and key
/// norms.
fn qwen3_moe(name: &str, layers: u32, hidden: u32, heads: u32, expert_ffn: u32) -> ModelShape {
    ModelShape {
        head_dim: Some(128),
        qk_norm: true,
        moe: Some(Moe {
            experts: 128,
            top_k: 8,
            shared_experts: 0,
            expert_ffn_hidden: expert_ffn,
            dense_layers: 0,
            n_group: None,
            topk_group: None,
            capacity_factor: None,
            pad_to_capacity: false,
        }),
        ..dense(
            name,
            layers,
            hidden,
            heads,
            4,
            3 * hidden,
            FfnAct::Swiglu,
            151_936,
            4096,
            false,
        )
    }
}

/// GPT-OSS (openai/gpt-oss-*/config.json): RMSNorm at 1e-5, rotary base 150,000 with YaRN
/// (factor 32 over 4,096 positions, betas 32 and 1, `truncate: false`), biases on every
/// linear, attention sinks, and QuickGELU gating clamped at 7 with the linear half offset by
/// 1 (`swiglu_limit`; Megatron-Bridge's `gpt_oss_bridge.py` sets the same).
const fn gpt_oss_arch(torchtitan: Option<(&'static str, &'static str)>) -> Architecture {
    Architecture {
        linear_biases: true,
        attention_sinks: true,
        yarn: Some(Yarn {
            factor: 32.0,
            original_positions: 4096,
            beta_fast: 32.0,
            beta_slow: 1.0,
            round_to_int: false,
        }),
        quick_geglu: Some(QuickGeglu {
            clamp: 7.0,
            linear_offset: 1.0,
        }),
        ..llama(150_000, torchtitan)
    }
}

/// A GPT-OSS model: hidden 2880, 64 query heads of 64 and 8 KV heads, experts of width 2880,
/// top 4, untied 201,088-token vocabulary, a 128-position window on every other layer from
/// the first, 4,096-token sequences (the context YaRN extends).
fn gpt_oss(name: &str, layers: u32, experts: u32) -> ModelShape {
    ModelShape {
        head_dim: Some(64),
        moe: Some(Moe {
            experts,
            top_k: 4,
            shared_experts: 0,
            expert_ffn_hidden: 2880,
            dense_layers: 0,
            n_group: None,
            topk_group: None,
            capacity_factor: None,
            pad_to_capacity: false,
        }),
        sliding_window: Some(128),
        layer_types: Some(
            (0..layers)
                .map(|i| {
                    if i % 2 == 0 {
                        AttentionType::SlidingAttention
                    } else {
                        AttentionType::FullAttention
                    }
                })
                .collect(),
        ),
        ..dense(
            name,
            layers,
            2880,
            64,
            8,
            2880,
            FfnAct::Swiglu,
            201_088,
            4096,
            false,
        )
    }
}

/// Short names users type, and the catalog id each one means.
pub const ALIASES: &[(&str, &str)] = &[
    ("7b", "llama2-7b"),
    ("13b", "llama2-13b"),
    ("8b", "llama3-8b"),
    ("70b", "llama3-70b"),
    ("405b", "llama3-405b"),
    ("175b", "gpt3-175b"),
    ("8x7b", "mixtral-8x7b"),
    ("8x22b", "mixtral-8x22b"),
    ("671b", "deepseek-v3"),
    ("30b-a3b", "qwen3-30b-a3b"),
    ("235b-a22b", "qwen3-235b-a22b"),
];

#[allow(clippy::too_many_arguments)]
fn dense(
    name: &str,
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    ffn: u32,
    act: FfnAct,
    vocab: u32,
    seq: u32,
    tied: bool,
) -> ModelShape {
    ModelShape {
        name: name.to_string(),
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim: None,
        ffn_hidden: ffn,
        ffn_act: act,
        vocab,
        seq_len: seq,
        tied_embeddings: tied,
        moe: None,
        mla: None,
        mtp_layers: 0,
        sliding_window: None,
        layer_types: None,
        qk_norm: false,
    }
}

/// Every catalog model.
pub const MODELS: &[(&str, CatalogModel)] = &[
    ("gpt3-175b", CatalogModel {
        shape: || dense("gpt3-175b", 96, 12288, 96, 96, 49152, FfnAct::Gelu, 50257, 2048, true),
        arch: Architecture { rotary_base: None, llama31_rope_scaling: false, norm_eps: 1e-5, dropout: 0.1, torchtitan: None, linear_biases: true, attention_sinks: false, yarn: None, quick_geglu: None },
        source: "Brown et al. 2020 (arXiv 2005.14165) Table 2.1; vocabulary of the GPT-2 BPE",
    }),
    ("llama2-7b", CatalogModel {
        shape: || dense("llama2-7b", 32, 4096, 32, 32, 11008, FfnAct::Swiglu, 32000, 4096, false),
        arch: llama(10_000, None),
        source: "Touvron et al. 2023 (arXiv 2307.09288) Table 1; meta-llama/Llama-2-7b-hf config.json",
    }),
    ("llama2-13b", CatalogModel {
        shape: || dense("llama2-13b", 40, 5120, 40, 40, 13824, FfnAct::Swiglu, 32000, 4096, false),
        arch: llama(10_000, None),
        source: "Touvron et al. 2023 (arXiv 2307.09288) Table 1; meta-llama/Llama-2-13b-hf config.json",
    }),
    ("llama2-70b", CatalogModel {
        shape: || dense("llama2-70b", 80, 8192, 64, 8, 28672, FfnAct::Swiglu, 32000, 4096, false),
        arch: llama(10_000, None),
        source: "Touvron et al. 2023 (arXiv 2307.09288) Table 1 (GQA); meta-llama/Llama-2-70b-hf config.json",
    }),
    ("llama3-8b", CatalogModel {
        shape: || dense("llama3-8b", 32, 4096, 32, 8, 14336, FfnAct::Swiglu, 128256, 8192, false),
        arch: llama(500_000, Some(("llama3", "8B"))),
        source: "Llama 3 herd paper (arXiv 2407.21783) Table 3; meta-llama/Meta-Llama-3-8B config.json",
    }),
    ("llama3-70b", CatalogModel {
        shape: || dense("llama3-70b", 80, 8192, 64, 8, 28672, FfnAct::Swiglu, 128256, 8192, false),
        arch: llama(500_000, Some(("llama3", "70B"))),
        source: "Llama 3 herd paper (arXiv 2407.21783) Table 3; meta-llama/Meta-Llama-3-70B config.json",
    }),
    ("llama3-405b", CatalogModel {
        shape: || dense("llama3-405b", 126, 16384, 128, 8, 53248, FfnAct::Swiglu, 128256, 8192, false),
        arch: Architecture { llama31_rope_scaling: true, ..llama(500_000, Some(("llama3", "405B"))) },
        source: "Llama 3 herd paper (arXiv 2407.21783) Table 3; meta-llama/Llama-3.1-405B config.json",
    }),
    ("mixtral-8x7b", CatalogModel {
        shape: || ModelShape {
            moe: Some(Moe { experts: 8, top_k: 2, shared_experts: 0, expert_ffn_hidden: 14336, dense_layers: 0, n_group: None, topk_group: None, capacity_factor: None, pad_to_capacity: false }),
            ..dense("mixtral-8x7b", 32, 4096, 32, 8, 14336, FfnAct::Swiglu, 32000, 32768, false)
        },
        arch: llama(1_000_000, None),
        source: "Jiang et al. 2024 (arXiv 2401.04088) Table 1; mistralai/Mixtral-8x7B-v0.1 config.json",
    }),
    ("mixtral-8x22b", CatalogModel {
        shape: || ModelShape {
            moe: Some(Moe { experts: 8, top_k: 2, shared_experts: 0, expert_ffn_hidden: 16384, dense_layers: 0, n_group: None, topk_group: None, capacity_factor: None, pad_to_capacity: false }),
            ..dense("mixtral-8x22b", 56, 6144, 48, 8, 16384, FfnAct::Swiglu, 32768, 65536, false)
        },
        arch: llama(1_000_000, None),
        source: "mistralai/Mixtral-8x22B-v0.1 config.json",
    }),
    ("deepseek-v3", CatalogModel {
        // MLA as config.json sets it (q_lora_rank 1536, kv_lora_rank 512, heads of 128 + 64
        // rotary, values of 128) and its one multi-token-prediction module
        // (num_nextn_predict_layers = 1).
        shape: || ModelShape {
            moe: Some(Moe { experts: 256, top_k: 8, shared_experts: 1, expert_ffn_hidden: 2048, dense_layers: 3, n_group: Some(8), topk_group: Some(4), capacity_factor: None, pad_to_capacity: false }),
            mla: Some(Mla { q_lora_rank: Some(1536), kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 }),
            mtp_layers: 1,
            ..dense("deepseek-v3", 61, 7168, 128, 128, 18432, FfnAct::Swiglu, 129280, 4096, false)
        },
        arch: Architecture { norm_eps: 1e-6, ..llama(10_000, Some(("deepseek_v3", "671B"))) },
        source: "DeepSeek-V3 technical report (arXiv 2412.19437) §2.1, §4.2; deepseek-ai/DeepSeek-V3 config.json",
    }),
    ("qwen3-30b-a3b", CatalogModel {
        shape: || qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 768),
        arch: qwen3(Some(("qwen3", "30B-A3B"))),
        source: "Qwen3 technical report (arXiv 2505.09388) Table 2, §3.2; Qwen/Qwen3-30B-A3B config.json",
    }),
    ("qwen3-235b-a22b", CatalogModel {
        // torchtitan's 235B-A22B flavor rotates at base 5,000,000 (the 2507 release's), where
        // this config.json sets 1,000,000: it would train another model.
        shape: || qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 1536),
        arch: qwen3(None),
        source: "Qwen3 technical report (arXiv 2505.09388) Table 2, §3.2; Qwen/Qwen3-235B-A22B config.json",
    }),
    ("gpt-oss-20b", CatalogModel {
        shape: || gpt_oss("gpt-oss-20b", 24, 32),
        arch: gpt_oss_arch(Some(("gpt_oss", "20b"))),
        source: "gpt-oss model card (arXiv 2508.10925) Table 1; openai/gpt-oss-20b config.json",
    }),
    ("gpt-oss-120b", CatalogModel {
        shape: || gpt_oss("gpt-oss-120b", 36, 128),
        arch: gpt_oss_arch(Some(("gpt_oss", "120b"))),
        source: "gpt-oss model card (arXiv 2508.10925) Table 1; openai/gpt-oss-120b config.json",
    }),
];
