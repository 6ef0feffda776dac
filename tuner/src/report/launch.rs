//! Launch configurations for a chosen mesh: Megatron-LM arguments, a DeepSpeed JSON config,
//! torchtitan 0.3 arguments and a torchtitan v0.2 TOML job config. Each maps what the framework can express and says what it
//! cannot; scripts/check-launch-configs.sh runs each through the framework's own parser.

use crate::catalog::{self, models::Architecture};
use crate::mesh::{
    ExpertGemms, FlashKernel, Mesh, MoeDispatch, Precision, Recompute, ReduceDtype, Schedule,
    Training,
};
use crate::model::{FfnAct, ModelShape, Moe};

/// The releases each config is written for and checked against.
const MEGATRON_RELEASE: &str = "Megatron-LM core_v0.19 (pretrain_gpt.py, Megatron-Core models)";
const DEEPSPEED_RELEASE: &str = "DeepSpeed 0.19";
const TORCHTITAN_RELEASE: &str = "torchtitan 0.3.x (read with 0.3.0's ConfigManager)";
const TORCHTITAN_V02_RELEASES: &str =
    "torchtitan v0.2.0 to v0.2.2 (0.3 dropped TOML job configs for command-line arguments: --emit torchtitan)";

/// The model as Megatron-LM's arguments: its shape and, for a catalog model, what else
/// defines it, since Megatron-LM's defaults are GPT's (rotary base 10000, dropout 0.1).
fn megatron_model_args(model: &ModelShape, arch: Option<&Architecture>) -> Vec<String> {
    let mut a = Vec::new();
    if model.kv_heads != model.heads {
        a.push(format!(
            "--group-query-attention --num-query-groups {}",
            model.kv_heads
        ));
    }
    if let Some(d) = model.head_dim {
        a.push(format!("--kv-channels {d}"));
    }
    if let Some(mla) = &model.mla {
        let mut flags = vec!["--multi-latent-attention".to_string()];
        if let Some(r) = mla.q_lora_rank {
            flags.push(format!("--q-lora-rank {r}"));
        }
        flags.push(format!(
            "--kv-lora-rank {} --qk-head-dim {} --qk-pos-emb-head-dim {} --v-head-dim {}",
            mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim
        ));
        a.push(flags.join(" "));
    }
    if model.mtp_layers > 0 {
        a.push(format!("--mtp-num-layers {}", model.mtp_layers));
    }
    if model.qk_norm {
        a.push("--qk-layernorm".into());
    }
    a.extend(megatron_window_args(model));
    // The shape files carry no normalization, position or bias fields: SwiGLU models are the
    // Llama family (RMSNorm, rotary positions, no linear biases), GeLU models GPT-style
    // (LayerNorm, learned positions, biases), which is what the cost model prices. A catalog
    // model's gating, YaRN and biases are its own (GPT-OSS's).
    if model.ffn_act == FfnAct::Swiglu {
        let gating = match arch.and_then(|a| a.quick_geglu) {
            Some(g) => format!(
                "--quick-geglu --activation-func-clamp-value {} --glu-linear-offset {}",
                g.clamp, g.linear_offset
            ),
            None => "--swiglu".into(),
        };
        let positions = if arch.is_some_and(|a| a.yarn.is_some()) {
            "yarn"
        } else {
            "rope"
        };
        let biases = if arch.is_some_and(|a| a.linear_biases) {
            ""
        } else {
            " --disable-bias-linear"
        };
        a.push(format!(
            "{gating} --normalization RMSNorm --position-embedding-type {positions}{biases}"
        ));
    } else {
        a.push("--normalization LayerNorm --position-embedding-type learned_absolute".into());
    }
    if let Some(arch) = arch {
        a.push(format!("--norm-epsilon {}", arch.norm_eps));
        if let Some(base) = arch.rotary_base {
            a.push(format!("--rotary-base {base}"));
        }
        if arch.llama31_rope_scaling {
            a.push("--use-rope-scaling --rope-scaling-factor 8".into());
        }
        // Megatron-LM takes YaRN's factor without its prefix (`_apply_yarn_config_from_args`).
        if let Some(y) = arch.yarn {
            a.push(format!(
                "--rotary-scaling-factor {} --yarn-original-max-position-embeddings {} \
                 --yarn-beta-fast {} --yarn-beta-slow {} {}",
                y.factor,
                y.original_positions,
                y.beta_fast,
                y.beta_slow,
                if y.round_to_int {
                    "--yarn-correction-range-round-to-int"
                } else {
                    "--no-yarn-correction-range-round-to-int"
                }
            ));
        }
        if arch.attention_sinks {
            a.push("--softmax-type learnable".into());
        }
        a.push(format!(
            "--attention-dropout {0} --hidden-dropout {0}",
            arch.dropout
        ));
    }
    // The vocabulary priced in the output layer, through the tokenizer that takes a size;
    // Megatron-LM pads it to a multiple of 128 x TP unless told otherwise, which would price
    // another model (128256 becomes 129024 at TP 8).
    a.push(format!(
        "--tokenizer-type NullTokenizer --vocab-size {} --make-vocab-size-divisible-by 1",
        model.vocab
    ));
    if !model.tied_embeddings {
        a.push("--untie-embeddings-and-output-weights".into());
    }
    a
}

/// Sliding-window attention as Megatron-LM's arguments: the window as (positions before,
/// after), and which layers slide, as the period N of one full layer after N - 1 sliding ones
/// where the layers follow one, else as the list of 1 (sliding) and 0 that
/// `--window-attn-skip-freq` also takes (`is_layer_window_attention`,
/// `megatron/core/transformer/utils.py`).
fn megatron_window_args(model: &ModelShape) -> Option<String> {
    use crate::model::AttentionType::SlidingAttention;
    let w = model
        .sliding_window
        .filter(|_| model.sliding_layers() > 0)?;
    let window = format!("--window-size {},0", w - 1);
    let Some(types) = model
        .layer_types
        .as_ref()
        .filter(|_| model.sliding_layers() < model.layers)
    else {
        return Some(window);
    };
    let sliding = |i: usize| types[i] == SlidingAttention;
    let period =
        (2..=types.len()).find(|&n| (0..types.len()).all(|i| sliding(i) == ((i + 1) % n != 0)));
    let freq = match period {
        Some(n) => n.to_string(),
        None => {
            let flags: Vec<&str> = (0..types.len())
                .map(|i| if sliding(i) { "1" } else { "0" })
                .collect();
            format!("'[{}]'", flags.join(","))
        }
    };
    Some(format!("{window} --window-attn-skip-freq {freq}"))
}

/// An MoE block as Megatron-LM's arguments, with the dispatcher the price is for.
fn megatron_moe_args(moe: &Moe, layers: u32, t: &Training, m: &Mesh) -> Vec<String> {
    let mut a = Vec::new();
    a.push(format!(
        "--num-experts {} --moe-router-topk {} --expert-model-parallel-size {}",
        moe.experts, moe.top_k, m.ep
    ));
    // Megatron-Core splits each expert over the TP ranks unless told otherwise.
    if let Some(etp) = m.expert_tp {
        a.push(format!("--expert-tensor-parallel-size {etp}"));
    }
    a.push(format!("--moe-ffn-hidden-size {}", moe.expert_ffn_hidden));
    // Without it every layer is an MoE layer; the leading dense ones were priced dense.
    if moe.dense_layers > 0 {
        a.push(format!(
            "--moe-layer-freq '([0]*{}+[1]*{})'",
            moe.dense_layers,
            layers.saturating_sub(moe.dense_layers)
        ));
    }
    // Transformer Engine's GroupedLinear: one cuBLAS GEMM per expert over four streams, as
    // `--expert-gemms per-expert` prices it; `megatron` notes any other pricing.
    a.push("--moe-grouped-gemm".into());
    if let Some(c) = moe.capacity_factor {
        a.push(format!("--moe-expert-capacity-factor {c}"));
        if moe.pad_to_capacity {
            a.push("--moe-pad-expert-input-to-capacity".into());
        }
    }
    // Megatron's default dispatcher all-gathers; the price is for one of these two.
    a.push(match t.moe_dispatch {
        MoeDispatch::AllToAll => "--moe-token-dispatcher-type alltoall".into(),
        MoeDispatch::AllGather => "--moe-token-dispatcher-type allgather".into(),
        MoeDispatch::NodeDedup => {
            "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep".into()
        }
    });
    if moe.shared_experts > 0 {
        a.push(format!(
            "--moe-shared-expert-intermediate-size {}",
            moe.shared_experts * moe.expert_ffn_hidden
        ));
    }
    a
}

/// A layout a framework's launch config cannot express: the command fails, so that no script
/// takes an empty or partial config for a launchable one (issue 31, item 12).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--emit {framework}: not emitted: {why}")]
pub struct NotEmitted {
    /// The framework asked for.
    pub framework: &'static str,
    /// Why it cannot run the layout, and what to do instead.
    pub why: String,
}

