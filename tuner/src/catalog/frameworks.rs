//! What each training framework does unless a job says otherwise: its attention kernel, its
//! gradient buckets and reduction type, its loss kernel and the layouts its kernels assume.
//! One row a framework, each fact with its source; the cost model and the defaults of
//! `recommend` and `validate` read these rows instead of matching on the framework.

use record::datasheet::Arch;

use crate::mesh::{
    ExpertGemms, FlashKernel, Framework, LossKernel, Recompute, ReduceDtype, Training,
};

/// How a framework cuts the data-parallel gradients into reduction buckets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bucket {
    /// At least `floor` parameters, and `per_rank` more for each rank of the group.
    Params {
        /// The smallest bucket, parameters.
        floor: f64,
        /// Parameters more a bucket takes per rank of the group.
        per_rank: f64,
    },
    /// A fixed size in bytes, whatever the gradient type.
    Bytes(f64),
}

impl Bucket {
    /// Buckets per step for `params` parameters of `grad_bytes` each over `ranks`.
    pub fn count(self, grad_bytes: f64, params: f64, ranks: u32) -> f64 {
        let bucket = match self {
            Bucket::Params { floor, per_rank } => floor.max(per_rank * f64::from(ranks)),
            Bucket::Bytes(bytes) => bytes / grad_bytes,
        };
        (params / bucket).ceil().max(1.0)
    }
}

/// What a framework or recipe family runs when a job names no ZeRO stage or recomputation:
/// validate prices a run that leaves them null with these where they fit (see
/// `docs/choices.md`, "What a run leaves null").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unsaid {
    /// Who runs these defaults, as the choices name them.
    pub name: &'static str,
    /// The ZeRO stage: the optimizer and parameter sharding it runs unless told.
    pub zero_stage: u8,
    /// Its recomputation; `None` where its default is no mode the model prices.
    pub recompute: Option<Recompute>,
}

/// NeMo 2.0 and Megatron-Bridge recipes, which run Megatron-Core with the distributed
/// optimizer (`use_distributed_optimizer=True` in `distributed_fused_adam_with_cosine_annealing`,
/// `nemo/collections/llm/recipes/optim/adam.py` and Megatron-Bridge's
/// `recipes/utils/optimizer_utils.py`) and Megatron-Core's `recompute_granularity = None`.
pub const MEGATRON_RECIPES: Unsaid = Unsaid {
    name: "NeMo and Megatron-Bridge recipes",
    zero_stage: 1,
    recompute: Some(Recompute::None),
};

/// torchtitan: FSDP2 over every rank left (`data_parallel_shard_degree = -1`) and
/// `ActivationCheckpoint(mode="selective", selective_ac_option="2")`, full recomputation of
/// every second layer (`torchtitan/config/job_config.py`, 2025), which no mode of the model is.
pub const TORCHTITAN: Unsaid = Unsaid {
    name: "torchtitan",
    zero_stage: 3,
    recompute: None,
};

/// One framework's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    /// What it runs when a job names no ZeRO stage or recomputation.
    pub unsaid: Unsaid,
    /// The fused attention kernel it calls.
    pub flash_kernel: FlashKernel,
    /// Whether it overlaps tensor-parallel collectives with their GEMMs by default on GPUs of
    /// an architecture.
    pub tp_comm_overlap: fn(Arch) -> bool,
    /// Number format of its gradient reduction under bf16 training.
    pub grad_reduce: ReduceDtype,
    /// Its loss over the logits.
    pub loss: LossKernel,
    /// Its gradient buckets.
    pub bucket: Bucket,
    /// Whether a sequence-parallel gather or scatter also copies the whole tensor (see
    /// [`Framework::sp_copies`]).
    pub sp_copies: bool,
    /// How its MoE layer runs the GEMMs of the local experts.
    pub expert_gemms: ExpertGemms,
    /// Whether its tensorwise fp8 recipe casts to fp8 before the sequence-parallel
    /// all-gather (see [`Training::tp_gather_bytes`]).
    pub fp8_tp_gather: bool,
    /// Whether its GEMMs read fp8 inputs that its activation memory stores (Transformer
    /// Engine keeps the fp8 copy of each GEMM input for backward).
    pub fp8_saved_inputs: bool,
    /// Whether its SwiGLU is a fused kernel when the rest of the elementwise work is.
    pub fused_glu: bool,
    /// Whether it runs an interleaved (virtual-stage) pipeline schedule.
    pub interleaved_pipeline: bool,
    /// Whether it runs context parallelism (a ring over the sequence).
    pub context_parallel: bool,
    /// Whether it shards gradients or parameters (ZeRO-2/3) under pipeline parallelism.
    pub sharded_pipeline: bool,
    /// Whether it runs combined 1F1B ([`crate::mesh::Schedule::Combined1F1B`]).
    pub combined_1f1b: bool,
}

