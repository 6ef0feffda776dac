//! A parallel layout (mesh) and the training inputs it runs under.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Activation recomputation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// Keep every activation.
    None,
    /// The framework's selective recomputation: the attention core in Megatron and DeepSpeed
    /// (Korthikanti et al. 2022 §5), torchtitan's per-op policy under FSDP (see
    /// [`Recompute::per_op`]).
    Selective,
    /// Keep each layer's input only and rerun its forward pass in backward.
    Full,
}

impl Recompute {
    /// Whether this is torchtitan's per-op selective checkpointing (`selective_ac_option =
    /// "op"`), which keeps every other matmul output and replays the rest of the layer.
    pub fn per_op(self, framework: Framework) -> bool {
        self == Recompute::Selective && framework == Framework::Fsdp
    }
}

impl fmt::Display for Recompute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        })
    }
}

/// Number format of the matrix multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// bf16 weights and GEMMs, fp32 master weights.
    Bf16,
    /// fp8 GEMMs with one scale per tensor (Transformer Engine, torchao's `tensorwise`), bf16
    /// elsewhere.
    Fp8,
    /// fp8 GEMMs with one scale per row (torchao's `rowwise` recipe, PyTorch's CUTLASS
    /// row-wise `_scaled_mm`), bf16 elsewhere.
    #[serde(rename = "fp8-rowwise")]
    #[value(name = "fp8-rowwise")]
    Fp8Rowwise,
    /// fp8 GEMMs with one scale per 1 x 128 activation tile and 128 x 128 weight block
    /// (DeepSeek-V3 §3.3.2, DeepGEMM; Transformer Engine's `Float8BlockScaling`, Megatron's
    /// `--fp8-recipe blockwise`), activations cached and dispatched in fp8, bf16 elsewhere.
    #[serde(rename = "fp8-blockwise")]
    #[value(name = "fp8-blockwise")]
    Fp8Blockwise,
}

impl Precision {
    /// Whether the GEMMs run on the fp8 tensor cores.
    pub fn is_fp8(self) -> bool {
        self != Precision::Bf16
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Fp8Rowwise => "fp8-rowwise",
            Precision::Fp8Blockwise => "fp8-blockwise",
        })
    }
}

/// The order in which pipeline stages run their microbatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// One forward, one backward per stage (PipeDream-Flush; Narayanan et al. 2021 §2.2.1),
    /// over virtual stages where there are several.
    #[serde(rename = "1f1b")]
    #[value(name = "1f1b")]
    OneFOneB,
    /// DeepSeek-V3's bidirectional pipeline (arXiv 2412.19437 §3.2.1, Table 2): microbatches
    /// enter from both ends, each rank holds two stages, and one microbatch's forward runs
    /// beside another's backward so that the expert-parallel all-to-all of each hides under
    /// the other's compute.
    Dualpipe,
    /// Megatron-Core's combined 1F1B (`--overlap-moe-expert-parallel-comm`, MCore 0.14): 1F1B,
    /// over virtual stages where the pipeline has several stages, that runs one microbatch's
    /// forward beside another's backward layer by layer, so that the expert-parallel
    /// all-to-all of each hides under the other's compute; one more microbatch enters before
    /// the steady state (`get_pp_rank_microbatches`, `megatron/core/pipeline_parallel/
    /// schedules.py`).
    #[serde(rename = "combined-1f1b")]
    #[value(name = "combined-1f1b")]
    Combined1F1B,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Schedule::OneFOneB => "1f1b",
            Schedule::Dualpipe => "dualpipe",
            Schedule::Combined1F1B => "combined-1f1b",
        })
    }
}

/// Layers on the first and the last pipeline stage where they differ from the others, which
/// share the rest evenly (Megatron's `--decoder-first-pipeline-num-layers` and
/// `--decoder-last-pipeline-num-layers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct EdgeStages {
    /// Layers on the first stage.
    pub first: u32,
    /// Layers on the last stage.
    pub last: u32,
}

impl EdgeStages {
    /// Layers on each of the `pp - 2` inner stages of `layers`, which share what the edges
    /// leave; `None` with no inner stage.
    pub fn inner(&self, layers: u32, pp: u32) -> Option<u32> {
        (pp > 2).then(|| (layers - self.first - self.last) / (pp - 2))
    }
}