/// Megatron-LM `pretrain_gpt.py` arguments, or why it cannot run the layout.
pub fn megatron(model: &ModelShape, t: &Training, m: &Mesh) -> Result<String, NotEmitted> {
    let arch = catalog::architecture(model);
    let mut a = vec![
        format!("--tensor-model-parallel-size {}", m.tp),
        format!("--pipeline-model-parallel-size {}", m.pp),
        format!("--context-parallel-size {}", m.cp),
        format!("--micro-batch-size {}", m.microbatch_size),
        format!("--global-batch-size {}", t.global_batch),
        format!("--seq-length {}", t.seq_len),
        format!("--max-position-embeddings {}", t.seq_len),
        format!("--num-layers {}", model.layers),
        format!("--hidden-size {}", model.hidden),
        format!("--num-attention-heads {}", model.heads),
        format!("--ffn-hidden-size {}", model.ffn_hidden),
    ];
    a.extend(megatron_model_args(model, arch.as_ref()));
    if let Some(moe) = &model.moe {
        a.extend(megatron_moe_args(moe, model.layers, t, m));
    }
    if m.schedule == Schedule::Dualpipe {
        return Err(NotEmitted {
            framework: "megatron",
            why: "DualPipe was priced, which Megatron-LM does not run (DeepSeek's own framework \
                  does); pin --schedule 1f1b"
                .into(),
        });
    }
    let uneven = m.edge_stages.is_none() && model.layers % (m.pp * m.virtual_stages) != 0;
    if m.virtual_stages > 1 && m.edge_stages.is_none() {
        // Megatron counts the embedding and the loss as a layer each in the uneven split, so
        // each chunk holds (layers + 2) / (pp x v).
        let counted = model.layers + if uneven { 2 } else { 0 };
        a.push(format!(
            "--num-layers-per-virtual-pipeline-stage {}",
            counted / (m.pp * m.virtual_stages)
        ));
    }
    if m.schedule == Schedule::Combined1F1B {
        a.push("--overlap-moe-expert-parallel-comm".into());
    }
    if m.sequence_parallel {
        a.push("--sequence-parallel".into());
    }
    match m.recompute {
        Recompute::None => {}
        Recompute::Selective => a.push("--recompute-granularity selective".into()),
        Recompute::Full => a.push(
            "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
                .into(),
        ),
    }
    if m.zero_stage >= 1 {
        a.push("--use-distributed-optimizer".into());
    }
    if t.overlap_grad_reduce {
        a.push("--overlap-grad-reduce".into());
    }
    // Under --bf16 Megatron reduces gradients in fp32 unless told otherwise.
    if t.grad_reduce == ReduceDtype::Bf16 {
        a.push("--grad-reduce-in-bf16".into());
    }
    if t.tp_comm_overlap && m.tp > 1 && m.sequence_parallel {
        a.push("--tp-comm-overlap".into());
    }
    // Megatron-Core models pick attention by backend (`--use-flash-attn` only reaches the
    // legacy model): Transformer Engine's cuDNN kernel is the newest one priced.
    a.push(format!(
        "--attention-backend {}",
        match (t.flash_attention, t.flash_kernel) {
            (false, _) => "unfused",
            (true, FlashKernel::Newest) => "fused",
            (true, _) => "flash",
        }
    ));
    a.push("--bf16".into());
    if t.precision.is_fp8() {
        a.push("--fp8-format hybrid".into());
    }
    if t.precision == Precision::Fp8Blockwise {
        a.push("--fp8-recipe blockwise".into());
    }
    let mut out = format!("# {MEGATRON_RELEASE}\n");
    if arch.is_none() {
        out.push_str(&format!(
            "# {} is not a catalog model: --norm-epsilon, --rotary-base and the dropouts are left at Megatron-LM's defaults; set them to the model's\n",
            model.name
        ));
    }
    if t.precision == Precision::Fp8Rowwise {
        out.push_str("# priced with torchao's rowwise fp8 scaling, which Transformer Engine does not run; torchtitan runs it (--emit torchtitan where 0.3 has a float8 config of the model, else --emit torchtitan-0.2)\n");
    }
    if m.zero_stage >= 2 {
        out.push_str(&format!(
            "# Megatron-LM shards optimizer states only (ZeRO-1, --use-distributed-optimizer); ZeRO-{} needs --emit deepspeed or --emit torchtitan\n",
            m.zero_stage
        ));
    }
    if model.moe.is_some() {
        match t.expert_gemms {
            ExpertGemms::PerExpertStreams => {}
            ExpertGemms::Grouped => out.push_str("# the experts' GEMMs were priced as one grouped launch a projection: Transformer Engine runs that with NVTE_USE_CUTLASS_GROUPED_GEMM=1 (bf16 on Hopper), or under --moe-use-grouped-tensor on a Megatron-Core newer than core_v0.19; otherwise it launches one GEMM per expert\n"),
            ExpertGemms::Looped => out.push_str("# the experts' GEMMs were priced one after another on one stream; Transformer Engine launches one per expert over four streams, whose tiles run together\n"),
        }
    }
    if uneven {
        out.push_str(&format!(
            "# {} layers do not split evenly over {} stages: the embedding and the loss count as a layer each, so the first and last stage take one layer fewer\n",
            model.layers,
            m.pp * m.virtual_stages
        ));
        a.push(
            "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split".into(),
        );
    }
    match m.edge_stages {
        Some(e) if m.virtual_stages > 1 => a.push(format!(
            "--pipeline-model-parallel-layout '{}'",
            megatron_layout(model, m, e)
        )),
        Some(e) => a.push(format!(
            "--decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {}",
            e.first, e.last
        )),
        None => {}
    }
    out.push_str(&a.join(" \\\n  "));
    out.push('\n');
    Ok(out)
}

