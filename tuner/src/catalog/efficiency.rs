//! Achieved efficiencies: what real kernels and collectives reach against the datasheet.
//!
//! These figures are kept apart from the datasheet figures in `gpus.rs` on purpose: datasheets
//! are what the vendor promises, these are what software gets. Kernel figures are per GPU
//! architecture and each cites a public measurement of that kernel on that GPU; link figures
//! cite nccl-tests and NCCL's own tuning model. Six figures have no such measurement behind
//! them and are fitted once, globally, to every published run (`tuner validate --fit`): the
//! rows of [`FITTED`], `host_s_per_kernel`, `host_bwd_share`, `recompute_pass`,
//! `network_busbw`, `tier_contention` and `straggler_sigma`. `tuner validate
//! --leave-one-source-out` says how they generalise.

use super::gpus::Arch;

/// Kernel efficiencies of one GPU architecture.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchKernels {
    /// Fraction of the dense bf16 peak that a large, well-shaped cuBLAS GEMM reaches.
    pub gemm_peak: f64,
    /// The same for fp8 GEMMs against the dense fp8 peak.
    pub fp8_gemm_peak: f64,
    /// Output tile of the large-GEMM kernels (rows, columns), which sets the wave quantization.
    pub tile: (f64, f64),
    /// Fraction of the bf16 peak that FlashAttention-1 (and its Triton port) reaches, forward
    /// and backward together, on the FLOPs it executes.
    pub flash1: f64,
    /// Fraction of the bf16 peak that FlashAttention-2 reaches, forward and backward together,
    /// on the FLOPs it executes (causal: half the square).
    pub flash2: f64,
    /// The same for the architecture's newest fused kernel (FlashAttention-3 / cuDNN fused
    /// attention on Hopper), where one exists.
    pub flash3: f64,
    /// Fraction of HBM bandwidth that memory-bound kernels reach.
    pub memory: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

/// Per-architecture kernel figures.
pub fn arch_kernels(arch: Arch) -> &'static ArchKernels {
    match arch {
        Arch::Ampere => &AMPERE,
        Arch::Ada => &ADA,
        Arch::Hopper => &HOPPER,
        Arch::Blackwell => &BLACKWELL,
    }
}

const AMPERE: ArchKernels = ArchKernels {
    flash1: 0.33,
    gemm_peak: 0.86,
    fp8_gemm_peak: 0.86,
    tile: (256.0, 128.0),
    flash2: 0.56,
    flash3: 0.56,
    memory: 0.87,
    source: "cuBLAS fp16/bf16 8192^3 on A100 SXM: 265-275 of 312 TFLOP/s (NVIDIA Matrix Multiplication \
             Background guide, Fig. 'A100 GEMM performance'; 256x128 CTA tiles); FlashAttention-2 \
             (Dao 2023, arXiv 2307.08691, Fig. 4): fwd+bwd causal, head dim 64-128, 160-190 TFLOP/s, \
             FlashAttention-1 90-110 and its Triton port 75-105 in the same figure (non-causal \
             panels; causal at head dim 128 and 16k tokens, FlashAttention-1 83, the Triton port 80: \
             llm-foundry's A100 rows, which ran the port, fit the 0.33 plateau, not the cell); \
             STREAM-style copy and triad kernels (BabelStream) reach 87-90% of HBM bandwidth on \
             A100",
};

const ADA: ArchKernels = ArchKernels {
    flash1: 0.28,
    gemm_peak: 0.70,
    fp8_gemm_peak: 0.65,
    tile: (128.0, 128.0),
    flash2: 0.45,
    flash3: 0.45,
    memory: 0.85,
    source: "L40S is power-limited at 350 W: cuBLAS bf16 reaches ~250 of 362 TFLOP/s (NVIDIA L40S \
             product brief, 'up to 1.2x A100' training); FlashAttention-2 on Ada as on Ampere less \
             the power cap",
};