/// Layers on each kind of pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageLayers {
    /// The first stage, which also holds the embedding.
    pub first: f64,
    /// Each stage between the first and the last.
    pub middle: f64,
    /// The last stage, which also holds the output layer.
    pub last: f64,
}

impl StageLayers {
    /// Layers on the stage that holds the most.
    pub fn most(&self) -> f64 {
        self.first.max(self.middle).max(self.last)
    }
}

/// One hybrid-parallel layout. `tp * cp * dp * pp` is the GPU count; the experts split over
/// `ep` expert-parallel ranks of `expert_tp` tensor-parallel ranks each, which fold over the
/// TP x DP ranks of a stage (`ep x expert_tp` divides `tp x dp`); CP ranks hold the same
/// experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Mesh {
    /// Tensor parallel size.
    pub tp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// Data parallel size (expert parallel ranks are carved out of it).
    pub dp: u32,
    /// Context parallel size.
    pub cp: u32,
    /// Expert parallel size.
    pub ep: u32,
    /// Sequences per microbatch.
    pub microbatch_size: u32,
    /// Virtual stages per pipeline rank (1 = plain 1F1B).
    pub virtual_stages: u32,
    /// ZeRO stage 0-3 (3 = FSDP full sharding).
    pub zero_stage: u8,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// Megatron sequence parallelism (needs tp > 1).
    pub sequence_parallel: bool,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Uneven first and last stages, where set.
    pub edge_stages: Option<EdgeStages>,
    /// Tensor-parallel ranks each expert's weights split over where they are not `tp`
    /// (Megatron-Core's `expert_tensor_parallel_size`, whose default is the TP size; 1 folds
    /// the expert-parallel group over the TP ranks: MoE Parallel Folding, arXiv 2504.14960).
    pub expert_tp: Option<u32>,
}

impl Mesh {
    /// GPUs the mesh uses.
    pub fn gpus(&self) -> u32 {
        self.tp * self.pp * self.dp * self.cp
    }

    /// Layers on the busiest pipeline stage: [`Mesh::stages`]' most.
    pub fn stage_layers(&self, layers: u32) -> f64 {
        self.stages(layers).most()
    }

    /// Layers on each kind of stage. Where the mesh sets its first and last stages the
    /// others share the rest. Otherwise an even split when `pp·v` divides the layers, or the
    /// first and last stage hold one layer fewer (Llama 3 405B: 126 layers on 16 stages,
    /// arXiv 2407.21783 §3.3.2) and the others (layers + 2) / pp, which the cost model prices
    /// on every stage.
    pub fn stages(&self, layers: u32) -> StageLayers {
        match self.edge_stages {
            Some(e) if self.pp > 1 => StageLayers {
                first: f64::from(e.first),
                middle: e.inner(layers, self.pp).map_or(0.0, f64::from),
                last: f64::from(e.last),
            },
            _ => {
                let n = if layers % (self.pp * self.virtual_stages) == 0 {
                    f64::from(layers) / f64::from(self.pp)
                } else {
                    f64::from(layers + 2) / f64::from(self.pp)
                };
                StageLayers {
                    first: n,
                    middle: n,
                    last: n,
                }
            }
        }
    }

    /// Tensor-parallel ranks each expert's weights split over.
    pub fn etp(&self) -> u32 {
        self.expert_tp.unwrap_or(self.tp)
    }

    /// Ranks that hold the same experts and reduce their gradients: the TP x CP x DP ranks of
    /// a stage over `ep x etp` (Megatron-Core's expert data-parallel group, which context-
    /// parallel ranks join as they join the dense gradient group).
    pub fn expert_dp(&self) -> u32 {
        (self.tp * self.cp * self.dp / (self.ep * self.etp())).max(1)
    }

    /// Microbatches per step for a global batch of `global_batch` sequences.
    pub fn microbatches(&self, global_batch: u32) -> u32 {
        global_batch / (self.dp * self.microbatch_size)
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TP{} PP{} DP{}", self.tp, self.pp, self.dp)?;
        if self.cp > 1 {
            write!(f, " CP{}", self.cp)?;
        }
        if self.ep > 1 {
            write!(f, " EP{}", self.ep)?;
        }
        if let Some(etp) = self.expert_tp {
            write!(f, " ETP{etp}")?;
        }
        if self.virtual_stages > 1 {
            write!(f, " v{}", self.virtual_stages)?;
        }
        write!(
            f,
            " mb{} ZeRO-{} rc={}",
            self.microbatch_size, self.zero_stage, self.recompute
        )?;
        if self.sequence_parallel {
            write!(f, " SP")?;
        }
        if let Some(e) = self.edge_stages {
            write!(f, " first{} last{}", e.first, e.last)?;
        }
        if self.schedule != Schedule::OneFOneB {
            write!(f, " {}", self.schedule)?;
        }
        Ok(())
    }
}