/// Uneven edge stages over virtual stages as Megatron-Core's `--pipeline-model-parallel-layout`:
/// chunk c of `pp·v` (rank c mod pp, in layer order) holds its rank's share of decoder layers
/// (`t`), the larger shares first; the first chunk opens with the embedding (`E`) and the last
/// closes with the multi-token-prediction modules (`m`) and the loss (`L`)
/// (`PipelineParallelLayerLayout`, `megatron/core/transformer/pipeline_parallel_layer_layout.py`).
fn megatron_layout(model: &ModelShape, m: &Mesh, e: crate::mesh::EdgeStages) -> String {
    let inner = e.inner(model.layers, m.pp).unwrap_or(0);
    let v = m.virtual_stages;
    let chunks = m.pp * v;
    (0..chunks)
        .map(|c| {
            let (rank, round) = (c % m.pp, c / m.pp);
            let layers = match rank {
                0 => e.first,
                r if r == m.pp - 1 => e.last,
                _ => inner,
            };
            let share = layers / v + u32::from(round < layers % v);
            let mut chunk = "t".repeat(share as usize);
            if c == 0 {
                chunk.insert(0, 'E');
            }
            if c == chunks - 1 {
                chunk.push_str(&"m".repeat(model.mtp_layers as usize));
                chunk.push('L');
            }
            chunk
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// A DeepSpeed config. TP and PP are set in the model code (Megatron-DeepSpeed), so they appear
/// under a `meshfit` key DeepSpeed ignores. DeepSpeed asserts train_batch_size = micro batch x
/// accumulation steps x data-parallel size, which the search's layouts meet: the micro batch
/// divides each replica's share, and DeepSpeed layouts run no context parallelism.
pub fn deepspeed(t: &Training, m: &Mesh) -> String {
    let doc = serde_json::json!({
        "train_batch_size": t.global_batch,
        "train_micro_batch_size_per_gpu": m.microbatch_size,
        "gradient_accumulation_steps": m.microbatches(t.global_batch),
        "bf16": { "enabled": true },
        "zero_optimization": {
            "stage": m.zero_stage,
            "overlap_comm": t.overlap_grad_reduce,
            "contiguous_gradients": true,
            "reduce_bucket_size": 500_000_000u64,
        },
        "communication_data_type": match t.grad_reduce {
            ReduceDtype::Bf16 => "bf16",
            ReduceDtype::Fp32 => "fp32",
        },
        "activation_checkpointing": {
            // Partitioning only applies to checkpointed activations.
            "partition_activations": m.sequence_parallel && m.recompute != Recompute::None,
            "contiguous_memory_optimization": m.recompute == Recompute::Full,
            "number_checkpoints": serde_json::Value::Null,
        },
        "gradient_clipping": 1.0,
        "meshfit": {
            "for": DEEPSPEED_RELEASE,
            "tensor_parallel": m.tp, "pipeline_parallel": m.pp, "data_parallel": m.dp,
            "context_parallel": m.cp, "expert_parallel": m.ep,
            "virtual_stages": m.virtual_stages, "recompute": m.recompute.to_string(),
        },
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// torchtitan 0.3's config registry functions for the flavors the catalog runs
/// (`torchtitan/models/*/config_registry.py`): the one without a float8 converter and the one
/// with rowwise float8, where 0.3 ships each. 0.3 sets converters in these functions only
/// (`Trainer.Config.model_spec` is not on its command line).
const TITAN_REGISTRY: [(&str, &str, Option<&str>, Option<&str>); 7] = [
    ("llama3", "8B", Some("llama3_8b"), None),
    ("llama3", "70B", Some("llama3_70b"), None),
    ("llama3", "405B", None, Some("llama3_405b")),
    (
        "deepseek_v3",
        "671B",
        Some("deepseek_v3_671b"),
        Some("deepseek_v3_671b_float8"),
    ),
    ("qwen3", "30B-A3B", Some("qwen3_30b_a3b"), None),
    ("gpt_oss", "20b", Some("gpt_oss_20b"), None),
    ("gpt_oss", "120b", Some("gpt_oss_120b"), None),
];

/// torchtitan v0.2's models that no pipeline splits: their `TrainSpec` sets no
/// `pipelining_fn` (`torchtitan/models/{qwen3,gpt_oss}/__init__.py` at v0.2.2, qwen3 at
/// v0.2.0 too; 0.3 gives both `pipeline_llm`).
const TITAN_V02_UNPIPELINED: [&str; 2] = ["qwen3", "gpt_oss"];

/// torchtitan v0.2's models that v0.2.0 and v0.2.1 lack (`torchtitan/models/gpt_oss` first
/// ships in v0.2.2).
const TITAN_V022_ONLY: [&str; 1] = ["gpt_oss"];

/// torchtitan's float8 scaling of the priced fp8.
#[derive(Clone, Copy, PartialEq)]
enum TitanFloat8Recipe {
    Tensorwise,
    Rowwise,
}

/// What both torchtitan forms set from a layout. torchtitan shards with FSDP2: ZeRO-3 maps to
/// `data_parallel_shard_degree`, ZeRO-0 to replicate, ZeRO-1/2 to FSDP that keeps parameters
/// gathered after forward (`fsdp_reshard_after_forward = "never"`).
struct TitanLayout {
    /// The model's name (0.2's `[model] name`, 0.3's `--module`) and flavor.
    name: &'static str,
    flavor: &'static str,
    replicate: u32,
    shard: u32,
    reshard_after_forward: &'static str,
    schedule: &'static str,
    /// Layers per (virtual) stage and those the first and last stage take off it, under a
    /// pipeline.
    split: Option<(u32, u32, u32)>,
    /// Async TP was priced and runs: it is set.
    async_tp: bool,
    /// Async TP was priced without compile, which torchtitan runs it under: said, not set.
    async_tp_needs_compile: bool,
    /// Activation checkpointing: both releases name its modes none, selective, full.
    ac: &'static str,
    float8: Option<TitanFloat8Recipe>,
    local_batch_size: u32,
    /// TP ranks each expert splits over (torchtitan's default is 1: experts whole).
    expert_tp: u32,
}

/// The layout as torchtitan runs it, or why neither release can run it as priced.
fn titan_layout(
    model: &ModelShape,
    t: &Training,
    m: &Mesh,
    framework: &'static str,
    release: &str,
) -> Result<TitanLayout, NotEmitted> {
    let refuse = |why: String| NotEmitted { framework, why };
    // torchtitan builds registered flavors only: without one the file would train another
    // model (v0.1 fell back to a debug model).
    let Some((name, flavor)) = catalog::architecture(model).and_then(|a| a.torchtitan) else {
        let runs: Vec<&str> = catalog::models::MODELS
            .iter()
            .filter(|(_, m)| m.arch.torchtitan.is_some())
            .map(|(id, _)| *id)
            .collect();
        return Err(refuse(format!(
            "torchtitan {release} ships no flavor of {} (of the catalog it runs {}); register one \
             of this shape in torchtitan, or use --emit megatron",
            model.name,
            runs.join(", ")
        )));
    };
    if t.grad_reduce == ReduceDtype::Bf16 {
        return Err(refuse(format!(
            "priced with bf16 gradient reduction, and torchtitan {release} reduces in float32 \
             only (training.mixed_precision_reduce); price with --grad-reduce fp32"
        )));
    }
    match m.schedule {
        // PyTorch's DualPipeV folds one model copy into a V; DualPipe runs two.
        Schedule::Dualpipe => {
            return Err(refuse(
                "DualPipe was priced, which torchtitan does not run (PyTorch's DualPipeV is \
                 another schedule); pin --schedule 1f1b"
                    .into(),
            ))
        }
        Schedule::Combined1F1B => {
            return Err(refuse(
                "combined 1F1B was priced, which torchtitan does not run (it is Megatron-Core's \
                 --overlap-moe-expert-parallel-comm); pin --schedule 1f1b or use --emit megatron"
                    .into(),
            ))
        }
        Schedule::OneFOneB => {}
    }
    // torchtitan splits experts over 1 or all of the TP ranks (`expert_tensor_parallel_degree`).
    if m.ep > 1 && model.moe.is_some() && m.etp() != 1 && m.etp() != m.tp {
        return Err(refuse(format!(
            "experts over {} of {} TP ranks were priced, and torchtitan splits them over 1 or all \
             of them; pin --etp 1 or --etp {}",
            m.etp(),
            m.tp,
            m.tp
        )));
    }
    if t.moe_dispatch == MoeDispatch::AllGather && m.ep > 1 && model.moe.is_some() {
        return Err(refuse(
            "the all-gather dispatcher was priced, and torchtitan's expert parallelism exchanges \
             tokens by all-to-all; price --moe-dispatch all-to-all or use --emit megatron"
                .into(),
        ));
    }
    let split = if m.pp > 1 {
        // torchtitan counts the embedding and the output as `*_less_layers` layers of the
        // first and last stage: 0 splits evenly, 1 takes one layer off each end, which is the
        // uneven split priced (126 layers on 16 stages: 7, 8 x 14, 7).
        // Edge stages of their own counts are the inner stages' count less some layers, taken
        // off the first and last of torchtitan's pp x v stages (rank 0 runs the first, rank
        // pp - 1 the last).
        let stages = m.pp * m.virtual_stages;
        Some(match m.edge_stages {
            Some(e) => {
                let middle = e.inner(model.layers, m.pp).unwrap_or(e.first.max(e.last));
                let per_stage = middle / m.virtual_stages;
                let (first, last) = (
                    middle.saturating_sub(e.first),
                    middle.saturating_sub(e.last),
                );
                if e.first > middle
                    || e.last > middle
                    || middle % m.virtual_stages != 0
                    || first > per_stage
                    || last > per_stage
                {
                    return Err(refuse(format!(
                        "first and last stages of {} and {} layers beside inner stages of {middle} \
                         over {} virtual stages were priced; torchtitan's stages hold equal layers \
                         but for some taken off its first and last",
                        e.first, e.last, m.virtual_stages
                    )));
                }
                (per_stage, first, last)
            }
            None if model.layers % stages == 0 => (model.layers / stages, 0, 0),
            None => ((model.layers + 2) / stages, 1, 1),
        })
    } else {
        None
    };
    // torchtitan cuts ceil((layers + first + last) / per_stage) stages, which must be the
    // priced ones (61 layers over 16 uneven stages would make 21).
    if let Some((per_stage, first, last)) = split {
        let stages = m.pp * m.virtual_stages;
        let cut = match per_stage {
            0 => 0,
            n => (model.layers + first + last).div_ceil(n),
        };
        if cut != stages {
            return Err(refuse(format!(
                "{} layers over {stages} stages were priced, which torchtitan's \
                 pipeline_parallel_layers_per_stage cannot cut (it would make {cut}); pin --pp \
                 or --virtual-stages",
                model.layers
            )));
        }
    }
    // The converter swaps nn.Linear for Float8Linear.
    let float8 =
        match t.precision {
            Precision::Fp8 => Some(TitanFloat8Recipe::Tensorwise),
            Precision::Fp8Rowwise => Some(TitanFloat8Recipe::Rowwise),
            Precision::Fp8Blockwise => return Err(refuse(
                "block-scaled fp8 was priced; torchtitan's float8 converter scales per tensor or \
                 per row: price --precision fp8 or fp8-rowwise to emit it"
                    .into(),
            )),
            Precision::Bf16 => None,
        };
    // Both releases lay the experts over the sharded ranks only, replicas apart:
    // dp_shard x cp x tp = efsdp x ep x etp (`ParallelDims`, v0.2.2's `build_mesh` and 0.3's).
    let shard = if m.zero_stage == 0 { 1 } else { m.dp };
    let dense = shard * m.cp * m.tp / m.etp();
    if m.ep > 1 && model.moe.is_some() && dense % m.ep != 0 {
        return Err(refuse(format!(
            "EP {} was priced beside FSDP {shard} x CP {} x TP {} with experts over {} TP ranks, \
             and torchtitan {release} takes the expert ranks from those (dp_shard x cp x tp = \
             efsdp x ep x etp), so EP must divide {dense}",
            m.ep,
            m.cp,
            m.tp,
            m.etp()
        )));
    }
    // torchtitan's async TP (`_micro_pipeline_tp`) is an inductor pass: it needs compile.
    let async_tp_priced = t.tp_comm_overlap && m.tp > 1;
    Ok(TitanLayout {
        name,
        flavor,
        replicate: if m.zero_stage == 0 { m.dp } else { 1 },
        shard,
        reshard_after_forward: if m.zero_stage == 3 {
            "default"
        } else {
            "never"
        },
        schedule: if m.virtual_stages > 1 {
            "Interleaved1F1B"
        } else {
            "1F1B"
        },
        split,
        async_tp: async_tp_priced && t.fused_elementwise,
        async_tp_needs_compile: async_tp_priced && !t.fused_elementwise,
        ac: match m.recompute {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        },
        float8,
        // Without a pipeline torchtitan runs local_batch_size sequences per forward and
        // accumulates global / (local x dp) of them; with one it splits the local batch into
        // microbatches of pipeline_parallel_microbatch_size.
        local_batch_size: if m.pp > 1 {
            t.global_batch / m.dp
        } else {
            m.microbatch_size
        },
        expert_tp: m.etp(),
    })
}

/// torchtitan 0.3's command-line arguments (`--module`, `--config`, then `--section.key value`
/// overrides of that config registry function's defaults), or why 0.3 cannot run the model
/// as priced.
pub fn torchtitan(model: &ModelShape, t: &Training, m: &Mesh) -> Result<String, NotEmitted> {
    let framework = "torchtitan";
    let refuse = |why: String| NotEmitted { framework, why };
    let l = titan_layout(model, t, m, framework, "0.3")?;
    let (plain, float8) = TITAN_REGISTRY
        .iter()
        .find(|r| (r.0, r.1) == (l.name, l.flavor))
        .map_or((None, None), |r| (r.2, r.3));
    let config = match l.float8 {
        None => plain.ok_or_else(|| {
            refuse(format!(
                "bf16 was priced, and torchtitan 0.3's only config of {} ({}) trains in rowwise \
                 fp8, a converter the command line cannot remove; price --precision fp8-rowwise, \
                 or use --emit torchtitan-0.2",
                model.name,
                float8.unwrap_or("none")
            ))
        })?,
        Some(TitanFloat8Recipe::Rowwise) => float8.ok_or_else(|| {
            refuse(format!(
                "rowwise fp8 was priced, and no torchtitan 0.3 config of {} ({}) sets a float8 \
                 converter, which the command line cannot add; price bf16, or use --emit \
                 torchtitan-0.2",
                model.name,
                plain.unwrap_or("none")
            ))
        })?,
        Some(TitanFloat8Recipe::Tensorwise) => {
            return Err(refuse(
                "tensorwise fp8 was priced; torchtitan 0.3's float8 converter scales per row \
                 only: price --precision fp8-rowwise, or use --emit torchtitan-0.2"
                    .into(),
            ))
        }
    };
    // 0.3 keeps each expert whole and lays the experts over the dense ranks:
    // dp_shard x cp x tp = efsdp x ep.
    if l.expert_tp != 1 && m.ep > 1 && model.moe.is_some() {
        return Err(refuse(format!(
            "experts split over {} TP ranks were priced, and torchtitan 0.3 keeps each expert \
             whole (efsdp = dp_shard x cp x tp / ep); pin --etp 1, or use --emit torchtitan-0.2",
            l.expert_tp
        )));
    }
    let mut a = vec![
        format!("--module {} --config {config}", l.name),
        format!(
            "--parallelism.data_parallel_replicate_degree {}",
            l.replicate
        ),
        format!("--parallelism.data_parallel_shard_degree {}", l.shard),
        format!(
            "--parallelism.fsdp_reshard_after_forward {}",
            l.reshard_after_forward
        ),
        format!("--parallelism.tensor_parallel_degree {}", m.tp),
        format!("--parallelism.context_parallel_degree {}", m.cp),
        format!("--parallelism.pipeline_parallel_degree {}", m.pp),
        format!("--parallelism.pipeline_parallel_schedule {}", l.schedule),
        format!(
            "--parallelism.pipeline_parallel_microbatch_size {}",
            m.microbatch_size
        ),
        format!("--parallelism.expert_parallel_degree {}", m.ep),
    ];
    if let Some((per_stage, first, last)) = l.split {
        a.push(format!(
            "--parallelism.pipeline_parallel_layers_per_stage {per_stage}"
        ));
        a.push(format!(
            "--parallelism.pipeline_parallel_first_stage_less_layers {first}"
        ));
        a.push(format!(
            "--parallelism.pipeline_parallel_last_stage_less_layers {last}"
        ));
    }
    a.extend([
        format!("--training.global_batch_size {}", t.global_batch),
        format!("--training.local_batch_size {}", l.local_batch_size),
        format!("--training.seq_len {}", t.seq_len),
        "--training.mixed_precision_param bfloat16".into(),
        "--training.mixed_precision_reduce float32".into(),
    ]);
    // 0.3 captures each step in a CUDA graph unless told not to: as priced where the layout
    // allows it, and told not to where it does not or the price was for eager launches.
    if !t.step_captured(m, model.moe.is_some()) {
        a.push("--training.disable_cuda_graphs".into());
    }
    // Fused norms, rotary and gating were priced: torch.compile is what fuses them. The
    // registry functions differ here (llama3_405b compiles with async TP, deepseek_v3_671b
    // compiles the loss only), so both are always said.
    a.push(if t.fused_elementwise {
        "--compile.enable --compile.components model,loss".into()
    } else {
        "--compile.no-enable".into()
    });
    a.push(if l.async_tp {
        "--compile.enable_async_tensor_parallel".into()
    } else {
        "--compile.no-enable_async_tensor_parallel".into()
    });
    // A tyro subcommand: options after it are not read as the trainer's. Selective is 0.3's
    // per-op policy, the one priced.
    a.push(format!("activation-checkpoint:{}", l.ac));
    let mut out = format!(
        "# {TORCHTITAN_RELEASE}: config registry function {config}, then overrides of its defaults\n\
         # run on {} GPUs: torchrun --nnodes <hosts> --nproc_per_node <GPUs a host> --rdzv_backend c10d --rdzv_endpoint <host:port> -m torchtitan.train $(grep -v '^#' <this file>)\n\
         # steps, data, optimizer, tokenizer (hf_assets_path) and checkpointing stay {config}'s (torchtitan/models/{}/config_registry.py)\n",
        m.gpus(),
        l.name
    );
    if l.float8.is_some() {
        out.push_str(&format!(
            "# rowwise fp8 is {config}'s float8 converter, which keeps the output layer (filter_fqns) in bf16\n"
        ));
    }
    if l.async_tp_needs_compile {
        out.push_str("# async TP was priced; torchtitan runs it only under compile: --compile.enable --compile.enable_async_tensor_parallel\n");
    }
    out.push_str(&a.join("\n"));
    out.push('\n');
    Ok(out)
}

/// A torchtitan v0.2 TOML job config, or why v0.2 cannot run the model as priced.
pub fn torchtitan_v02(model: &ModelShape, t: &Training, m: &Mesh) -> Result<String, NotEmitted> {
    let l = titan_layout(model, t, m, "torchtitan-0.2", "v0.2")?;
    if m.pp > 1 && TITAN_V02_UNPIPELINED.contains(&l.name) {
        return Err(NotEmitted {
            framework: "torchtitan-0.2",
            why: format!(
                "a {}-stage pipeline was priced, and torchtitan v0.2 splits no {} model into \
                 stages (its TrainSpec has no pipelining_fn); pin --pp 1, or use --emit torchtitan \
                 (0.3 splits it)",
                m.pp, l.name
            ),
        });
    }
    let mut comments = vec![format!(
        "# {TORCHTITAN_V02_RELEASES}: run with --job.config_file <this file>"
    )];
    if TITAN_V022_ONLY.contains(&l.name) {
        comments.push(format!(
            "# {} ships from v0.2.2 on: v0.2.0 and v0.2.1 have no such model",
            l.name
        ));
    }
    if l.async_tp_needs_compile {
        comments.push("# async TP was priced; torchtitan runs it only under compile: set [compile] enable = true and [parallelism] enable_async_tensor_parallel = true".into());
    }
    // Without the converter the section does nothing. Only tensorwise scaling gathers in fp8;
    // rowwise gathers in bf16, as it was priced.
    let float8 = l.float8.map(|recipe| match recipe {
        TitanFloat8Recipe::Tensorwise => TitanFloat8 {
            enable_fsdp_float8_all_gather: Some(true),
            recipe_name: None,
        },
        TitanFloat8Recipe::Rowwise => TitanFloat8 {
            enable_fsdp_float8_all_gather: None,
            recipe_name: Some("rowwise"),
        },
    });
    let job = TitanJob {
        model: TitanModel {
            name: l.name,
            flavor: l.flavor,
            converters: float8.iter().map(|_| "quantize.linear.float8").collect(),
        },
        parallelism: TitanParallelism {
            data_parallel_replicate_degree: l.replicate,
            data_parallel_shard_degree: l.shard,
            fsdp_reshard_after_forward: l.reshard_after_forward,
            tensor_parallel_degree: m.tp,
            context_parallel_degree: m.cp,
            pipeline_parallel_degree: m.pp,
            pipeline_parallel_schedule: l.schedule,
            pipeline_parallel_microbatch_size: m.microbatch_size,
            expert_parallel_degree: m.ep,
            expert_tensor_parallel_degree: l.expert_tp,
            pipeline_parallel_layers_per_stage: l.split.map(|s| s.0),
            pipeline_parallel_first_stage_less_layers: l.split.map(|s| s.1),
            pipeline_parallel_last_stage_less_layers: l.split.map(|s| s.2),
            enable_async_tensor_parallel: l.async_tp.then_some(true),
        },
        training: TitanTraining {
            global_batch_size: t.global_batch,
            local_batch_size: l.local_batch_size,
            seq_len: t.seq_len,
            mixed_precision_param: "bfloat16",
            mixed_precision_reduce: "float32",
        },
        // Fused norms, rotary and gating were priced: torch.compile is what fuses them.
        compile: TitanCompile {
            enable: t.fused_elementwise,
        },
        activation_checkpoint: TitanCheckpoint {
            mode: l.ac,
            // Selective is priced as torchtitan's per-op policy, not its every-n-layers one.
            selective_ac_option: (m.recompute == Recompute::Selective).then_some("op"),
        },
        quantize: float8.map(|float8| TitanQuantize {
            linear: TitanLinear { float8 },
        }),
    };
    let body = toml::to_string(&job).map_err(|e| NotEmitted {
        framework: "torchtitan-0.2",
        why: format!("writing the TOML: {e}"),
    })?;
    Ok(comments.join("\n") + "\n" + &body)
}

/// torchtitan v0.2's `JobConfig`, the sections and keys the tuner sets
/// (`torchtitan/config/job_config.py`), in its field order.
#[derive(serde::Serialize)]
struct TitanJob {
    model: TitanModel,
    parallelism: TitanParallelism,
    training: TitanTraining,
    compile: TitanCompile,
    activation_checkpoint: TitanCheckpoint,
    #[serde(skip_serializing_if = "Option::is_none")]
    quantize: Option<TitanQuantize>,
}

#[derive(serde::Serialize)]
struct TitanModel {
    name: &'static str,
    flavor: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    converters: Vec<&'static str>,
}

#[derive(serde::Serialize)]
struct TitanParallelism {
    data_parallel_replicate_degree: u32,
    data_parallel_shard_degree: u32,
    fsdp_reshard_after_forward: &'static str,
    tensor_parallel_degree: u32,
    context_parallel_degree: u32,
    pipeline_parallel_degree: u32,
    pipeline_parallel_schedule: &'static str,
    pipeline_parallel_microbatch_size: u32,
    expert_parallel_degree: u32,
    expert_tensor_parallel_degree: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pipeline_parallel_layers_per_stage: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pipeline_parallel_first_stage_less_layers: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pipeline_parallel_last_stage_less_layers: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_async_tensor_parallel: Option<bool>,
}

#[derive(serde::Serialize)]
struct TitanTraining {
    global_batch_size: u32,
    local_batch_size: u32,
    seq_len: u32,
    mixed_precision_param: &'static str,
    mixed_precision_reduce: &'static str,
}

#[derive(serde::Serialize)]
struct TitanCompile {
    enable: bool,
}

#[derive(serde::Serialize)]
struct TitanCheckpoint {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    selective_ac_option: Option<&'static str>,
}

#[derive(serde::Serialize)]
struct TitanQuantize {
    linear: TitanLinear,
}

#[derive(serde::Serialize)]
struct TitanLinear {
    float8: TitanFloat8,
}

#[derive(serde::Serialize)]
struct TitanFloat8 {
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_fsdp_float8_all_gather: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe_name: Option<&'static str>,
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::catalog;

    type Emitter = fn(&ModelShape, &Training, &Mesh) -> Result<String, NotEmitted>;

    fn training(grad_reduce: ReduceDtype) -> Training {
        Training {
            grad_reduce,
            ..Training::megatron(8192, 1024)
        }
    }

    fn mesh(pp: u32, v: u32, zero_stage: u8, recompute: Recompute) -> Mesh {
        Mesh {
            tp: 8,
            pp,
            dp: 8,
            cp: 2,
            ep: 1,
            microbatch_size: 1,
            virtual_stages: v,
            zero_stage,
            recompute,
            sequence_parallel: true,
            schedule: crate::mesh::Schedule::OneFOneB,
            edge_stages: None,
            expert_tp: None,
        }
    }

    /// The keys of an emitted TOML, read back by a TOML parser, by their own names whatever
    /// their table; strings as their text, other values as TOML writes them.
    fn toml_keys(text: &str) -> HashMap<String, String> {
        fn walk(table: &toml::Table, out: &mut HashMap<String, String>) {
            for (k, v) in table {
                let value = match v {
                    toml::Value::Table(t) => {
                        walk(t, out);
                        continue;
                    }
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.insert(k.clone(), value);
            }
        }
        let table: toml::Table = toml::from_str(text).expect("the emitted TOML parses");
        let mut out = HashMap::new();
        walk(&table, &mut out);
        out
    }

    /// `--flag value` pairs and bare `--flag`s of a Megatron command line.
    fn megatron_args(text: &str) -> HashMap<String, Vec<String>> {
        let mut args: HashMap<String, Vec<String>> = HashMap::new();
        let mut key = None;
        for word in text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .flat_map(str::split_whitespace)
            .filter(|w| *w != "\\")
        {
            if let Some(flag) = word.strip_prefix("--") {
                args.insert(flag.to_string(), Vec::new());
                key = Some(flag.to_string());
            } else if let Some(k) = &key {
                args.get_mut(k).unwrap().push(word.to_string());
            }
        }
        args
    }

    fn number(args: &HashMap<String, Vec<String>>, flag: &str) -> u32 {
        args[flag][0].parse().unwrap()
    }

    #[test]
    fn megatron_arguments_parse_back_into_the_priced_layout() {
        let model = catalog::model("llama3-405b").unwrap().shape;
        // 126 layers: 16 stages uneven (7 on the first and last, 8 elsewhere), and 9 stages x
        // 2 virtual stages even (7 layers per chunk).
        for (m, t) in [
            (
                mesh(16, 1, 1, Recompute::Selective),
                training(ReduceDtype::Fp32),
            ),
            (mesh(9, 2, 1, Recompute::Full), training(ReduceDtype::Bf16)),
        ] {
            let a = megatron_args(&megatron(&model, &t, &m).unwrap());
            assert_eq!(number(&a, "tensor-model-parallel-size"), m.tp);
            assert_eq!(number(&a, "pipeline-model-parallel-size"), m.pp);
            assert_eq!(number(&a, "context-parallel-size"), m.cp);
            assert_eq!(number(&a, "micro-batch-size"), m.microbatch_size);
            assert_eq!(number(&a, "global-batch-size"), t.global_batch);
            assert_eq!(number(&a, "num-layers"), model.layers);
            assert_eq!(number(&a, "num-query-groups"), model.kv_heads);
            // Llama's heads are hidden / heads wide, Megatron's default kv-channels.
            assert!(!a.contains_key("kv-channels"));
            assert_eq!(a["normalization"], ["RMSNorm"]);
            assert_eq!(a["position-embedding-type"], ["rope"]);
            assert!(a.contains_key("disable-bias-linear"));
            assert_eq!(a["tokenizer-type"], ["NullTokenizer"]);
            assert_eq!(number(&a, "vocab-size"), model.vocab);
            assert!(
                a.contains_key("swiglu") && a.contains_key("untie-embeddings-and-output-weights")
            );
            assert!(a.contains_key("sequence-parallel") && a.contains_key("tp-comm-overlap"));
            assert_eq!(
                a.contains_key("grad-reduce-in-bf16"),
                t.grad_reduce == ReduceDtype::Bf16
            );
            assert_eq!(
                a.contains_key("use-distributed-optimizer"),
                m.zero_stage >= 1
            );
            // The stages hold exactly the layers the cost model priced.
            let per_stage = m.stage_layers(model.layers) as u32;
            if m.virtual_stages > 1 {
                let chunk = number(&a, "num-layers-per-virtual-pipeline-stage");
                assert_eq!(chunk * m.pp * m.virtual_stages, model.layers);
                assert_eq!(chunk * m.virtual_stages, per_stage);
            } else {
                // 126 + 2 over 16 stages: 8 a stage, the embedding's and the loss's less one.
                assert!(
                    a.contains_key("account-for-embedding-in-pipeline-split")
                        && a.contains_key("account-for-loss-in-pipeline-split")
                );
                assert_eq!((model.layers + 2) / m.pp, per_stage);
                assert_eq!(per_stage, 8);
            }
        }
    }

    #[test]
    fn megatron_defines_the_catalog_model_not_megatrons_default_gpt() {
        // Issue 30: the arguments built a Llama 3 shape with GPT's rotary base and dropout.
        let t = training(ReduceDtype::Fp32);
        let m = mesh(2, 1, 1, Recompute::None);
        let text = megatron(&catalog::model("llama3-8b").unwrap().shape, &t, &m).unwrap();
        assert!(text.starts_with("# Megatron-LM core_v0.19"), "{text}");
        let a = megatron_args(&text);
        assert_eq!(a["rotary-base"], ["500000"]);
        assert_eq!(a["attention-dropout"], ["0"]);
        assert_eq!(a["hidden-dropout"], ["0"]);
        assert_eq!(a["norm-epsilon"][0].parse::<f64>().unwrap(), 1e-5);
        // 128256 is a multiple of TP 8, so Megatron keeps the priced vocabulary unpadded.
        assert_eq!(a["make-vocab-size-divisible-by"], ["1"]);
        assert_eq!(a["attention-backend"], ["fused"]);
        assert!(!a.contains_key("use-rope-scaling"));
        // Llama 3.1 405B's config.json scales its rotary frequencies; GPT-3 keeps learned
        // positions and its dropout.
        let a = megatron_args(
            &megatron(&catalog::model("llama3-405b").unwrap().shape, &t, &m).unwrap(),
        );
        assert_eq!(a["rope-scaling-factor"], ["8"]);
        assert!(a.contains_key("use-rope-scaling"));
        let a =
            megatron_args(&megatron(&catalog::model("gpt3-175b").unwrap().shape, &t, &m).unwrap());
        assert_eq!(a["position-embedding-type"], ["learned_absolute"]);
        assert!(!a.contains_key("rotary-base"));
        assert_eq!(a["hidden-dropout"], ["0.1"]);
    }

    #[test]
    fn megatron_keeps_the_leading_dense_layers_that_were_priced() {
        // DeepSeek-V3: 3 dense layers, then 58 MoE layers.
        let m = Mesh {
            ep: 8,
            ..mesh(1, 1, 1, Recompute::None)
        };
        let text = megatron(
            &catalog::model("deepseek-v3").unwrap().shape,
            &training(ReduceDtype::Fp32),
            &m,
        )
        .unwrap();
        assert_eq!(megatron_args(&text)["moe-layer-freq"], ["'([0]*3+[1]*58)'"]);
        assert_eq!(megatron_args(&text)["norm-epsilon"], ["0.000001"]);
    }

    /// Megatron-LM's arguments for `model` on two stages, nothing else varied.
    fn megatron_plain(model: &ModelShape) -> String {
        megatron(
            model,
            &training(ReduceDtype::Fp32),
            &mesh(2, 1, 1, Recompute::None),
        )
        .unwrap()
    }

    #[test]
    fn megatron_normalises_query_and_key_heads_where_they_were_priced() {
        let plain = catalog::model("llama3-8b").unwrap().shape;
        let normed = ModelShape {
            qk_norm: true,
            ..plain.clone()
        };
        assert!(megatron_args(&megatron_plain(&normed)).contains_key("qk-layernorm"));
        assert!(!megatron_args(&megatron_plain(&plain)).contains_key("qk-layernorm"));
    }

    #[test]
    fn megatron_says_what_a_model_from_a_file_leaves_unset() {
        let model = ModelShape {
            name: "my-model".into(),
            ..catalog::model("llama3-8b").unwrap().shape
        };
        let text = megatron_plain(&model);
        assert!(
            text.contains("# my-model is not a catalog model: --norm-epsilon, --rotary-base and the dropouts are left at Megatron-LM's defaults"),
            "{text}"
        );
        assert!(!megatron_args(&text).contains_key("rotary-base"));
    }

    #[test]
    fn megatron_slides_the_layers_that_were_priced_sliding() {
        use crate::model::AttentionType::{FullAttention as F, SlidingAttention as S};
        let args = |window: Option<u32>, types: Option<Vec<_>>| {
            let model = ModelShape {
                name: "gpt-oss-like".into(),
                sliding_window: window,
                layer_types: types,
                ..catalog::model("llama3-8b").unwrap().shape
            };
            let a = megatron_args(&megatron_plain(&model));
            (
                a.get("window-size").cloned(),
                a.get("window-attn-skip-freq").cloned(),
            )
        };
        // GPT-OSS: layer_types sliding, full, sliding, ...; Megatron-Bridge's provider sets
        // window_size (127, 0) and window_attn_skip_freq 2.
        let gpt_oss = (0..32).map(|i| if i % 2 == 0 { S } else { F }).collect();
        assert_eq!(
            args(Some(128), Some(gpt_oss)),
            (Some(vec!["127,0".into()]), Some(vec!["2".into()]))
        );
        // Mistral 7B: every layer slides.
        assert_eq!(args(Some(4096), None), (Some(vec!["4095,0".into()]), None));
        // No period: the list, 1 for a sliding layer.
        let odd: Vec<_> = (0..32).map(|i| if i < 30 { S } else { F }).collect();
        let (_, freq) = args(Some(128), Some(odd));
        let want = format!("'[{}1,0,0]'", "1,".repeat(29));
        assert_eq!(freq, Some(vec![want]));
        // A window on no layer is no window.
        assert_eq!(args(Some(128), Some(vec![F; 32])), (None, None));
    }

    #[test]
    fn megatron_sets_the_head_width_that_was_priced() {
        // A Qwen3-style head, 128 wide at hidden 2048 and 32 heads: Megatron's default
        // kv-channels would be 64.
        let model = ModelShape {
            head_dim: Some(128),
            ..catalog::model("llama3-8b").unwrap().shape
        };
        let a = megatron_args(
            &megatron(
                &model,
                &training(ReduceDtype::Fp32),
                &mesh(2, 1, 1, Recompute::None),
            )
            .unwrap(),
        );
        assert_eq!(number(&a, "kv-channels"), 128);
    }

    #[test]
    fn megatron_states_deepseek_v3_as_it_was_priced() {
        // MLA's widths, the MTP module, the edge stages and block-scaled fp8 are all priced,
        // so each is a flag (Megatron-LM's `--multi-latent-attention` family,
        // `--mtp-num-layers`, `--decoder-first/last-pipeline-num-layers`, `--fp8-recipe`).
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let t = Training {
            precision: Precision::Fp8Blockwise,
            ..Training::megatron(4096, 15360)
        };
        let m = Mesh {
            tp: 1,
            pp: 16,
            dp: 128,
            cp: 1,
            ep: 64,
            edge_stages: Some(crate::mesh::EdgeStages { first: 3, last: 2 }),
            ..mesh(16, 1, 1, Recompute::Selective)
        };
        let a = megatron_args(&megatron(&model, &t, &m).unwrap());
        assert_eq!(number(&a, "decoder-first-pipeline-num-layers"), 3);
        assert_eq!(number(&a, "decoder-last-pipeline-num-layers"), 2);
        assert_eq!(number(&a, "q-lora-rank"), 1536);
        assert_eq!(number(&a, "kv-lora-rank"), 512);
        assert_eq!(number(&a, "qk-head-dim"), 128);
        assert_eq!(number(&a, "qk-pos-emb-head-dim"), 64);
        assert_eq!(number(&a, "v-head-dim"), 128);
        assert_eq!(number(&a, "mtp-num-layers"), 1);
        assert_eq!(a["fp8-recipe"], ["blockwise"]);
        assert!(a.contains_key("multi-latent-attention"));
        // Megatron-LM has no DualPipe: the layout is refused, not emitted as 1F1B.
        let dual = Mesh {
            schedule: crate::mesh::Schedule::Dualpipe,
            ..m
        };
        let err = megatron(&model, &t, &dual).unwrap_err();
        assert!(err.why.contains("DualPipe"), "{}", err.why);
    }

    #[test]
    fn torchtitan_refuses_the_all_gather_dispatcher_it_does_not_run() {
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let t = Training {
            moe_dispatch: MoeDispatch::AllGather,
            ..training(ReduceDtype::Fp32)
        };
        let m = Mesh {
            ep: 8,
            ..mesh(1, 1, 1, Recompute::None)
        };
        let err = torchtitan(&model, &t, &m).unwrap_err().why;
        assert!(
            err.starts_with("the all-gather dispatcher was priced"),
            "{err}"
        );
    }

    #[test]
    fn megatron_names_the_moe_dispatcher_that_was_priced() {
        // Megatron's default dispatcher all-gathers, which neither price is for.
        let model = catalog::model("mixtral-8x7b").unwrap().shape;
        let m = Mesh {
            ep: 8,
            ..mesh(1, 1, 1, Recompute::None)
        };
        for (dispatch, expect) in [
            (MoeDispatch::AllToAll, vec!["alltoall"]),
            (MoeDispatch::NodeDedup, vec!["flex"]),
            (MoeDispatch::AllGather, vec!["allgather"]),
        ] {
            let t = Training {
                moe_dispatch: dispatch,
                ..training(ReduceDtype::Fp32)
            };
            let a = megatron_args(&megatron(&model, &t, &m).unwrap());
            assert_eq!(a["moe-token-dispatcher-type"], expect);
            assert!(a.contains_key("moe-grouped-gemm"));
            assert_eq!(
                a.get("moe-flex-dispatcher-backend").map(|v| v[0].as_str()),
                (dispatch == MoeDispatch::NodeDedup).then_some("deepep")
            );
            assert!(!a.contains_key("moe-expert-capacity-factor"));
        }
        // A priced capacity and its padding reach Megatron by its own flags.
        let mut capped = model.clone();
        let moe = capped.moe.as_mut().unwrap();
        moe.capacity_factor = Some(1.25);
        moe.pad_to_capacity = true;
        let a = megatron_args(&megatron(&capped, &training(ReduceDtype::Fp32), &m).unwrap());
        assert_eq!(a["moe-expert-capacity-factor"], ["1.25"]);
        assert!(a.contains_key("moe-pad-expert-input-to-capacity"));
        // Transformer Engine's per-expert launches are what the flag runs; a grouped or a
        // looped price is said, since core_v0.19 has no flag that runs it.
        for (gemms, said) in [
            (ExpertGemms::PerExpertStreams, None),
            (
                ExpertGemms::Grouped,
                Some("NVTE_USE_CUTLASS_GROUPED_GEMM=1"),
            ),
            (ExpertGemms::Looped, Some("one after another")),
        ] {
            let t = Training {
                expert_gemms: gemms,
                ..training(ReduceDtype::Fp32)
            };
            let text = megatron(&model, &t, &m).unwrap();
            let note = text.lines().find(|l| l.starts_with("# the experts' GEMMs"));
            match said {
                Some(said) => assert!(note.is_some_and(|n| n.contains(said)), "{text}"),
                None => assert!(note.is_none(), "{text}"),
            }
        }
    }

    #[test]
    fn megatron_folds_the_experts_over_tp_as_priced() {
        // As Megatron-Bridge's MoE recipes run experts under TP (expert_tensor_parallel_size
        // 1): whole, with EP over the TP x DP ranks, where Megatron's default splits each over
        // the TP pair.
        let model = catalog::model("mixtral-8x7b").unwrap().shape;
        let m = Mesh {
            tp: 2,
            dp: 16,
            ep: 8,
            expert_tp: Some(1),
            ..mesh(1, 1, 1, Recompute::None)
        };
        let a = megatron_args(&megatron(&model, &training(ReduceDtype::Fp32), &m).unwrap());
        assert_eq!(number(&a, "expert-tensor-parallel-size"), 1);
        assert_eq!(number(&a, "expert-model-parallel-size"), 8);
        let split = Mesh {
            expert_tp: None,
            ep: 4,
            ..m
        };
        let a = megatron_args(&megatron(&model, &training(ReduceDtype::Fp32), &split).unwrap());
        assert!(!a.contains_key("expert-tensor-parallel-size"));
    }

    #[test]
    fn megatron_runs_combined_1f1b_by_its_flag_and_torchtitan_refuses_it() {
        let model = catalog::model("mixtral-8x7b").unwrap().shape;
        let t = training(ReduceDtype::Fp32);
        let m = Mesh {
            ep: 8,
            schedule: Schedule::Combined1F1B,
            ..mesh(1, 1, 1, Recompute::None)
        };
        let a = megatron_args(&megatron(&model, &t, &m).unwrap());
        assert!(a.contains_key("overlap-moe-expert-parallel-comm"));
        let plain = Mesh {
            schedule: Schedule::OneFOneB,
            ..m
        };
        let a = megatron_args(&megatron(&model, &t, &plain).unwrap());
        assert!(!a.contains_key("overlap-moe-expert-parallel-comm"));
        // torchtitan ships DeepSeek-V3, not Mixtral.
        let deepseek = catalog::model("deepseek-v3").unwrap().shape;
        let err = torchtitan(&deepseek, &t, &m).unwrap_err().why;
        assert!(err.starts_with("combined 1F1B was priced"), "{err}");
    }

    #[test]
    fn megatron_lays_out_uneven_edges_over_virtual_stages_chunk_by_chunk() {
        // DeepSeek-V3 on 4 ranks x 4 chunks with edge stages of 16 and 13 (Megatron-Bridge's
        // GB200 recipe holds the same counts a rank): the last rank's 13 as 4, 3, 3, 3, the
        // MTP module and the loss after the last chunk's layers.
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let m = Mesh {
            ep: 8,
            edge_stages: Some(crate::mesh::EdgeStages {
                first: 16,
                last: 13,
            }),
            ..mesh(4, 4, 1, Recompute::Full)
        };
        let a = megatron_args(&megatron(&model, &training(ReduceDtype::Fp32), &m).unwrap());
        let layout = &a["pipeline-model-parallel-layout"][0];
        let chunks: Vec<&str> = layout.trim_matches('\'').split('|').collect();
        assert_eq!(chunks.len(), 16);
        assert_eq!(chunks[0], "Etttt");
        assert_eq!(chunks[3], "tttt");
        assert_eq!(chunks[7], "ttt");
        assert_eq!(chunks[15], "tttmL");
        let per_rank = |r: usize| {
            (0..4)
                .map(|v| chunks[4 * v + r].matches('t').count())
                .sum::<usize>()
        };
        assert_eq!(
            (per_rank(0), per_rank(1), per_rank(2), per_rank(3)),
            (16, 16, 16, 13)
        );
        // The layout is the one pipeline-layer flag Megatron takes beside it.
        for flag in [
            "num-layers-per-virtual-pipeline-stage",
            "decoder-first-pipeline-num-layers",
            "account-for-loss-in-pipeline-split",
        ] {
            assert!(!a.contains_key(flag), "{flag}");
        }
    }

    #[test]
    fn megatron_splits_uneven_virtual_stages_as_priced() {
        // 126 layers on 8 stages x 8 virtual stages, priced 16 a stage with one fewer on the
        // first and last (issue 31 refused it as inexpressible): Megatron-Core's
        // account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split count
        // the embedding and the loss as a layer each, 128 over 64 chunks of 2
        // (`get_num_layers_to_build`). Qwen3-235B-A22B's recipe lays 94 layers over 8 x 4 so.
        let model = catalog::model("llama3-405b").unwrap().shape;
        let m = mesh(8, 8, 1, Recompute::Full);
        let text = megatron(&model, &training(ReduceDtype::Fp32), &m).unwrap();
        let a = megatron_args(&text);
        assert_eq!(number(&a, "num-layers-per-virtual-pipeline-stage"), 2);
        assert!(a.contains_key("account-for-embedding-in-pipeline-split"));
        assert!(a.contains_key("account-for-loss-in-pipeline-split"));
        assert!(!a.contains_key("decoder-first-pipeline-num-layers"));
        assert_eq!(m.stage_layers(model.layers), 16.0);
        assert!(
            text.contains("# 126 layers do not split evenly over 64 stages"),
            "{text}"
        );
    }

    #[test]
    fn torchtitan_v02_toml_parses_back_into_the_priced_layout() {
        let model = catalog::model("llama3-405b").unwrap().shape;
        let m = mesh(9, 2, 3, Recompute::Full);
        let t = training(ReduceDtype::Fp32);
        let text = torchtitan_v02(&model, &t, &m).unwrap();
        let kv = toml_keys(&text);
        let n = |k: &str| kv[k].parse::<u32>().unwrap();
        assert_eq!(n("tensor_parallel_degree"), m.tp);
        assert_eq!(n("pipeline_parallel_degree"), m.pp);
        assert_eq!(n("context_parallel_degree"), m.cp);
        assert_eq!(n("data_parallel_shard_degree"), m.dp);
        assert_eq!(n("pipeline_parallel_microbatch_size"), m.microbatch_size);
        assert_eq!(
            n("pipeline_parallel_layers_per_stage") * m.pp * m.virtual_stages,
            model.layers
        );
        assert_eq!(kv["pipeline_parallel_schedule"], "Interleaved1F1B");
        assert_eq!(kv["mixed_precision_reduce"], "float32");
        assert_eq!(kv["fsdp_reshard_after_forward"], "default");
        assert_eq!(kv["mode"], "full");
        assert!(!kv.contains_key("selective_ac_option"));
    }

    #[test]
    fn torchtitan_v02_names_the_model_and_the_releases_it_is_for() {
        let text = torchtitan_v02(
            &catalog::model("llama3-70b").unwrap().shape,
            &training(ReduceDtype::Fp32),
            &mesh(1, 1, 3, Recompute::Full),
        )
        .unwrap();
        assert!(text.starts_with("# torchtitan v0.2.0 to v0.2.2"), "{text}");
        assert!(
            text.contains("[model]\nname = \"llama3\"\nflavor = \"70B\"\n"),
            "{text}"
        );
        // v0.2 moved compile out of [training] (issue 30: `Invalid field names in Training`).
        assert!(text.contains("[compile]\nenable = true\n"), "{text}");
        assert!(!text.contains("\ncompile ="), "{text}");
    }

    #[test]
    fn both_torchtitan_forms_refuse_what_it_cannot_run_as_priced() {
        let m = mesh(1, 1, 3, Recompute::Full);
        let emitters: [(&str, &str, Emitter); 2] = [
            ("torchtitan", "0.3", torchtitan),
            ("torchtitan-0.2", "v0.2", torchtitan_v02),
        ];
        for (flag, release, emit) in emitters {
            let err = emit(
                &catalog::model("mixtral-8x7b").unwrap().shape,
                &training(ReduceDtype::Fp32),
                &m,
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.starts_with(&format!(
                    "--emit {flag}: not emitted: torchtitan {release} ships no flavor of \
                     mixtral-8x7b (of the catalog it runs llama3-8b, llama3-70b, llama3-405b, \
                     deepseek-v3, qwen3-30b-a3b, gpt-oss-20b, gpt-oss-120b)"
                )),
                "{err}"
            );
            let err = emit(
                &catalog::model("llama3-8b").unwrap().shape,
                &training(ReduceDtype::Bf16),
                &m,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("price with --grad-reduce fp32"), "{err}");
            let blockwise = Training {
                precision: Precision::Fp8Blockwise,
                ..training(ReduceDtype::Fp32)
            };
            let err = emit(
                &catalog::model("deepseek-v3").unwrap().shape,
                &blockwise,
                &m,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("block-scaled fp8 was priced"), "{err}");
            let dual = Mesh {
                schedule: Schedule::Dualpipe,
                ..mesh(16, 1, 1, Recompute::Full)
            };
            let err = emit(
                &catalog::model("llama3-8b").unwrap().shape,
                &training(ReduceDtype::Fp32),
                &dual,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("DualPipe was priced"), "{err}");
        }
    }

    /// torchtitan 0.3's `--section.key value` overrides, and the activation checkpointing
    /// subcommand that closes them.
    fn titan_args(text: &str) -> (HashMap<String, Vec<String>>, &str) {
        let (body, last) = text.trim_end().rsplit_once('\n').unwrap();
        (megatron_args(body), last)
    }

    #[test]
    fn qwen3_moe_is_written_as_its_config_json_defines_it() {
        // Qwen3-30B-A3B on 16 GPUs, EP 16: Megatron-LM gets the heads 128 wide, the per-head
        // norms, Qwen's rotary base and epsilon and the 128 experts of 768; torchtitan its
        // registered flavor (0.3's qwen3_30b_a3b, v0.2's 30B-A3B).
        let model = catalog::model("qwen3-30b-a3b").unwrap().shape;
        let t = Training::megatron(4096, 1024);
        let m = Mesh {
            tp: 1,
            dp: 16,
            cp: 1,
            ep: 16,
            sequence_parallel: false,
            ..mesh(1, 1, 1, Recompute::None)
        };
        let a = megatron_args(&megatron(&model, &t, &m).unwrap());
        assert!(a.contains_key("qk-layernorm"));
        assert_eq!(number(&a, "kv-channels"), 128);
        assert_eq!(number(&a, "num-query-groups"), 4);
        assert_eq!(number(&a, "rotary-base"), 1_000_000);
        assert_eq!(a["norm-epsilon"], ["0.000001"]);
        assert_eq!(number(&a, "num-experts"), 128);
        assert_eq!(number(&a, "moe-router-topk"), 8);
        assert_eq!(number(&a, "moe-ffn-hidden-size"), 768);
        assert!(!a.contains_key("moe-layer-freq"));
        let titan = Training {
            grad_reduce: ReduceDtype::Fp32,
            moe_dispatch: MoeDispatch::AllToAll,
            ..t.clone()
        };
        let (args, _) = titan_args(&torchtitan(&model, &titan, &m).unwrap());
        assert_eq!(args["module"], ["qwen3"]);
        assert_eq!(args["config"], ["qwen3_30b_a3b"]);
        // Its all-to-all waits for the host, which 0.3's CUDA graphs refuse.
        assert!(args.contains_key("training.disable_cuda_graphs"));
        let toml = toml_keys(&torchtitan_v02(&model, &titan, &m).unwrap());
        assert_eq!(toml["name"], "qwen3");
        assert_eq!(toml["flavor"], "30B-A3B");
        // v0.2 pipelines no Qwen3; 0.3 does.
        let piped = Mesh {
            pp: 2,
            dp: 8,
            ep: 8,
            ..m
        };
        let err = torchtitan_v02(&model, &titan, &piped)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("torchtitan v0.2 splits no qwen3 model"),
            "{err}"
        );
        assert!(torchtitan(&model, &titan, &piped).is_ok());
        // torchtitan's 235B-A22B flavor rotates at another base: not the catalog's model.
        let big = catalog::model("qwen3-235b-a22b").unwrap().shape;
        let err = torchtitan(&big, &titan, &m).unwrap_err().to_string();
        assert!(err.contains("ships no flavor of qwen3-235b-a22b"), "{err}");
    }

    #[test]
    fn gpt_oss_is_written_with_its_own_gating_positions_biases_and_sinks() {
        // GPT-OSS-120B (config.json, Megatron-Bridge's gpt_oss_bridge.py): QuickGELU gating
        // clamped at 7 with the linear half offset by 1, YaRN over 4,096 positions at factor
        // 32, biases kept, learnable softmax sinks, rotary base 150,000, a 128-position window
        // on every other layer.
        let model = catalog::model("gpt-oss-120b").unwrap().shape;
        let t = Training {
            moe_dispatch: MoeDispatch::AllToAll,
            grad_reduce: ReduceDtype::Fp32,
            ..Training::megatron(4096, 1280)
        };
        let m = Mesh {
            tp: 1,
            dp: 16,
            cp: 1,
            ep: 8,
            sequence_parallel: false,
            ..mesh(4, 1, 1, Recompute::None)
        };
        let a = megatron_args(&megatron(&model, &t, &m).unwrap());
        assert!(a.contains_key("quick-geglu") && !a.contains_key("swiglu"));
        assert_eq!(a["activation-func-clamp-value"], ["7"]);
        assert_eq!(a["glu-linear-offset"], ["1"]);
        assert_eq!(a["position-embedding-type"], ["yarn"]);
        assert_eq!(a["rotary-scaling-factor"], ["32"]);
        assert_eq!(number(&a, "yarn-original-max-position-embeddings"), 4096);
        assert!(a.contains_key("no-yarn-correction-range-round-to-int"));
        assert_eq!(number(&a, "rotary-base"), 150_000);
        assert_eq!(a["softmax-type"], ["learnable"]);
        assert!(!a.contains_key("disable-bias-linear"));
        assert_eq!(a["window-size"], ["127,0"]);
        assert_eq!(a["window-attn-skip-freq"], ["2"]);
        // The Llama family keeps SwiGLU, rotary positions and no biases.
        let llama = megatron_args(&megatron_plain(&catalog::model("llama3-8b").unwrap().shape));
        assert!(llama.contains_key("swiglu") && llama.contains_key("disable-bias-linear"));
        assert_eq!(llama["position-embedding-type"], ["rope"]);
        assert!(!llama.contains_key("softmax-type"));
        // torchtitan: 0.3's registry function under a pipeline; v0.2.2 has the model but no
        // pipeline split for it, and v0.2.0 and v0.2.1 lack it.
        let (args, _) = titan_args(&torchtitan(&model, &t, &m).unwrap());
        assert_eq!(args["module"], ["gpt_oss"]);
        assert_eq!(args["config"], ["gpt_oss_120b"]);
        let err = torchtitan_v02(&model, &t, &m).unwrap_err().to_string();
        assert!(err.contains("splits no gpt_oss model"), "{err}");
        let flat = Mesh { pp: 1, dp: 64, ..m };
        let text = torchtitan_v02(&model, &t, &flat).unwrap();
        assert!(text.contains("# gpt_oss ships from v0.2.2 on"), "{text}");
    }

    #[test]
    fn torchtitan_names_the_8b_registry_function_and_overrides_its_layout() {
        // The search's 8B layout on 64 GPUs: FSDP 32 x CP 2, no pipeline, microbatches of 1.
        let m = Mesh {
            tp: 1,
            dp: 32,
            ..mesh(1, 1, 3, Recompute::Selective)
        };
        // Priced as `--emit torchtitan` prices: its steps captured in CUDA graphs.
        let t = Training {
            step_graphs: true,
            ..training(ReduceDtype::Fp32)
        };
        let text = torchtitan(&catalog::model("llama3-8b").unwrap().shape, &t, &m).unwrap();
        assert!(text.starts_with("# torchtitan 0.3.x"), "{text}");
        assert!(
            text.contains("-m torchtitan.train $(grep -v '^#' <this file>)"),
            "{text}"
        );
        let (a, ac) = titan_args(&text);
        assert_eq!(a["module"], ["llama3"]);
        assert_eq!(a["config"], ["llama3_8b"]);
        let n = |k: &str| number(&a, k);
        assert_eq!(n("parallelism.data_parallel_shard_degree"), 32);
        assert_eq!(n("parallelism.data_parallel_replicate_degree"), 1);
        assert_eq!(n("parallelism.context_parallel_degree"), 2);
        assert_eq!(n("parallelism.tensor_parallel_degree"), 1);
        assert_eq!(n("parallelism.pipeline_parallel_degree"), 1);
        assert_eq!(a["parallelism.fsdp_reshard_after_forward"], ["default"]);
        // torchtitan accumulates global / (local x dp) = 32 microbatches, as priced.
        assert_eq!(n("training.local_batch_size"), 1);
        assert_eq!(n("training.global_batch_size"), t.global_batch);
        assert_eq!(
            n("training.global_batch_size") / (n("training.local_batch_size") * 32),
            m.microbatches(t.global_batch)
        );
        assert_eq!(n("training.seq_len"), 8192);
        assert_eq!(a["compile.components"], ["model,loss"]);
        assert!(a.contains_key("compile.enable"));
        // No pipeline, so 0.3's CUDA graphs stay on, as priced; the steps stay the registry's.
        assert!(!a.contains_key("training.disable_cuda_graphs"));
        // A price for eager launches turns them off.
        let eager = Training {
            step_graphs: false,
            ..t.clone()
        };
        let text = torchtitan(&catalog::model("llama3-8b").unwrap().shape, &eager, &m).unwrap();
        assert!(titan_args(&text)
            .0
            .contains_key("training.disable_cuda_graphs"));
        assert!(!a.contains_key("training.steps"));
        assert!(!a.contains_key("parallelism.pipeline_parallel_layers_per_stage"));
        assert_eq!(ac, "activation-checkpoint:selective");
    }

    #[test]
    fn torchtitan_splits_the_70b_pipeline_as_priced_and_says_every_edge() {
        // 80 layers on 8 stages x 5 virtual stages: 2 a stage, no layer off either end,
        // which 0.3 must be told, since it takes one off each by default.
        let m = mesh(8, 5, 1, Recompute::Full);
        let t = training(ReduceDtype::Fp32);
        let text = torchtitan(&catalog::model("llama3-70b").unwrap().shape, &t, &m).unwrap();
        let (a, ac) = titan_args(&text);
        let n = |k: &str| number(&a, k);
        assert_eq!(a["config"], ["llama3_70b"]);
        assert_eq!(n("parallelism.tensor_parallel_degree"), 8);
        assert_eq!(n("parallelism.pipeline_parallel_degree"), 8);
        assert_eq!(
            a["parallelism.pipeline_parallel_schedule"],
            ["Interleaved1F1B"]
        );
        assert_eq!(n("parallelism.pipeline_parallel_layers_per_stage"), 2);
        assert_eq!(
            n("parallelism.pipeline_parallel_first_stage_less_layers"),
            0
        );
        assert_eq!(n("parallelism.pipeline_parallel_last_stage_less_layers"), 0);
        assert_eq!(a["parallelism.fsdp_reshard_after_forward"], ["never"]);
        // Under a pipeline each rank's share of the batch, in microbatches of 1.
        assert_eq!(n("training.local_batch_size"), t.global_batch / m.dp);
        assert_eq!(n("parallelism.pipeline_parallel_microbatch_size"), 1);
        // 0.3 refuses CUDA graphs under a pipeline.
        assert!(a.contains_key("training.disable_cuda_graphs"), "{text}");
        // Async TP was priced with compile.
        assert!(
            a.contains_key("compile.enable_async_tensor_parallel"),
            "{text}"
        );
        assert_eq!(ac, "activation-checkpoint:full");
        // The same split as the v0.2 TOML's.
        let kv = toml_keys(
            &torchtitan_v02(&catalog::model("llama3-70b").unwrap().shape, &t, &m).unwrap(),
        );
        assert_eq!(kv["pipeline_parallel_layers_per_stage"], "2");
    }

    #[test]
    fn torchtitan_takes_fp8_from_the_registry_function_that_sets_it() {
        let m = mesh(1, 1, 1, Recompute::Full);
        let fp8 = |precision| Training {
            precision,
            ..training(ReduceDtype::Fp32)
        };
        let config = |model: &str, t: &Training| {
            torchtitan(&catalog::model(model).unwrap().shape, t, &m)
                .map(|text| titan_args(&text).0["config"][0].clone())
        };
        let rowwise = fp8(Precision::Fp8Rowwise);
        let bf16 = fp8(Precision::Bf16);
        assert_eq!(config("llama3-405b", &rowwise).unwrap(), "llama3_405b");
        assert_eq!(
            config("deepseek-v3", &rowwise).unwrap(),
            "deepseek_v3_671b_float8"
        );
        assert_eq!(config("deepseek-v3", &bf16).unwrap(), "deepseek_v3_671b");
        // 0.3's command line can neither add a converter nor remove one.
        let err = config("llama3-405b", &bf16).unwrap_err().to_string();
        assert!(
            err.starts_with("--emit torchtitan: not emitted: bf16 was priced, and torchtitan 0.3's only config of llama3-405b (llama3_405b) trains in rowwise fp8"),
            "{err}"
        );
        let err = config("llama3-8b", &rowwise).unwrap_err().to_string();
        assert!(
            err.contains(
                "no torchtitan 0.3 config of llama3-8b (llama3_8b) sets a float8 converter"
            ),
            "{err}"
        );
        // Tensorwise scaling runs under v0.2 only.
        let err = config("llama3-8b", &fp8(Precision::Fp8))
            .unwrap_err()
            .to_string();
        assert!(err.contains("use --emit torchtitan-0.2"), "{err}");
        assert!(torchtitan_v02(
            &catalog::model("llama3-8b").unwrap().shape,
            &fp8(Precision::Fp8),
            &m
        )
        .is_ok());
    }

    #[test]
    fn torchtitan_refuses_expert_ranks_its_dense_ranks_cannot_hold() {
        // DDP 8 (ZeRO-0) x CP 2 x TP 8 beside EP 32, each expert whole: 0.3 takes the expert
        // ranks from dp_shard x cp x tp = 16.
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let t = training(ReduceDtype::Fp32);
        let m = Mesh {
            ep: 32,
            expert_tp: Some(1),
            ..mesh(1, 1, 0, Recompute::Full)
        };
        let err = torchtitan(&model, &t, &m).unwrap_err().to_string();
        assert!(err.contains("so EP must divide 16"), "{err}");
        // v0.2 lays them alike (`efsdp = dp_shard x cp x tp / (etp x ep)`).
        let err = torchtitan_v02(&model, &t, &m).unwrap_err().to_string();
        assert!(
            err.contains("torchtitan v0.2 takes the expert ranks") && err.contains("divide 16"),
            "{err}"
        );
        let fits = Mesh { ep: 16, ..m };
        let (a, _) = titan_args(&torchtitan(&model, &t, &fits).unwrap());
        assert_eq!(number(&a, "parallelism.expert_parallel_degree"), 16);
        assert_eq!(number(&a, "parallelism.data_parallel_replicate_degree"), 8);
        // Split as the dense weights, the experts are refused by 0.3, which keeps them whole,
        // and written for v0.2; over 2 of the 8 TP ranks neither can split them.
        let split = Mesh {
            ep: 2,
            expert_tp: None,
            ..m
        };
        let err = torchtitan(&model, &t, &split).unwrap_err().to_string();
        assert!(
            err.contains("torchtitan 0.3 keeps each expert whole"),
            "{err}"
        );
        let toml = toml_keys(&torchtitan_v02(&model, &t, &split).unwrap());
        assert_eq!(toml["expert_tensor_parallel_degree"], "8");
        let quarter = Mesh {
            expert_tp: Some(2),
            ..split
        };
        let err = torchtitan_v02(&model, &t, &quarter)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("torchtitan splits them over 1 or all"),
            "{err}"
        );
    }

    #[test]
    fn both_torchtitan_forms_refuse_stages_torchtitan_cannot_cut() {
        // 61 layers over 16 stages, first and last one layer fewer: 3 a stage, which
        // torchtitan's ceil((61 + 1 + 1) / 3) makes 21 stages.
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let m = mesh(16, 1, 1, Recompute::Full);
        let emitters: [Emitter; 2] = [torchtitan, torchtitan_v02];
        for emit in emitters {
            let err = emit(&model, &training(ReduceDtype::Fp32), &m)
                .unwrap_err()
                .to_string();
            assert!(err.contains("61 layers over 16 stages were priced, which torchtitan's pipeline_parallel_layers_per_stage cannot cut (it would make 21)"), "{err}");
        }
    }

    #[test]
    fn torchtitan_says_async_tp_it_cannot_set_without_compile() {
        let model = catalog::model("llama3-70b").unwrap().shape;
        let t = Training {
            fused_elementwise: false,
            ..training(ReduceDtype::Fp32)
        };
        let text = torchtitan(&model, &t, &mesh(1, 1, 3, Recompute::Full)).unwrap();
        let (a, _) = titan_args(&text);
        assert!(a.contains_key("compile.no-enable"), "{text}");
        assert!(
            a.contains_key("compile.no-enable_async_tensor_parallel"),
            "{text}"
        );
        assert!(
            text.contains("# async TP was priced; torchtitan runs it only under compile"),
            "{text}"
        );
    }

    #[test]
    fn torchtitan_v02_takes_the_priced_edge_stages_off_the_inner_count() {
        // 61 layers on 16 stages as 3 + 14 x 4 + 2: 4 a stage, 1 less on the first and 2 on
        // the last, which torchtitan's ceil((61 + 1 + 2) / 4) makes 16 stages again.
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let m = Mesh {
            edge_stages: Some(crate::mesh::EdgeStages { first: 3, last: 2 }),
            ..mesh(16, 1, 1, Recompute::Full)
        };
        let text = torchtitan_v02(&model, &training(ReduceDtype::Fp32), &m).unwrap();
        let kv = toml_keys(&text);
        assert_eq!(kv["pipeline_parallel_layers_per_stage"], "4");
        assert_eq!(kv["pipeline_parallel_first_stage_less_layers"], "1");
        assert_eq!(kv["pipeline_parallel_last_stage_less_layers"], "2");
        // 9 + 14 x 3 + 10: edges heavier than the inner stages, which torchtitan cannot state.
        let heavy = Mesh {
            edge_stages: Some(crate::mesh::EdgeStages { first: 9, last: 10 }),
            ..m
        };
        assert!(torchtitan_v02(&model, &training(ReduceDtype::Fp32), &heavy).is_err());
    }

    #[test]
    fn torchtitan_v02_splits_the_stages_as_they_were_priced() {
        // torchtitan's own arithmetic (distributed/pipeline_parallel.py, v0.2.2): stages =
        // ceil((layers + first + last) / per_stage), the first stage holding per_stage - first
        // layers. 126 layers: 16 stages uneven (7, 8 x 14, 7), 9 x 2 virtual stages even.
        let model = catalog::model("llama3-405b").unwrap().shape;
        for (m, end_layers) in [
            (mesh(16, 1, 1, Recompute::Full), 7),
            (mesh(9, 2, 1, Recompute::Full), 7),
        ] {
            let text = torchtitan_v02(&model, &training(ReduceDtype::Fp32), &m).unwrap();
            let kv = toml_keys(&text);
            let n = |k: &str| kv[k].parse::<u32>().unwrap();
            let per_stage = n("pipeline_parallel_layers_per_stage");
            let first = n("pipeline_parallel_first_stage_less_layers");
            let last = n("pipeline_parallel_last_stage_less_layers");
            let stages = (model.layers + first + last).div_ceil(per_stage);
            assert_eq!(stages, m.pp * m.virtual_stages, "{text}");
            assert_eq!(per_stage - first, end_layers, "{text}");
            assert_eq!(
                f64::from(per_stage * m.virtual_stages),
                m.stage_layers(model.layers),
                "{text}"
            );
        }
    }

    #[test]
    fn torchtitan_v02_selective_is_the_per_op_policy_that_was_priced() {
        let model = catalog::model("llama3-8b").unwrap().shape;
        let text = torchtitan_v02(
            &model,
            &training(ReduceDtype::Fp32),
            &mesh(1, 1, 3, Recompute::Selective),
        )
        .unwrap();
        assert!(
            text.contains("mode = \"selective\"\nselective_ac_option = \"op\"\n"),
            "{text}"
        );
    }

    #[test]
    fn torchtitan_v02_without_a_pipeline_accumulates_the_priced_microbatches() {
        // 1024 sequences over DP 8 in microbatches of 2: local_batch_size 2, and torchtitan's
        // global / (local x dp) = 64 accumulation steps, the priced microbatch count. Fused
        // elementwise kernels and fp8 were priced, so compile and the float8 converter are on.
        let model = catalog::model("llama3-8b").unwrap().shape;
        let t = Training {
            precision: Precision::Fp8,
            ..training(ReduceDtype::Fp32)
        };
        let m = Mesh {
            microbatch_size: 2,
            ..mesh(1, 1, 3, Recompute::Full)
        };
        let text = torchtitan_v02(&model, &t, &m).unwrap();
        let kv = toml_keys(&text);
        let n = |k: &str| kv[k].parse::<u32>().unwrap();
        assert_eq!(n("local_batch_size"), 2);
        assert_eq!(
            n("global_batch_size") / (n("local_batch_size") * n("data_parallel_shard_degree")),
            m.microbatches(t.global_batch)
        );
        assert!(text.contains("[compile]\nenable = true\n"), "{text}");
        assert_eq!(kv["converters"], "[\"quantize.linear.float8\"]");
    }

    #[test]
    fn torchtitan_v02_states_async_tp_and_the_fp8_recipe_that_were_priced() {
        let model = catalog::model("llama3-70b").unwrap().shape;
        let m = Mesh {
            cp: 1,
            ..mesh(1, 1, 0, Recompute::Full)
        };
        let emit = |precision, tp_comm_overlap| {
            let t = Training {
                precision,
                tp_comm_overlap,
                ..training(ReduceDtype::Fp32)
            };
            torchtitan_v02(&model, &t, &m).unwrap()
        };
        let rowwise = emit(Precision::Fp8Rowwise, true);
        // Each key in its own section.
        let at = |key: &str| rowwise.find(key).unwrap();
        assert!(at("[parallelism]") < at("enable_async_tensor_parallel"));
        assert!(at("enable_async_tensor_parallel") < at("[training]"));
        assert!(at("[quantize.linear.float8]") < at("recipe_name"));
        let kv = toml_keys(&rowwise);
        assert_eq!(kv["enable_async_tensor_parallel"], "true");
        assert_eq!(kv["recipe_name"], "rowwise");
        assert!(
            !kv.contains_key("enable_fsdp_float8_all_gather"),
            "{rowwise}"
        );
        let tensorwise = emit(Precision::Fp8, false);
        let kv = toml_keys(&tensorwise);
        assert!(!kv.contains_key("enable_async_tensor_parallel"));
        assert!(!kv.contains_key("recipe_name"));
        assert_eq!(kv["enable_fsdp_float8_all_gather"], "true");
    }

    #[test]
    fn deepspeed_partitions_activations_only_under_recomputation() {
        let t = training(ReduceDtype::Bf16);
        let parse =
            |m: &Mesh| -> serde_json::Value { serde_json::from_str(&deepspeed(&t, m)).unwrap() };
        let with = parse(&mesh(1, 1, 2, Recompute::Full));
        let without = parse(&mesh(1, 1, 2, Recompute::None));
        assert_eq!(
            with["activation_checkpointing"]["partition_activations"],
            true
        );
        assert_eq!(
            without["activation_checkpointing"]["partition_activations"],
            false
        );
        assert_eq!(with["zero_optimization"]["stage"], 2);
        assert_eq!(with["communication_data_type"], "bf16");
        // dp = 8, one sequence per microbatch.
        assert_eq!(with["gradient_accumulation_steps"], t.global_batch / 8);
    }
}