const HOPPER: ArchKernels = ArchKernels {
    flash1: 0.1718,
    gemm_peak: 0.76,
    fp8_gemm_peak: 0.66,
    tile: (128.0, 256.0),
    flash2: 0.33,
    flash3: 0.52,
    memory: 0.86,
    source: "cuBLAS bf16 on H100 SXM 700 W: 720-760 of 989 TFLOP/s on 8192-wide GEMMs, fp8 ~1300 of \
             1979 (SemiAnalysis 'MI300X vs H100/H200' training benchmark, Dec 2024; this repo's H200 \
             device reference 790 TFLOP/s through torch.matmul); FlashAttention-3 paper (Shah et al. \
             2024, arXiv 2407.08608, Figs. 5-6, H100 SXM5, head dim 128, 4k-16k tokens): FA2 fwd \
             330-340 and bwd 310-322 TFLOP/s, which weighted 1:2.5 by FLOPs is 0.33 of peak; FA3 / \
             cuDNN fwd 600-740 / bwd 499-561 TFLOP/s; FlashAttention-1 generation (llm-foundry's \
             Triton port, no Hopper measurement of its own): Ampere's 0.33 plateau times the \
             H100/A100 ratio the FlashAttention-2 paper measures for FlashAttention-1 in one cell, \
             causal, head dim 128, fwd+bwd at 16k tokens (Fig. 4 on A100 83, the repository's \
             assets/flash2_h100_fwd_bwd_benchmark.png on H100 SXM5 137 TFLOP/s), assuming the \
             ratio carries to the port: 102.96 x 137/83 = 170 TFLOP/s, 0.1718; STREAM 2.9 of \
             3.35 TB/s",
};

/// FlashAttention-2 on Blackwell against the bf16 peak, fwd+bwd: see [`BLACKWELL`]'s source.
const BLACKWELL_FLASH2: f64 = 0.155;

const BLACKWELL: ArchKernels = ArchKernels {
    // No measurement of FlashAttention-1 or its Triton port on Blackwell: Hopper's ratio of
    // it to FlashAttention-2 (0.1718 / 0.33), applied to Blackwell's measured FlashAttention-2.
    // Both generations run the mma.sync instructions of Ampere, not Blackwell's tcgen05, so
    // neither gains from the new tensor cores; Hopper's 0.1718 as it stood priced it above
    // FlashAttention-2 on Blackwell.
    flash1: HOPPER.flash1 * BLACKWELL_FLASH2 / HOPPER.flash2,
    gemm_peak: 0.764,
    fp8_gemm_peak: 0.744,
    tile: (256.0, 256.0),
    flash2: BLACKWELL_FLASH2,
    flash3: 0.536,
    memory: 0.86,
    source:
        "GEMM: stas00/ml-engineering compute/accelerator/README.md, 'Maximum Achievable Matmul \
         FLOPS comparison table' (mamf-finder.py: torch.matmul, i.e. cuBLAS, best of a shape \
         sweep, mean of 100 runs after 50 warm-ups): bf16 B200 1745.0 of 2250 TFLOP/s \
         (1792x16128x3072, torch 2.7.1+cu128), B300 1769.0 of 2250 (torch 2.9.1+cu130), GB200 \
         1822.0 of 2500 (torch 2.10 dev+cu130): 0.776, 0.786, 0.729, mean 0.764; fp8 e4m3 B200 \
         3432.5 of 4500, B300 3353.3 of 4500, GB200 3615.6 of 5000: 0.763, 0.745, 0.723, mean \
         0.744. The same table has the H100 SXM at 0.803 bf16 and 0.709 fp8 where this catalog \
         prices Hopper at 0.76 and 0.66 from sustained 8192-wide GEMMs; Azure's sustained cuBLASLt \
         fp8 8192^3 on GB200 (Azure/AI-benchmarking-guide, ND_GB200_v6_results.md, 10,000 \
         warm-ups, driver 570.133) reaches 2876.6 of 5000, 0.575, so Blackwell fp8 may price fast \
         under sustained load. Attention: NVIDIA/cudnn-frontend \
         benchmark/sdpa_benchmark_training/artifacts (causal, head dim 128, 128 query and 8 kv \
         heads, batch 1, 16k tokens, backward counted at 2.5x the forward's FLOPs; fwd+bwd \
         weighted 1:2.5): cuDNN 9.13 on B200 fwd 1332.4 / bwd 1074.8 TFLOP/s, 1137.6 of 2250, \
         0.506; cuDNN 9.17 on GB200 1668 / 1304, 1390.7 of 2500, 0.556; cuDNN 9.13 on GB300 1702.5 \
         / 1267.8, 1367.6 of 2500, 0.547: mean 0.536 (flash3, the architecture's newest fused \
         kernel; FlashAttention-4's paper, arXiv 2603.05451, reports up to 1.3x cuDNN 9.13 and \
         1613 TFLOP/s on B200, not used: its per-shape forward and backward figures were not \
         found); flash_attn 2.7.4.post1 on B200 425.1 / 336.6, 357.9 of 2250, 0.159; PyTorch's \
         FlashAttention-2 backend on GB200 430 / 352, 371.2 of 2500, 0.148; flash_attn on GB300 \
         464.5 / 369.0, 392.0 of 2500, 0.157: mean 0.155 (flash2; Azure's GB200 FlashAttention-2 \
         figure, 373.9 TFLOP/s at 8k tokens, agrees). The batch-1 sweep is not the \
         16k-tokens-a-call convention of the Hopper length curve below 16k, so Blackwell keeps its \
         plateau. FlashAttention-1: no measurement, derived (see flash1). Memory: no B200 \
         copy-bandwidth sweep found; Hopper's 0.86 kept. Tile: CUTLASS's 2-SM 256x256 tcgen05 \
         tiles",
};