/// The training framework whose behaviour the model prices: how the data-parallel gradients are
/// bucketed and which kernels a layer launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// Megatron-LM / Megatron-Core (NeMo): gradients in buckets of max(40M, 1M x dp) parameters
    /// (`megatron/core/distributed/distributed_data_parallel.py`, `bucket_size` default).
    Megatron,
    /// DeepSpeed and Megatron-DeepSpeed: one flat gradient buffer reduced after backward.
    Deepspeed,
    /// PyTorch FSDP / FSDP2 (torchtitan, llm-foundry, NeMo AutoModel): one unit per layer; under
    /// ZeRO-0..2 the DDP default of 25 MB buckets (`bucket_cap_mb`).
    Fsdp,
}

impl Framework {
    /// Whether a sequence-parallel gather or scatter also copies the whole tensor. PyTorch's
    /// DTensor lays activations out [batch, seq, hidden] and shards the sequence on dim 1
    /// (torchtitan's plan: `Shard(1)` to `Replicate()` before attention and the MLP,
    /// `output_layouts=Shard(1)` after them); its functional `all_gather_tensor` gathers on
    /// dim 0 and then runs `torch.cat(torch.chunk(out, n, dim=0), dim=gather_dim)`, and
    /// `reduce_scatter_tensor` cats the chunks the other way before scattering. Megatron and
    /// Megatron-DeepSpeed lay activations out [seq, batch, hidden] so that the sequence is
    /// dim 0 and the collective writes in place.
    pub fn sp_copies(self) -> bool {
        self.defaults().sp_copies
    }
}

impl fmt::Display for Framework {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Framework::Megatron => "megatron",
            Framework::Deepspeed => "deepspeed",
            Framework::Fsdp => "fsdp",
        })
    }
}

/// Number format of the data-parallel gradient reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ReduceDtype {
    /// Gradients reduced in bf16 (Megatron `--grad-reduce-in-bf16`, FSDP `reduce_dtype=bf16`).
    Bf16,
    /// Gradients reduced in fp32: Megatron's default under bf16 (it sets
    /// `accumulate_allreduce_grads_in_fp32`), torchtitan's `mixed_precision_reduce` default.
    Fp32,
}

impl ReduceDtype {
    /// Bytes per gradient element on the wire.
    pub fn bytes(self) -> f64 {
        match self {
            ReduceDtype::Bf16 => 2.0,
            ReduceDtype::Fp32 => 4.0,
        }
    }
}

impl fmt::Display for ReduceDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceDtype::Bf16 => "bf16",
            ReduceDtype::Fp32 => "fp32",
        })
    }
}

/// The fused attention kernel a stack runs, when it runs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FlashKernel {
    /// FlashAttention-1 and its Triton port (2022-2023 stacks such as llm-foundry's
    /// `attn_impl: triton`).
    Flash1,
    /// FlashAttention-2 (PyTorch SDPA, the flash-attn package).
    Flash2,
    /// The architecture's newest kernel: FlashAttention-3 or cuDNN fused attention through
    /// Transformer Engine, which Megatron-Core runs on Hopper.
    Newest,
}

/// How routed tokens reach their experts' GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MoeDispatch {
    /// NCCL all-to-all: every routed copy of a token travels to its expert's GPU (Megatron's
    /// `alltoall` dispatcher, torchtitan's expert parallelism).
    AllToAll,
    /// Each token crosses the network once per node that holds one of its experts and fans
    /// out over NVLink there (DeepSeek-V3, arXiv 2412.19437, §3.2.2; DeepEP and HybridEP
    /// behind Megatron's `flex` dispatcher).
    NodeDedup,
    /// Every rank gathers every token of its expert-parallel group, computes those routed to
    /// its experts, and reduce-scatters the outputs back (Megatron-Core's `allgather`
    /// dispatcher, its default: `MoEAllGatherTokenDispatcher`).
    AllGather,
}

