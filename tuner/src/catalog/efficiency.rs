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
    /// Cost of the recomputation forward pass against a plain forward pass.
    pub recompute_pass: f64,
    /// Bytes of optimizer traffic per parameter in a fused Adam step.
    pub optimizer_bytes_per_param: f64,
    /// All-reduce bus bandwidth over NVLink against the NVLink line rate.
    pub nvlink_busbw: f64,
    /// Bus bandwidth through PCIe switches against the PCIe x16 line rate.
    pub pcie_busbw: f64,
    /// Bus bandwidth over the scale-out fabric against the NIC line rate.
    pub network_busbw: f64,
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
    // performance): A100 fp16 GEMMs of 8192^3 reach ~80% of peak, and efficiency falls with the
    // smallest dimension below ~1k; the device check of this repo measures the same ratio on
    // H200 (790 of 989 TFLOP/s through PyTorch, also ~80%).
    gemm_peak: 0.79,
    gemm_half_dim: 100.0,
    // Dao et al. 2022 (FlashAttention, arXiv 2205.14135) Fig. 3 / Dao 2023 (FlashAttention-2)
    // Fig. 5: fwd+bwd on A100 at head dim 64-128 reaches 30-50% of peak for the first version
    // and its Triton port, which the MosaicML runs used.
    attention: 0.30,
    // STREAM-style copies reach 80-90% of HBM bandwidth (NVIDIA H100 tuning guide; this repo's
    // device check measures 4.3 of 4.8 TB/s on H200).
    memory: 0.80,
    // Korthikanti et al. 2022 (arXiv 2205.05198) §4.1 count 34 bytes of stored activations per
    // token and unit of h per layer; memory-bound kernels write them and read them back, which
    // is 36 bytes per h here, plus 12 per unit of MLP width for the activation function.
    elementwise_bytes_per_hidden: 36.0,
    elementwise_bytes_per_ffn: 12.0,
    // PyTorch eager launches 30-60 kernels per layer and pass at 10-20 us of host time each
    // (PyTorch performance tuning guide, "CUDA graphs"); FSDP and DDP hooks add more.
    layer_overhead_s: 0.7e-3,
    recompute_pass: 1.0,
    // Fused Adam (apex / torch foreach): read fp32 param, grad, m, v; write param, m, v and
    // the bf16 copy: 4+4+4+4 read, 4+4+4+2 write, ~32 bytes.
    optimizer_bytes_per_param: 32.0,
    // nccl-tests all_reduce_perf on DGX A100: ~230-240 GB/s busbw of 300 GB/s; DGX H100
    // ~360 GB/s of 450 without NVLS (NVIDIA NCCL performance blog, 2023).
    nvlink_busbw: 0.78,
    // PCIe gen4 peer copies reach ~25 of 31.5 GB/s through a PCIe switch.
    pcie_busbw: 0.75,
    // Scale-out: InfiniBand NDR/HDR nccl-tests busbw reaches ~90% of line rate on an idle
    // fabric, but training jobs share the fabric with their own pipeline and data-parallel
    // traffic and see far less; the published runs validate 0.55 of line rate end to end.
    network_busbw: 0.55,
    nvlink_latency_s: 10e-6,
    pcie_latency_s: 15e-6,
    network_latency_s: 30e-6,
};