/// Megatron-LM / Megatron-Core (NeMo, Megatron-Bridge). Attention through Transformer
/// Engine's cuDNN kernel; userbuffers overlap of TP communication on Hopper and newer;
/// `accumulate_allreduce_grads_in_fp32` under bf16; `vocab_parallel_cross_entropy`; buckets
/// of max(40M, 1M x dp) parameters (`megatron/core/distributed/distributed_data_parallel.py`,
/// `bucket_size` default); activations [seq, batch, hidden], so the sequence-parallel
/// collectives write in place; interleaved schedules (`--num-layers-per-virtual-pipeline-stage`)
/// and context parallelism (`--context-parallel-size`). Unless told, no distributed optimizer
/// (`--use-distributed-optimizer` is a `store_true` flag) and no recomputation
/// (`--recompute-granularity` defaults to None), `megatron/training/arguments.py`.
pub const MEGATRON: Defaults = Defaults {
    unsaid: Unsaid {
        name: "Megatron-LM",
        zero_stage: 0,
        recompute: Some(Recompute::None),
    },
    flash_kernel: FlashKernel::Newest,
    tp_comm_overlap: |arch| matches!(arch, Arch::Hopper | Arch::Blackwell),
    grad_reduce: ReduceDtype::Fp32,
    loss: LossKernel::Megatron,
    bucket: Bucket::Params {
        floor: 40e6,
        per_rank: 1e6,
    },
    sp_copies: false,
    expert_gemms: ExpertGemms::PerExpertStreams,
    fp8_tp_gather: false,
    fp8_saved_inputs: true,
    fused_glu: true,
    interleaved_pipeline: true,
    context_parallel: true,
    // Its distributed optimizer shards the optimizer only (ZeRO-1); the ZeRO-2/3 of
    // Megatron-DeepSpeed is DeepSpeed's, which refuses a pipeline (below).
    sharded_pipeline: false,
    // `--overlap-moe-expert-parallel-comm`, Megatron-Core 0.14 and later.
    combined_1f1b: true,
};

/// DeepSpeed and Megatron-DeepSpeed. FlashAttention-2; gradients reduced in the training
/// type; Megatron's loss kernel; one 500M-element reduce bucket (`reduce_bucket_size`); a
/// Python loop over the local experts (`deepspeed/moe/experts.py`); Megatron-DeepSpeed's
/// `swiglu` is eager Python whatever else it fuses. Its pipeline engine runs one schedule,
/// 1F1B without virtual stages (`deepspeed/runtime/pipe/schedule.py`, `TrainSchedule`), and
/// it has no ring context parallelism (its Ulysses sequence parallelism is an all-to-all over
/// heads, which the model does not price). Unless told, ZeRO stage 0 (`zero_optimization.stage`
/// defaults to 0, `deepspeed/runtime/zero/config.py`) and no activation checkpointing
/// (Megatron-DeepSpeed's `--checkpoint-activations` is a `store_true` flag).
pub const DEEPSPEED: Defaults = Defaults {
    unsaid: Unsaid {
        name: "DeepSpeed",
        zero_stage: 0,
        recompute: Some(Recompute::None),
    },
    flash_kernel: FlashKernel::Flash2,
    tp_comm_overlap: |_| false,
    grad_reduce: ReduceDtype::Bf16,
    loss: LossKernel::Megatron,
    bucket: Bucket::Params {
        floor: 5e8,
        per_rank: 0.0,
    },
    sp_copies: false,
    expert_gemms: ExpertGemms::Looped,
    fp8_tp_gather: false,
    fp8_saved_inputs: false,
    fused_glu: false,
    interleaved_pipeline: false,
    context_parallel: false,
    // `PipelineEngine.__init__` asserts `zero_optimization_stage() < ZeroStageEnum.gradients`:
    // "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
    sharded_pipeline: false,
    combined_1f1b: false,
};