impl fmt::Display for MoeDispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MoeDispatch::AllToAll => "all-to-all",
            MoeDispatch::NodeDedup => "node-dedup",
            MoeDispatch::AllGather => "all-gather",
        })
    }
}

/// How the GEMMs of an MoE layer's local experts run: how many launches a projection takes,
/// each with its host time, and whether their tiles share the SMs. Transformer Engine's
/// `GroupedLinear` (Megatron-Core's `--moe-grouped-gemm`) launches one cuBLAS GEMM per expert
/// by default: `general_grouped_gemm` reaches `nvte_multi_tensor_gemm` and from there
/// `multi_stream_cublas_gemm`, round-robin over four streams, with a Python loop over the
/// experts for their weights' fp8 copies (NVIDIA/TransformerEngine at d0067d0, 2026-08:
/// `module/grouped_linear.py`, `common/gemm/cublaslt_gemm.cu`). Its one-launch grouped-tensor
/// path is opt-in (`use_grouped_tensor`; Megatron-Core's `moe_use_grouped_tensor` defaults to
/// False, NVIDIA/Megatron-LM at d98e8a6), as is the CUTLASS kernel that
/// `NVTE_USE_CUTLASS_GROUPED_GEMM=1` picks for bf16 on Hopper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ExpertGemms {
    /// One grouped launch a projection, its tiles spread over the SMs together
    /// (torchtitan's `torch._grouped_mm`, DeepGEMM, Transformer Engine's grouped-tensor path).
    Grouped,
    /// One GEMM launch per expert over several streams, whose tiles still share the SMs
    /// (Transformer Engine's `GroupedLinear` by default).
    #[value(name = "per-expert")]
    #[serde(rename = "per-expert")]
    PerExpertStreams,
    /// One GEMM per expert after another on one stream (DeepSpeed-MoE's loop).
    Looped,
}

/// The kernels of the loss over the logits, which read and write every logit a different
/// number of times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossKernel {
    /// Megatron's `vocab_parallel_cross_entropy`, a separate fp32 kernel per operation:
    /// Megatron-Core's default (`cross_entropy_loss_fusion` off), Megatron-LM and
    /// Megatron-DeepSpeed.
    Megatron,
    /// PyTorch's `cross_entropy(logits.float())` run eagerly: torchtitan, Hugging Face models.
    Eager,
    /// One fused kernel each way: flash-attn's `xentropy` (llm-foundry's default
    /// `fused_crossentropy`), Transformer Engine's (Megatron-Core's
    /// `--cross-entropy-loss-fusion`, on in Megatron-Bridge's recipes).
    Fused,
}

/// How ZeRO-3 brings a layer's sharded parameters in before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParamFetch {
    /// One all-gather per layer, prefetched behind the compute before it: FSDP's flat
    /// parameter units and DeepSpeed's coalesced fetch (v0.6.0, March 2022, and later).
    Coalesced,
    /// One all-gather per layer, but in backward issued only from the post-backward hook of
    /// the layer after it: FSDP1's `BackwardPrefetch.BACKWARD_POST`, Composer's default
    /// (`composer.utils.FSDPConfig(backward_prefetch='BACKWARD_POST')`), which llm-foundry
    /// trains with; PyTorch's FSDP docs: it "overlaps the current reduce-scatter and the next
    /// gradient computation", not the gather. The hook fires once the host has issued that
    /// layer's gradient kernels, and Composer's `limit_all_gathers` holds the host to a layer
    /// or two ahead of the GPU, so how much of the gather still overlaps depends on how far
    /// ahead the host runs. Priced at the bound where it runs none ahead: the backward's
    /// gather exposed whole, the reduce-scatter hidden. MPT-70B's two runs, 0.5% and 3.3%
    /// too fast so priced, support the bound; nothing measures the overlap left.
    PostBackward,
    /// DeepSpeed before v0.6.0 (`deepspeed/runtime/zero/partition_parameters.py` and
    /// `stage3.py` at v0.4.0): one all-gather per parameter tensor above the persistence
    /// threshold. `_allgather_param` calls `torch.cuda.synchronize()` before each, and the
    /// module waits for its gathers before it runs. Every gather and gradient reduce-scatter
    /// passes a list with one tensor per rank, which DeepSpeed builds with one `narrow` per
    /// rank and c10d copies entry by entry. The model exposes every call; what that leaves
    /// out is in [`crate::cost::timing`]'s `data_parallel`.
    PerTensor,
}

