//! Kernel figures the nominal compute model prices with, beside the per-architecture
//! efficiencies of [`super::efficiency`]: fused attention's backward and its throughput by
//! sequence length, fp8 row-wise scaling, and cuBLAS's tile choice. Each with its source.

use crate::catalog::Arch;
use crate::mesh::FlashKernel;

/// Backward of fused attention against its forward, in FLOPs at the same rate: recomputing
/// the scores plus the four gradient products (Dao 2023, arXiv 2307.08691, §3.1: the backward
/// pass does 2.5x the forward's matmul FLOPs).
pub const FLASH_BACKWARD: f64 = 2.5;

/// Forward throughput of fused causal attention by sequence length (head dim 128, H100 SXM5,
/// 16k tokens per call), from the FlashAttention-3 paper's Fig. 5 (Shah et al. 2024, arXiv
/// 2407.08608), TFLOP/s at 512, 1k, 2k, 4k, 8k and 16k tokens: FlashAttention-2 191, 260,
/// 298, 319, 333, 335; cuDNN 315, 410, 484, 518, 529, 539. Short sequences leave fewer tiles
/// per head to fill the SMs and spend more of them on the causal diagonal. The catalog's
/// kernel efficiencies are the long-sequence plateau; this is the share of it a call keeps.
pub const FLASH2_BY_SEQ: [f64; 6] = [191.0, 260.0, 298.0, 319.0, 333.0, 335.0];
/// See [`FLASH2_BY_SEQ`].
pub const NEWEST_BY_SEQ: [f64; 6] = [315.0, 410.0, 484.0, 518.0, 529.0, 539.0];

/// The measured curve of a kernel on an architecture, where there is one.
pub fn seq_curve(arch: Arch, kernel: FlashKernel) -> Option<&'static [f64; 6]> {
    match (arch, kernel) {
        (Arch::Hopper, FlashKernel::Flash2) => Some(&FLASH2_BY_SEQ),
        (Arch::Hopper, FlashKernel::Newest) => Some(&NEWEST_BY_SEQ),
        _ => None,
    }
}

/// Share of tensorwise fp8's saving over bf16 that the rowwise recipe keeps. torchao's float8
/// README (pytorch/ao before b79503772; torchao 0.10, PyTorch 2.7: Llama3-8B, FSDP2 on 8 H100,
/// seq 8192, batch 1, torch.compile, per-op SAC) measured 6150 tokens/s in bf16, 7689.5 with
/// tensorwise scaling and 6768 with rowwise: (1/6150 - 1/6768) / (1/6150 - 1/7689.5) = 0.456.
/// The recipes differ in their GEMMs, the casts into them (PyTorch's row-wise `_scaled_mm` is a
/// CUTLASS kernel where tensorwise calls cuBLAS, pytorch/pytorch#147971, and row scales need a
/// cast along each axis) and FSDP's parameter all-gather (fp8 in the tensorwise row, bf16 in
/// the rowwise one), which FSDP overlaps on one node; the share charges all of it to the GEMMs:
/// a rowwise GEMM takes (1 - share) of the bf16 time plus share of the tensorwise one.
pub const ROWWISE_SAVING_SHARE: f64 = (1.0 / 6150.0 - 1.0 / 6768.0) / (1.0 / 6150.0 - 1.0 / 7689.5);

/// Share of the fp8 peak that a block-scaled GEMM reaches on Hopper: DeepGEMM's README at its
/// first commit (deepseek-ai/DeepGEMM a6d97a1, 2025-02-25; H800 SXM5) measured 1358 TFLOPS on
/// its largest dense shape (M 4096, N 7168, K 16384) against the 1979 TFLOPS dense fp8 peak,
/// with each 128-wide k-step's partial sums promoted to fp32 on the CUDA cores. Its other
/// shapes fall off with K and N as the tile model prices them with
/// [`HOPPER_FP8_K_OVERHEAD`].
pub const HOPPER_BLOCKWISE_FP8_PEAK: f64 = 1358.0 / 1979.0;

/// The K of the GEMM each Hopper fp8 figure was measured at: [`HOPPER_BLOCKWISE_FP8_PEAK`]'s
/// largest DeepGEMM shape, and the 8192-wide cuBLAS GEMMs of the tensorwise figure
/// (`efficiency::HOPPER`). The plateau is set so the k-loop's share at that K stays as
/// it was measured.
pub const HOPPER_BLOCKWISE_FP8_K: f64 = 16384.0;
/// See [`HOPPER_BLOCKWISE_FP8_K`].
pub const HOPPER_TENSORWISE_FP8_K: f64 = 8192.0;

/// CTA tiles cuBLAS picks among for smaller problems, with their throughput against the
/// largest tile: a smaller tile fills more SMs but reuses each loaded element fewer times
/// (NVIDIA "Matrix Multiplication Background" user guide, "Tile quantization": 256x128 is the
/// most efficient tile, 64x64 the least).
pub const SMALL_TILES: [(f64, f64, f64); 3] = [
    (128.0, 128.0, 0.92),
    (128.0, 64.0, 0.80),
    (64.0, 64.0, 0.60),
];

/// The k-loop of a tile runs in 32-wide steps behind a 3-stage software pipeline (CUTLASS's
/// multistage mainloop): about 96 columns of k are prologue and epilogue.
pub const K_OVERHEAD: f64 = 96.0;

/// The same for fp8 GEMMs on Hopper, whose k-loop steps in 128-wide blocks (one scaling block
/// of DeepGEMM, the k-tile of CUTLASS's sm90 fp8 kernels): about five blocks of k a tile go
/// to filling the pipeline and the epilogue. DeepGEMM's README at its first commit
/// (deepseek-ai/DeepGEMM a6d97a1, H800 SXM5, M = 4096) measured 1358, 1304, 1058, 1025, 990
/// and 590 TFLOPS at K = 16384, 7168, 7168, 2048, 1536 and 512: with 640 columns the tile
/// model lands within 5% of each, where 96 columns priced K = 512 at 1.83x the rate.
/// Its grouped GEMMs (contiguous layout, 4 and 8 experts of 8192 and 4096 rows, K = 7168 and
/// 2048: 1297, 1099, 1288 and 1093 TFLOPS), which did not set the figure, land 3-4% under.
pub const HOPPER_FP8_K_OVERHEAD: f64 = 640.0;

/// The share of a tile's time the k-loop computes: `k` columns behind `overhead` of pipeline
/// fill and epilogue.
pub fn k_loop(k: f64, overhead: f64) -> f64 {
    k / (k + overhead)
}
