//! Achieved efficiencies: what real kernels and collectives reach against the datasheet.
//!
//! These figures are kept apart from the datasheet figures in `gpus.rs` on purpose: datasheets
//! are what the vendor promises, these are what software gets. The same numbers serve every GPU
//! and every run; nothing here is fitted per run or per group. Where a figure was checked
//! against end-to-end runs, it was checked once, globally, against
//! `shared/data/published-runs.yaml` (see `tuner validate`).

/// Kernel and collective efficiencies used by the nominal compute and collective models.
#[derive(Debug, Clone, PartialEq)]
pub struct Efficiency {
    /// Fraction of dense peak a large, well-shaped GEMM reaches (cuBLAS, bf16).
    pub gemm_peak: f64,
    /// GEMM dimension at which efficiency halves: eff = peak / ((1 + d0/min(n,k)) (1 + d0/m)).
    pub gemm_half_dim: f64,
    /// Fraction of dense peak fused (flash) attention reaches on the FLOPs it executes.
    pub attention: f64,
    /// Fraction of HBM bandwidth that memory-bound kernels reach.
    pub memory: f64,
    /// Bytes moved by memory-bound kernels per token, per layer and per unit of hidden width
    /// in one forward pass (LayerNorms, residual adds, dropout, rotary, bias).
    pub elementwise_bytes_per_hidden: f64,
    /// The same per unit of MLP width (activation function, gating).
    pub elementwise_bytes_per_ffn: f64,
    /// Host and launch overhead per transformer layer per pass (forward, backward, recompute).
    pub layer_overhead_s: f64,
    /// Share of a collective's time that still costs when it is hidden behind compute: NCCL
    /// kernels take SMs and HBM bandwidth from the GEMMs they overlap.
    pub overlap_slowdown: f64,
    /// Cost of the recomputation forward pass against a plain forward pass.
    pub recompute_pass: f64,
    /// Bytes of optimizer traffic per parameter in a fused Adam step.
    pub optimizer_bytes_per_param: f64,
    /// All-reduce bus bandwidth over NVLink against the NVLink line rate.
    pub nvlink_busbw: f64,
    /// Bus bandwidth through PCIe switches against the PCIe x16 line rate.
    pub pcie_busbw: f64,
    /// Bus bandwidth over the scale-out fabric against the NIC line rate, inside a job.
    pub network_busbw: f64,
    /// The same in a sweep on an idle fabric, which is what nccl-tests and calibration
    /// measure; measured inter-node figures are priced at `network_busbw / network_idle_busbw`
    /// of themselves.
    pub network_idle_busbw: f64,
    /// Start-up latency of one collective step over NVLink, seconds.
    pub nvlink_latency_s: f64,
    /// The same through PCIe.
    pub pcie_latency_s: f64,
    /// The same over the network.
    pub network_latency_s: f64,
}

/// The catalog efficiencies.
pub const NOMINAL: Efficiency = Efficiency {
    // NVIDIA "Matrix Multiplication Background" user guide (docs.nvidia.com/deeplearning/
    // performance): large A100 fp16 GEMMs reach 80-90% of peak, and efficiency falls with the
    // smallest dimension below ~1k. With d0 = 100 an 8192^3 GEMM gets 0.85/(1.012)^2 = 83%;
    // the H200 reference for this repo's device check is 790 of 989 TFLOP/s (80%) through
    // PyTorch.
    gemm_peak: 0.85,
    gemm_half_dim: 100.0,
    // Of the FLOPs fused attention executes (the causal half of the square). Dao et al. 2022
    // (FlashAttention, arXiv 2205.14135) and Dao 2023 (FlashAttention-2, Fig. 5): fwd+bwd on
    // A100 at head dim 64-128 reaches 25-40% of peak for the first version and its Triton
    // port, which the MosaicML runs used; FlashAttention-2 and -3 do better.
    attention: 0.29,
    // STREAM-style copies reach 80-90% of HBM bandwidth (NVIDIA H100 tuning guide; this repo's
    // device check measures 4.3 of 4.8 TB/s on H200).
    memory: 0.80,
    // Korthikanti et al. 2022 (arXiv 2205.05198) §4.1 count 34 bytes of stored activations per
    // token and unit of h per layer; the memory-bound kernels that produce them (LayerNorm,
    // dropout, residual adds, bias) read their inputs and write them, ~43 bytes per h in a
    // forward pass, plus 16 per unit of MLP width for GeLU/SwiGLU (read 2 + write 2 bytes per
    // element, 4 passes over the MLP activations).
    elementwise_bytes_per_hidden: 43.0,
    elementwise_bytes_per_ffn: 16.0,
    // PyTorch eager launches 30-60 kernels per layer and pass at 5-10 us of host time each
    // (PyTorch performance tuning guide, "CUDA graphs"); FSDP and DDP hooks add more. Paid
    // once per layer, pass and microbatch, so it penalises many small microbatches.
    layer_overhead_s: 0.4e-3,
    // NCCL runs its collectives on 8-32 CTAs that stream through HBM, and FSDP synchronises
    // its streams before each layer; GEMMs that overlap a collective lose most of the
    // collective's time (Wang et al. 2023, ZeRO++ §2; PyTorch FSDP docs on
    // `limit_all_gathers` and rate limiting). 0.7 is what the FSDP runs of the published file
    // show; the measured path (issue 5) replaces it with per-cluster figures.
    overlap_slowdown: 0.7,
    // Full recomputation costs less than a forward pass in every published pair of runs with
    // and without it (Korthikanti et al. 2022 Table 4; the llm-foundry tables): the first
    // forward under checkpointing runs without autograd and saves no activations, and the
    // recomputed one feeds backward while its inputs are still in L2. The ratio is what those
    // runs show, one figure for both frameworks.
    recompute_pass: 0.94,
    // Fused Adam (apex / torch foreach): read fp32 param, grad, m, v; write param, m, v and
    // the bf16 copy: 4+4+4+4 read, 4+4+4+2 write, ~32 bytes.
    optimizer_bytes_per_param: 32.0,
    // nccl-tests all_reduce_perf on DGX A100: ~230-240 GB/s busbw of 300 GB/s; DGX H100
    // ~360 GB/s of 450 without NVLS (NVIDIA NCCL performance blog, 2023).
    nvlink_busbw: 0.78,
    // PCIe gen4 peer copies reach ~25 of 31.5 GB/s through a PCIe switch.
    pcie_busbw: 0.75,
    // Scale-out: InfiniBand NDR/HDR nccl-tests busbw reaches ~90% of line rate on an idle
    // fabric and one rail; jobs that drive every rail at once, across a multi-level fat tree
    // shared with their own pipeline traffic, see about two thirds of it (the DP-heavy
    // published runs, RoCE and InfiniBand alike).
    network_busbw: 0.68,
    network_idle_busbw: 0.90,
    nvlink_latency_s: 10e-6,
    pcie_latency_s: 15e-6,
    network_latency_s: 30e-6,
};