record::named_enum! {
    /// The optimizer, whose state the memory model sizes.
    Optimizer, "optimizer" {
        /// Mixed-precision Adam, the only one modelled.
        Adam => "adam",
    }
}

/// What the job trains on, independent of the layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Training {
    /// Sequence length.
    pub seq_len: u32,
    /// Global batch in sequences.
    pub global_batch: u32,
    /// GEMM precision.
    pub precision: Precision,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Fused (flash) attention, which never stores the s x s score matrix.
    pub flash_attention: bool,
    /// Data-parallel gradient reduction overlaps the backward pass (Megatron
    /// `--overlap-grad-reduce`, PyTorch DDP buckets). Megatron-LM before 2023 could not.
    pub overlap_grad_reduce: bool,
    /// Which fused attention kernel, when `flash_attention`.
    pub flash_kernel: FlashKernel,
    /// Tensor-parallel collectives overlap the GEMMs they feed (Transformer Engine's
    /// userbuffers, Megatron `--tp-comm-overlap`; torchtitan's async TP).
    pub tp_comm_overlap: bool,
    /// Norms, rotary, gating and residuals run as fused kernels (Transformer Engine, Apex,
    /// llm-foundry's low-precision LayerNorm, torch.compile), not as eager PyTorch ops.
    pub fused_elementwise: bool,
    /// The framework whose bucketing and kernels are priced.
    pub framework: Framework,
    /// Number format of the gradient reduction.
    pub grad_reduce: ReduceDtype,
    /// How ZeRO-3 gathers parameters.
    pub param_fetch: ParamFetch,
    /// How the loss over the logits runs.
    pub loss: LossKernel,
    /// How MoE tokens reach their experts.
    pub moe_dispatch: MoeDispatch,
    /// How the local experts' GEMMs are launched.
    pub expert_gemms: ExpertGemms,
    /// The framework captures each step's forward and backward in CUDA graphs where the
    /// layout lets it (torchtitan 0.3's default, `training.disable_cuda_graphs = False`): the
    /// host then launches a graph, not each kernel ([`Training::step_captured`]).
    pub step_graphs: bool,
}

impl Training {
    /// A job as Megatron-Core runs it by default on current GPUs: bf16, cuDNN fused attention,
    /// overlapped gradient reduction and TP communication, fp32 gradient reduction, fused
    /// elementwise kernels, mixed-precision Adam. Callers change what differs.
    pub fn megatron(seq_len: u32, global_batch: u32) -> Training {
        Training {
            seq_len,
            global_batch,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            flash_attention: true,
            overlap_grad_reduce: true,
            flash_kernel: FlashKernel::Newest,
            tp_comm_overlap: true,
            fused_elementwise: true,
            framework: Framework::Megatron,
            grad_reduce: ReduceDtype::Fp32,
            param_fetch: ParamFetch::Coalesced,
            loss: LossKernel::Megatron,
            moe_dispatch: MoeDispatch::AllToAll,
            expert_gemms: ExpertGemms::PerExpertStreams,
            step_graphs: false,
        }
    }

    /// Whether a step of `mesh` over `model` runs as captured CUDA graphs. torchtitan 0.3
    /// captures none under a pipeline, nor beside an expert-parallel dispatcher that waits for
    /// the host, as the all-to-all does (`_validate_cuda_graphs`, `torchtitan/trainer.py`).
    pub fn step_captured(&self, mesh: &Mesh, moe: bool) -> bool {
        self.step_graphs && mesh.pp == 1 && !(moe && mesh.ep > 1)
    }

    /// Whether each sequence-parallel gather and scatter carries DTensor's re-layout copy
    /// ([`Framework::sp_copies`]): not under async TP, whose fused gather-matmul and
    /// matmul-scatter take the sharded layout as it is.
    pub fn sp_relayout_copies(&self) -> bool {
        self.framework.sp_copies() && !self.tp_comm_overlap
    }

    /// Tokens in one global batch.
    pub fn tokens_per_step(&self) -> f64 {
        f64::from(self.global_batch) * f64::from(self.seq_len)
    }
}