/// Kernel and collective efficiencies used by the nominal compute and collective models.
#[derive(Debug, Clone, PartialEq)]
pub struct Efficiency {
    /// Bytes moved by memory-bound kernels per token, per layer and per unit of hidden width
    /// in one forward pass (LayerNorms, residual adds, dropout, rotary, bias).
    pub elementwise_bytes_per_hidden: f64,
    /// The same per unit of MLP width (activation function, gating).
    pub elementwise_bytes_per_ffn: f64,
    /// Memory-bound traffic of an eager PyTorch layer (norms, rotary and gating as separate
    /// kernels with fp32 upcasts) against Megatron-Core's fused one.
    pub eager_elementwise: f64,
    /// Host time to issue one kernel or collective of a forward pass (Python, framework and
    /// CUDA launch); a layer pass takes at least its kernel count times this. Fitted.
    pub host_s_per_kernel: f64,
    /// Host time per kernel of a backward pass against a forward one: autograd's engine walks
    /// the graph in C++ on a thread of its own and enters Python only for custom
    /// `autograd.Function`s, without the `nn.Module` calls and hooks that a forward pass (and
    /// its replay under recomputation) runs. Fitted, not derived.
    pub host_bwd_share: f64,
    /// Host time per rank of a collective handed one tensor per rank (a list), as c10d's
    /// `ProcessGroupNCCL` copies the list entry by entry.
    pub list_host_s_per_rank: f64,
    /// Share of its throughput that compute loses while a collective runs beside it: NCCL's
    /// kernels hold SMs (one CTA per channel) and stream through the HBM the GEMMs read.
    pub overlap_slowdown: f64,
    /// Relative spread (1 sigma) of one GPU's step time across a job; a synchronous step waits
    /// for the slowest of N, mean + sigma x sqrt(2 ln N) for N normal draws. Fitted.
    pub straggler_sigma: f64,
    /// Cost of the recomputation forward pass against a plain forward pass.
    pub recompute_pass: f64,
    /// Bytes of optimizer traffic per parameter in a fused Adam step.
    pub optimizer_bytes_per_param: f64,
    /// Max-over-mean token load of the busiest expert where the router does not drop tokens.
    pub moe_imbalance: f64,
    /// All-reduce bus bandwidth over NVLink against the NVLink line rate.
    pub nvlink_busbw: f64,
    /// Bus bandwidth through PCIe switches against the PCIe x16 line rate.
    pub pcie_busbw: f64,
    /// Bus bandwidth over the scale-out fabric against the NIC line rate, inside a job.
    pub network_busbw: f64,
    /// Bandwidth lost per fabric tier a collective crosses above the first (leaf) tier: ECMP
    /// hash collisions on the uplinks. Fitted.
    pub tier_contention: f64,
    /// The same in a sweep on an idle fabric, which is what nccl-tests and calibration
    /// measure; measured inter-node figures are priced at `network_busbw / network_idle_busbw`
    /// of themselves.
    pub network_idle_busbw: f64,
}