/// PyTorch FSDP / FSDP2 (torchtitan, llm-foundry, NeMo AutoModel). FlashAttention-2 through
/// SDPA; `mixed_precision_reduce` fp32; `cross_entropy(logits.float())` run eagerly; DDP's
/// 25 MB buckets (`bucket_cap_mb`) under ZeRO-0..2; DTensor's re-layout copies around each
/// sequence-parallel collective; torchtitan's tensorwise fp8 plan casts before the gather;
/// torchtitan runs interleaved schedules (`pipeline_parallel_schedule = "Interleaved1F1B"`)
/// and context parallelism (`context_parallel_degree`). Unless told, full sharding (FSDP's
/// `sharding_strategy` defaults to `FULL_SHARD`) and no activation checkpointing (FSDP has
/// none of its own; llm-foundry's `fsdp_config.activation_checkpointing` defaults to false);
/// torchtitan's own defaults are [`TORCHTITAN`].
pub const FSDP: Defaults = Defaults {
    unsaid: Unsaid {
        name: "PyTorch FSDP",
        zero_stage: 3,
        recompute: Some(Recompute::None),
    },
    flash_kernel: FlashKernel::Flash2,
    tp_comm_overlap: |_| false,
    grad_reduce: ReduceDtype::Fp32,
    loss: LossKernel::Eager,
    bucket: Bucket::Bytes(25.0 * 1024.0 * 1024.0),
    sp_copies: true,
    expert_gemms: ExpertGemms::Grouped,
    fp8_tp_gather: true,
    fp8_saved_inputs: false,
    fused_glu: true,
    interleaved_pipeline: true,
    context_parallel: true,
    // torchtitan runs FSDP2 under its pipeline schedules (see `cost/memory.rs`).
    sharded_pipeline: true,
    combined_1f1b: false,
};

/// Elements below which DeepSpeed's ZeRO-3 keeps a parameter whole on every rank instead of
/// sharding it (`stage3_param_persistence_threshold`, default 100,000 in
/// `deepspeed/runtime/zero/constants.py` at v0.4.0): LayerNorm weights and biases.
pub const DEEPSPEED_PERSISTENCE_THRESHOLD: f64 = 1e5;

impl Framework {
    /// This framework's row.
    pub fn defaults(self) -> &'static Defaults {
        match self {
            Framework::Megatron => &MEGATRON,
            Framework::Deepspeed => &DEEPSPEED,
            Framework::Fsdp => &FSDP,
        }
    }
}

impl Training {
    /// A job as `framework` runs it by default on GPUs of `arch` (its row above); callers
    /// change what the job says otherwise.
    pub fn for_framework(
        framework: Framework,
        arch: Arch,
        seq_len: u32,
        global_batch: u32,
    ) -> Training {
        let d = framework.defaults();
        Training {
            flash_kernel: d.flash_kernel,
            tp_comm_overlap: (d.tp_comm_overlap)(arch),
            framework,
            grad_reduce: d.grad_reduce,
            loss: d.loss,
            expert_gemms: d.expert_gemms,
            ..Training::megatron(seq_len, global_batch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::{FlashKernel, LossKernel, ReduceDtype};

    #[test]
    fn buckets_follow_each_framework_default() {
        let buckets = |f: Framework, grad_bytes, params, ranks| {
            f.defaults().bucket.count(grad_bytes, params, ranks)
        };
        // Megatron-Core: 40M parameters up to 40 ranks, then 1M per rank.
        assert_eq!(buckets(Framework::Megatron, 4.0, 1e9, 8), 25.0);
        assert_eq!(buckets(Framework::Megatron, 4.0, 1e9, 100), 10.0);
        // DDP's 25 MiB at fp32: 6,553,600 gradients a bucket.
        assert_eq!(buckets(Framework::Fsdp, 4.0, 1e9, 8), 153.0);
        // DeepSpeed's 5e8 elements; never fewer than one.
        assert_eq!(buckets(Framework::Deepspeed, 2.0, 1e9, 8), 2.0);
        assert_eq!(buckets(Framework::Deepspeed, 2.0, 1.0, 8), 1.0);
    }

    #[test]
    fn transformer_engine_overlaps_tp_from_hopper_on() {
        let overlap = |f, arch| Training::for_framework(f, arch, 4096, 512).tp_comm_overlap;
        assert!(overlap(Framework::Megatron, Arch::Hopper));
        assert!(overlap(Framework::Megatron, Arch::Blackwell));
        assert!(!overlap(Framework::Megatron, Arch::Ampere));
        assert!(!overlap(Framework::Fsdp, Arch::Hopper));
        let ds = Training::for_framework(Framework::Deepspeed, Arch::Hopper, 4096, 512);
        assert_eq!(
            (ds.grad_reduce, ds.flash_kernel, ds.loss),
            (ReduceDtype::Bf16, FlashKernel::Flash2, LossKernel::Megatron)
        );
    }
}