/// One fitted efficiency: its field, the value the global fit chose (the catalog's), the
/// prior the fit starts from, and the range it may take. Each row's comment cites the prior
/// and says what the fit found.
pub struct Knob {
    /// Field name in [`Efficiency`].
    pub name: &'static str,
    /// The field.
    pub field: fn(&mut Efficiency) -> &mut f64,
    /// The global fit's value, [`NOMINAL`]'s.
    pub value: f64,
    /// Where the fit starts, [`PRIOR`]'s.
    pub prior: f64,
    /// Lowest and highest value the fit may choose.
    pub range: (f64, f64),
}

/// The fitted efficiencies, one row each; every other figure of the catalog cites a
/// measurement.
pub const FITTED: &[Knob; 6] = &[
    HOST_S_PER_KERNEL,
    HOST_BWD_SHARE,
    RECOMPUTE_PASS,
    NETWORK_BUSBW,
    TIER_CONTENTION,
    STRAGGLER_SIGMA,
];

/// Prior: PyTorch eager dispatch costs 5-20 us of host time per operator and a CUDA launch
/// 3-5 us (PyTorch performance tuning guide, "CUDA graphs"). Fitted globally (`tuner
/// validate --fit` on data/*.yaml): 57.3 us per counted kernel of a forward pass, which
/// covers the uncounted views, copies and hooks of an eager layer; only vTrain's
/// launch-bound runs pin it.
pub const HOST_S_PER_KERNEL: Knob = Knob {
    name: "host_s_per_kernel",
    field: |e| &mut e.host_s_per_kernel,
    value: 57.29e-6,
    prior: 10e-6,
    range: (2e-6, 80e-6),
};

/// Prior 0.5: PyTorch's autograd engine (`torch/csrc/autograd/engine.cpp`) runs the
/// backward graph on a per-device thread and calls C++ derivatives for built-in ops; Python
/// runs only in custom `autograd.Function`s (Megatron's and Transformer Engine's have
/// them), never `nn.Module.__call__` or its hooks, so a backward kernel carries fewer
/// Python frames than a forward one. No measurement gives the ratio. Fitted globally:
/// 0.557, 32 us a backward kernel. With one host rate for both passes a layer would flip
/// from host-bound to GPU-bound at one microbatch size for all its passes; vTrain's runs
/// show the forward turning GPU-bound later than the backward (what the share did to the
/// scores: `docs/history.md`, "The global fit").
pub const HOST_BWD_SHARE: Knob = Knob {
    name: "host_bwd_share",
    field: |e| &mut e.host_bwd_share,
    value: 0.5570,
    prior: 0.5,
    range: (0.1, 1.0),
};

/// Korthikanti et al. 2022 Table 4 time the replay of a 22B layer at 7.6 ms against a
/// 7.7 ms forward (0.99). Fitted globally it lands at 0.80: the full-recompute runs
/// (vTrain's, llm-foundry's, Korthikanti's) come out slower than measured with 0.99, and
/// the fit takes that out of the one knob they share; what the 0.19 below Korthikanti's
/// figure stands in for is not found yet.
pub const RECOMPUTE_PASS: Knob = Knob {
    name: "recompute_pass",
    field: |e| &mut e.recompute_pass,
    value: 0.8052,
    prior: 0.94,
    range: (0.6, 1.0),
};

/// Scale-out: InfiniBand NDR/HDR nccl-tests busbw reaches ~90% of line rate on an idle
/// fabric and one rail (network_idle_busbw); jobs that drive every rail at once, across a
/// multi-level fat tree shared with their own pipeline traffic, see less. No public sweep
/// measures that in-job share: fitted globally, 0.550 of line rate under one leaf.
pub const NETWORK_BUSBW: Knob = Knob {
    name: "network_busbw",
    field: |e| &mut e.network_busbw,
    value: 0.5497,
    prior: 0.68,
    range: (0.4, 0.9),
};

/// Prior 10% per tier: multi-tier Clos fabrics lose bandwidth to ECMP hash collisions and
/// polarization on the uplinks (Qian et al., "Alibaba HPN", SIGCOMM 2024, §2; Gangidi et
/// al., "RDMA over Ethernet for distributed training at Meta scale", SIGCOMM 2024, §5).
/// Fitted globally: 0, the bottom of its range. The runs pin it weakly, trading it against
/// the in-job share above (how it moved as other terms changed: `docs/history.md`, "The
/// global fit"); runs from larger fabrics would pin it.
pub const TIER_CONTENTION: Knob = Knob {
    name: "tier_contention",
    field: |e| &mut e.tier_contention,
    value: 0.0,
    prior: 0.10,
    range: (0.0, 0.5),
};

/// Prior: Sinha et al. 2022 ("Not all GPUs are created equal", SC'22) measure 1-3% spread
/// of the same kernel across the A100s/V100s of production clusters. Fitted globally: 2.3%,
/// inside that range; a 6,144-GPU step waits 4.2 sigma, 10%, longer than its mean GPU.
pub const STRAGGLER_SIGMA: Knob = Knob {
    name: "straggler_sigma",
    field: |e| &mut e.straggler_sigma,
    value: 0.02295,
    prior: 0.01,
    range: (0.0, 0.05),
};

/// The catalog efficiencies.
pub const NOMINAL: Efficiency = Efficiency {
    // Korthikanti et al. 2022 (arXiv 2205.05198) §4.1 count 34 bytes of stored activations per
    // token and unit of h per layer; the memory-bound kernels that produce them (LayerNorm,
    // dropout, residual adds, bias) read their inputs and write them, ~43 bytes per h in a
    // forward pass, plus 16 per unit of MLP width for GeLU/SwiGLU (read 2 + write 2 bytes per
    // element, 4 passes over the MLP activations).
    elementwise_bytes_per_hidden: 43.0,
    elementwise_bytes_per_ffn: 16.0,
    // An eager RMSNorm is 4 kernels over fp32 copies (pow, mean, rsqrt-mul, weight-mul)
    // where Apex/TE run one; eager RoPE 4 over q and k; eager SwiGLU 3 over the MLP width:
    // about twice the fused layer's bytes (torchtitan's float8/compile notes: compile fuses
    // these and gains 13-15% on Llama 3 8B).
    eager_elementwise: 2.0,
    host_s_per_kernel: HOST_S_PER_KERNEL.value,
    host_bwd_share: HOST_BWD_SHARE.value,
    // c10d's list all-gather copies the flat NCCL output into each of the ranks' tensors, and
    // its list reduce-scatter copies each into a flat input, one `copy_` per rank
    // (`ProcessGroupNCCL::allgather`, `flatten_for_scatter_gather`); the copies are tiny, so
    // each costs its host dispatch and launch: the low end of the prior above, 5 us. Not fitted.
    list_host_s_per_rank: 5e-6,
    // Lee et al. 2025 ("Characterizing compute-communication overlap in GPU-accelerated
    // distributed deep learning", arXiv 2507.03114) time GPT and Llama layers on A100, H100,
    // MI250 and MI210 with and without a collective beside them: overlapped compute runs 18.9%
    // slower on average (40% at most), so it keeps 1/1.189 of its throughput while the
    // collective runs and loses 0.159. That matches NCCL's footprint: an FSDP all-gather
    // launches 24 CTAs, one per channel, on H100's 132 SMs (18%), and every wave of a GEMM
    // sized to the SMs waits on the SMs it holds.
    overlap_slowdown: 1.0 - 1.0 / 1.189,
    straggler_sigma: STRAGGLER_SIGMA.value,
    recompute_pass: RECOMPUTE_PASS.value,
    // Fused Adam (apex / torch foreach): read fp32 param, grad, m, v; write param, m, v and
    // the bf16 copy: 4+4+4+4 read, 4+4+4+2 write, ~32 bytes.
    optimizer_bytes_per_param: 32.0,
    // Switch Transformer's training capacity factor (Fedus et al. 2021, arXiv 2101.03961,
    // §2.2: 1.25): the busiest expert carries a quarter more than the mean.
    moe_imbalance: 1.25,
    // nccl-tests all_reduce_perf on DGX A100: ~230-240 GB/s busbw of 300 GB/s; DGX H100
    // ~360 GB/s of 450 without NVLS (NVIDIA NCCL performance blog, 2023).
    nvlink_busbw: 0.78,
    // PCIe gen4 peer copies reach ~25 of 31.5 GB/s through a PCIe switch.
    pcie_busbw: 0.75,
    network_busbw: NETWORK_BUSBW.value,
    tier_contention: TIER_CONTENTION.value,
    network_idle_busbw: 0.90,
};

/// The catalog before the global fit: the fitted knobs at their priors (see [`FITTED`]). `tuner validate --fit` and `--leave-one-source-out` start here, so a held-out
/// source never leaks into the fit through the starting point.
pub const PRIOR: Efficiency = Efficiency {
    host_s_per_kernel: HOST_S_PER_KERNEL.prior,
    host_bwd_share: HOST_BWD_SHARE.prior,
    recompute_pass: RECOMPUTE_PASS.prior,
    network_busbw: NETWORK_BUSBW.prior,
    tier_contention: TIER_CONTENTION.prior,
    straggler_sigma: STRAGGLER_SIGMA.prior,
    ..NOMINAL
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Forward and backward together at one rate, the backward doing 2.5x the forward's FLOPs.
    fn fwd_bwd(fwd: f64, bwd: f64) -> f64 {
        3.5 / (1.0 / fwd + 2.5 / bwd)
    }

    fn mean(v: [f64; 3]) -> f64 {
        v.iter().sum::<f64>() / 3.0
    }

    #[test]
    fn issue_27_blackwell_kernels_are_the_mean_of_three_measured_parts() {
        // ml-engineering's MAMF table, TFLOP/s against the dense peak: B200, B300, GB200.
        let bf16 = mean([1745.0 / 2250.0, 1769.0 / 2250.0, 1822.0 / 2500.0]);
        let fp8 = mean([3432.5 / 4500.0, 3353.3 / 4500.0, 3615.6 / 5000.0]);
        assert!((BLACKWELL.gemm_peak - bf16).abs() < 5e-4, "{bf16}");
        assert!((BLACKWELL.fp8_gemm_peak - fp8).abs() < 5e-4, "{fp8}");
        // cudnn-frontend's SDPA training benchmark at 16k tokens, causal, head dim 128:
        // cuDNN on B200, GB200, GB300; FlashAttention-2 on the same three.
        let cudnn = mean([
            fwd_bwd(1332.415, 1074.776) / 2250.0,
            fwd_bwd(1668.0, 1304.0) / 2500.0,
            fwd_bwd(1702.463, 1267.827) / 2500.0,
        ]);
        let fa2 = mean([
            fwd_bwd(425.128, 336.635) / 2250.0,
            fwd_bwd(430.0, 352.0) / 2500.0,
            fwd_bwd(464.522, 368.995) / 2500.0,
        ]);
        assert!((BLACKWELL.flash3 - cudnn).abs() < 5e-4, "{cudnn}");
        assert!((BLACKWELL.flash2 - fa2).abs() < 5e-4, "{fa2}");
        // FlashAttention-2 on B200 runs at H100's rate in TFLOP/s (358 against 326): the
        // Ampere-era kernels gain nothing from Blackwell's tensor cores, and FlashAttention-1,
        // unmeasured, stays below FlashAttention-2 as on Hopper.
        assert!((fwd_bwd(425.128, 336.635) / (HOPPER.flash2 * 989.4) - 1.1).abs() < 0.01);
        const { assert!(BLACKWELL.flash1 < BLACKWELL.flash2 && BLACKWELL.flash2 < BLACKWELL.flash3) };
    }
}
