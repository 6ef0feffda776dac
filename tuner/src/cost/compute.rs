//! Kernel time on one GPU: the [`ComputeModel`] interface and its nominal implementation.

use record::GemmLayout;

use crate::catalog::efficiency::{arch_kernels, ArchKernels};
use crate::catalog::kernels::{
    k_loop, seq_curve, FLASH_BACKWARD, HOPPER_BLOCKWISE_FP8_K, HOPPER_BLOCKWISE_FP8_PEAK,
    HOPPER_FP8_K_OVERHEAD, HOPPER_TENSORWISE_FP8_K, K_OVERHEAD, ROWWISE_SAVING_SHARE, SMALL_TILES,
};
use crate::catalog::{Arch, Efficiency, Gpu};
use crate::mesh::{FlashKernel, Precision};

/// Share of its long-sequence throughput a fused attention kernel keeps at `seq` tokens on
/// Hopper: linear in log2(seq) between the measured points, the 512-token figure below them
/// and the 16k one above. The curves are Hopper measurements of FlashAttention-2 and cuDNN;
/// other architectures and FlashAttention-1 keep their plateau (share 1), for want of a
/// measured curve at 16k tokens a call (Blackwell's, cudnn-frontend's SDPA sweep, runs one
/// sequence a call at every length, so its short calls underfill the GPU as no training
/// batch does).
pub fn flash_seq_share(arch: Arch, kernel: FlashKernel, seq: f64) -> f64 {
    seq_curve(arch, kernel).map_or(1.0, |curve| share_on(curve, seq))
}

/// Share of the 16k-token figure at `seq` tokens on a curve of six points, 512 to 16k.
fn share_on(curve: &[f64; 6], seq: f64) -> f64 {
    let x = (seq.max(512.0).log2() - 9.0).min(5.0);
    let i = (x.floor() as usize).min(4);
    let f = x - i as f64;
    (curve[i] * (1.0 - f) + curve[i + 1] * f) / curve[5]
}

/// A kernel whose figure a model can say the origin of ([`ComputeModel::origin`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kernel {
    /// A GEMM in BLAS terms: C (m x n) = op(A) (m x k) . op(B) (k x n) in `layout`.
    Gemm {
        /// Operand layout.
        layout: GemmLayout,
        /// m, n, k.
        shape: [f64; 3],
    },
    /// A fused attention call over sequences of `seq` tokens, heads `head_dim` wide.
    Attention {
        /// Tokens per sequence (or ring block).
        seq: f64,
        /// Width of one head.
        head_dim: f64,
    },
    /// Memory-bound kernels.
    Memory,
}

/// The three GEMMs of a linear layer over `t` tokens from `inp` to `out` features, as cuBLAS
/// runs them (column-major, so PyTorch's row-major `x . W^T` has m and n swapped): the
/// forward tn (m = out, n = t, k = inp), the input gradient nn (m = inp, n = t, k = out) and
/// the weight gradient nt (m = inp, n = out, k = t).
pub fn linear_gemms(t: f64, out: f64, inp: f64) -> [(GemmLayout, [f64; 3]); 3] {
    [
        (GemmLayout::Tn, [out, t, inp]),
        (GemmLayout::Nn, [inp, t, out]),
        (GemmLayout::Nt, [inp, out, t]),
    ]
}

/// Time of the kernels of one GPU.
pub trait ComputeModel {
    /// One GEMM of an (m x k) by (k x n) product, m the rows of the activations.
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64;
    /// Forward and backward (input and weight gradients together) of a linear layer over `t`
    /// tokens from `inp` to `out` features. At one rate per FLOP the backward is twice the
    /// forward (Narayanan et al. 2021 §3.2); a model that prices shapes and layouts apart
    /// prices the three GEMMs of [`linear_gemms`].
    fn linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        let fwd = self.gemm_s(t, out, inp);
        (fwd, 2.0 * fwd)
    }
    /// [`ComputeModel::linear_s`] of a linear that fp8 training leaves in bf16: the output
    /// layer and the MoE router. Megatron-Core builds the output layer as a plain
    /// `tensor_parallel.ColumnParallelLinear` outside Transformer Engine, whose
    /// `fp8_autocast` converts only its own modules (`megatron/core/models/gpt/gpt_model.py`,
    /// a TE head only under MXFP8), and the router's GEMM as `router_gating_linear` on the
    /// unquantized input and weight (`moe/router.py`, `moe/moe_utils.py`); torchtitan converts every linear but the output
    /// (`module_filter_fn=lambda mod, fqn: fqn != "output"`); DeepSeek-V3 keeps "the
    /// embedding module, the output head, MoE gating modules" in BF16 (arXiv 2412.19437
    /// §3.3.1). Under bf16 it is `linear_s`.
    fn bf16_linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        self.linear_s(t, out, inp)
    }
    /// Fused attention forward executing `flops` in calls over sequences (or ring blocks) of
    /// `seq` tokens with heads `head_dim` wide.
    fn attention_s(&self, flops: f64, seq: f64, head_dim: f64) -> f64;
    /// Its backward, [`FLASH_BACKWARD`] times the forward's FLOPs: at the forward's rate
    /// unless the backward was measured.
    fn attention_bwd_s(&self, flops: f64, seq: f64, head_dim: f64) -> f64 {
        FLASH_BACKWARD * self.attention_s(flops, seq, head_dim)
    }
    /// Memory-bound kernels moving `bytes` through HBM.
    fn memory_s(&self, bytes: f64) -> f64;
    /// Host time to issue one kernel of a forward pass: a forward pass over a layer takes at
    /// least its kernel count times this, whatever the GPU does (a backward kernel takes
    /// `Efficiency::host_bwd_share` of it).
    fn host_s_per_kernel(&self) -> f64;
    /// Where the GEMM figures come from.
    fn source(&self) -> super::collective::Source {
        super::collective::Source::Nominal
    }
    /// Where the figure of one kernel comes from: measured, extrapolated past what was
    /// measured, or the catalog's.
    fn origin(&self, kernel: Kernel) -> super::collective::Source {
        let _ = kernel;
        self.source()
    }
    /// Relative 1-sigma uncertainty of the GEMM figures.
    fn uncertainty(&self) -> f64 {
        0.0
    }
    /// Achieved FLOP/s of a GEMM shape, for reports.
    fn gemm_flops_per_s(&self, m: f64, n: f64, k: f64) -> f64 {
        2.0 * m * n * k / self.gemm_s(m, n, k)
    }
}

/// Datasheet peak times per-architecture kernel efficiency.
#[derive(Debug, Clone)]
pub struct NominalCompute {
    peak_flops: f64,
    attention_flops: f64,
    /// The attention kernel's measured throughput by sequence length, where there is one.
    attention_curve: Option<&'static [f64; 6]>,
    memory_bytes_per_s: f64,
    gemm_peak: f64,
    /// Columns of k each tile spends outside its k-loop.
    k_overhead: f64,
    tile: (f64, f64),
    sms: f64,
    host_s_per_kernel: f64,
    /// Tensorwise GEMM time over the recipe's: below 1 for rowwise fp8, whose measured GEMM
    /// figures (a tensorwise cuBLAS sweep) it scales too.
    recipe: f64,
    /// The same GPU in bf16, which prices the GEMMs an fp8 recipe leaves in bf16; `None`
    /// where the GEMMs already run in bf16.
    bf16: Option<Box<NominalCompute>>,
}

impl NominalCompute {
    /// Builds the model for one GPU, precision and attention kernel. fp8 falls back to bf16 on
    /// GPUs without fp8 tensor cores; the caller reports that.
    pub fn new(gpu: &Gpu, precision: Precision, flash: FlashKernel, eff: &Efficiency) -> Self {
        let k: &ArchKernels = arch_kernels(gpu.arch);
        // Hopper's fp8 plateaus, measured at one K each, are moved to its fp8 k-loop so that
        // the figure at that K stays as measured.
        let hopper_fp8 = |plateau: f64, at: f64| {
            plateau * k_loop(at, K_OVERHEAD) / k_loop(at, HOPPER_FP8_K_OVERHEAD)
        };
        let (peak, gemm_peak, k_overhead) = match (precision, gpu.fp8_flops) {
            // Blackwell scales blocks in its tensor cores (MXFP8), so only Hopper's promotion
            // of block partial sums has a measured figure of its own.
            (Precision::Fp8Blockwise, Some(fp8)) if gpu.arch == Arch::Hopper => (
                fp8,
                hopper_fp8(HOPPER_BLOCKWISE_FP8_PEAK, HOPPER_BLOCKWISE_FP8_K),
                HOPPER_FP8_K_OVERHEAD,
            ),
            (Precision::Fp8 | Precision::Fp8Rowwise, Some(fp8)) if gpu.arch == Arch::Hopper => (
                fp8,
                hopper_fp8(k.fp8_gemm_peak, HOPPER_TENSORWISE_FP8_K),
                HOPPER_FP8_K_OVERHEAD,
            ),
            (Precision::Fp8 | Precision::Fp8Rowwise | Precision::Fp8Blockwise, Some(fp8)) => {
                (fp8, k.fp8_gemm_peak, K_OVERHEAD)
            }
            _ => (gpu.bf16_flops, k.gemm_peak, K_OVERHEAD),
        };
        let recipe = match (precision, gpu.fp8_flops) {
            (Precision::Fp8Rowwise, Some(fp8)) => {
                // Tensorwise runs r times as fast as bf16 at every shape (one tile model for
                // both), so rowwise takes (1 - share) r + share tensorwise GEMM times.
                let r = fp8 * k.fp8_gemm_peak / (gpu.bf16_flops * k.gemm_peak);
                1.0 / ((1.0 - ROWWISE_SAVING_SHARE) * r + ROWWISE_SAVING_SHARE)
            }
            _ => 1.0,
        };
        let bf16 = (peak != gpu.bf16_flops)
            .then(|| Box::new(NominalCompute::new(gpu, Precision::Bf16, flash, eff)));
        let attention = match flash {
            FlashKernel::Flash1 => k.flash1,
            FlashKernel::Flash2 => k.flash2,
            FlashKernel::Newest => k.flash3,
        };
        NominalCompute {
            peak_flops: peak,
            // Attention runs in bf16 even in fp8 recipes (Transformer Engine keeps it there).
            attention_flops: gpu.bf16_flops * attention,
            attention_curve: seq_curve(gpu.arch, flash),
            memory_bytes_per_s: gpu.hbm_bytes_per_s * k.memory,
            gemm_peak: gemm_peak * recipe,
            k_overhead,
            recipe,
            tile: k.tile,
            sms: f64::from(gpu.sms),
            host_s_per_kernel: eff.host_s_per_kernel,
            bf16,
        }
    }

    /// The recipe's speed against the GEMMs a sweep measures (tensorwise cuBLAS): below 1 for
    /// rowwise fp8, 1 otherwise.
    pub fn recipe(&self) -> f64 {
        self.recipe
    }

    /// The peak FLOP/s GEMM efficiencies are against: the precision's datasheet figure.
    pub fn peak_flops(&self) -> f64 {
        self.peak_flops
    }

    /// HBM bandwidth the memory-bound kernels reach, bytes/s (reads plus writes).
    pub fn memory_bytes_per_s(&self) -> f64 {
        self.memory_bytes_per_s
    }

    /// FLOP/s of fused attention at `seq` tokens: the kernel's plateau times the share of it
    /// the call keeps at its length.
    pub fn attention_rate(&self, seq: f64) -> f64 {
        let share = self
            .attention_curve
            .map_or(1.0, |curve| share_on(curve, seq));
        self.attention_flops * share
    }

    /// Share of the SMs' tile slots that an m x n output keeps busy with a tm x tn tile: the
    /// tiles' padding at the edges (tile quantization) and the last partial wave over the SMs
    /// (wave quantization).
    fn occupancy(&self, m: f64, n: f64, tm: f64, tn: f64) -> f64 {
        let (rows, cols) = ((m / tm).ceil(), (n / tn).ceil());
        let tiles = rows * cols;
        let waves = (tiles / self.sms).ceil();
        (m * n) / (tiles * tm * tn) * tiles / (waves * self.sms)
    }

    /// GEMM efficiency against peak: the best CTA tile's occupancy times its relative
    /// throughput, times the k-loop's share of the tile's time ([`k_loop`]).
    pub fn gemm_efficiency(&self, m: f64, n: f64, k: f64) -> f64 {
        let (tm, tn) = self.tile;
        let best = SMALL_TILES
            .iter()
            .map(|&(a, b, rel)| rel * self.occupancy(m, n, a, b))
            .fold(self.occupancy(m, n, tm, tn), f64::max);
        self.gemm_peak * best * k_loop(k, self.k_overhead)
    }
}

impl ComputeModel for NominalCompute {
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64 {
        2.0 * m * n * k / (self.peak_flops * self.gemm_efficiency(m, n, k))
    }

    fn bf16_linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        match &self.bf16 {
            Some(bf16) => bf16.linear_s(t, out, inp),
            None => self.linear_s(t, out, inp),
        }
    }

    fn attention_s(&self, flops: f64, seq: f64, _head_dim: f64) -> f64 {
        flops / self.attention_rate(seq)
    }

    fn memory_s(&self, bytes: f64) -> f64 {
        bytes / self.memory_bytes_per_s
    }

    fn host_s_per_kernel(&self) -> f64 {
        self.host_s_per_kernel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};

    fn bf16(id: &str) -> NominalCompute {
        let gpu = catalog::gpu(id).unwrap();
        NominalCompute::new(gpu, Precision::Bf16, FlashKernel::Flash2, &NOMINAL)
    }

    #[test]
    fn big_square_gemm_reaches_the_measured_cublas_rate() {
        // 8192^3 on A100 with 256x128 tiles: 32 x 64 = 2048 tiles in 19 waves of 108 SMs
        // (2048/2052 busy), k-loop 8192/8288: 0.86 x 0.99805 x 0.98842 = 0.8484 of 312,
        // 265 TFLOP/s, inside the 265-275 cuBLAS measures.
        let a100 = bf16("a100-sxm-80gb");
        let n = 8192.0;
        let e = a100.gemm_efficiency(n, n, n);
        let expected = 0.86 * (2048.0 / 2052.0) * (8192.0 / 8288.0);
        assert!((e - expected).abs() < 1e-12, "{e}");
        // H100: 128x256 tiles, 64 x 32 = 2048 tiles over 132 SMs in 16 waves (2048/2112).
        let h100 = bf16("h100-sxm");
        let e = h100.gemm_efficiency(n, n, n);
        let expected = 0.76 * (2048.0 / 2112.0) * (8192.0 / 8288.0);
        assert!((e - expected).abs() < 1e-12, "{e}");
        assert!((700e12..760e12).contains(&h100.gemm_flops_per_s(n, n, n)));
    }

    #[test]
    fn narrow_gemms_pick_small_tiles_and_lose_waves() {
        // vTrain's h=1024 model at TP=8: the QKV GEMM is 1024 x 384 x 1024. 256x128 tiles give
        // 4 x 3 = 12 tiles on 108 SMs (11%); 64x64 give 16 x 6 = 96 (89%) at 0.6 of the big
        // tile's rate, which wins: 0.86 x 0.6 x 96/108 x 1024/1120.
        let a100 = bf16("a100-sxm-80gb");
        let e = a100.gemm_efficiency(1024.0, 384.0, 1024.0);
        let expected = 0.86 * 0.6 * (96.0 / 108.0) * (1024.0 / 1120.0);
        assert!((e - expected).abs() < 1e-12, "{e}");
        assert!(e < 0.5 * a100.gemm_efficiency(8192.0, 8192.0, 8192.0));
        // A small k starves the k-loop: the out-projection at TP=8 has k = 128.
        assert!(a100.gemm_efficiency(1024.0, 1024.0, 128.0) < 0.5);
    }

    #[test]
    fn rowwise_fp8_keeps_the_share_of_the_tensorwise_saving_torchao_measured() {
        // (1/6150 - 1/6768) / (1/6150 - 1/7689.5) = 1.4847e-5 / 3.2554e-5 = 0.4561.
        assert!((ROWWISE_SAVING_SHARE - 0.4561).abs() < 1e-4);
        // H100: tensorwise runs 1978.9 x 0.66 / (989.4 x 0.76) = 1.737x bf16; rowwise
        // takes 0.5439 of the bf16 time plus 0.4561 of the tensorwise one:
        // 1 / (1 - 0.4561 x (1 - 1/1.737)) = 1.240x bf16, 0.4712 of the fp8 peak.
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let at = |p| NominalCompute::new(h100, p, FlashKernel::Flash2, &NOMINAL);
        let (m, n, k) = (16384.0, 8192.0, 8192.0);
        let bf16 = at(Precision::Bf16).gemm_s(m, n, k);
        let tensorwise = bf16 / at(Precision::Fp8).gemm_s(m, n, k);
        let rowwise = bf16 / at(Precision::Fp8Rowwise).gemm_s(m, n, k);
        assert!((tensorwise - 1.737).abs() < 1e-3, "{tensorwise}");
        assert!((rowwise - 1.240).abs() < 1e-3, "{rowwise}");
        // 0.4712 of the fp8 peak at K = 8192, where the figures were measured: a plateau of
        // 0.4712 x (8192/8288) / (8192/8832) = 0.5021 under fp8's longer k-loop overhead.
        let rw = at(Precision::Fp8Rowwise);
        assert!((rw.gemm_peak - 0.5021).abs() < 1e-4, "{}", rw.gemm_peak);
        // A measured (tensorwise cuBLAS) sweep is scaled the same way.
        assert!((rw.recipe() - 0.4712 / 0.66).abs() < 1e-4);
    }

    #[test]
    fn fp8_speeds_hopper_gemms_by_the_measured_ratio_but_not_ampere() {
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let a100 = catalog::gpu("a100-sxm-80gb").unwrap();
        let (m, n, k) = (8192.0, 8192.0, 8192.0);
        let ratio = |g| {
            NominalCompute::new(g, Precision::Bf16, FlashKernel::Flash2, &NOMINAL).gemm_s(m, n, k)
                / NominalCompute::new(g, Precision::Fp8, FlashKernel::Flash2, &NOMINAL)
                    .gemm_s(m, n, k)
        };
        // 1978.9/989.4 x 0.66/0.76 = 1.74: fp8 GEMMs run 1.7x bf16 on H100, not the
        // datasheet's 2x.
        let datasheet = h100.fp8_flops.unwrap() / h100.bf16_flops;
        assert!((ratio(h100) - datasheet * 0.66 / 0.76).abs() < 1e-9);
        assert!((ratio(h100) - 1.737).abs() < 1e-3);
        assert_eq!(ratio(a100), 1.0);
    }

    /// DeepGEMM's README at its first commit (a6d97a1, H800 SXM5, block-scaled fp8): its dense
    /// GEMMs at M = 4096, whose fall with K set the fp8 k-loop overhead, and its grouped
    /// contiguous GEMMs, one launch over every expert's rows, which did not, each within 5%
    /// (from 1030 against 1058 TFLOPS to 605 against 590; the grouped ones 3-4% under).
    #[test]
    fn hopper_fp8_gemms_fall_with_k_as_deepgemm_measured() {
        let h800 = catalog::gpu("h800-sxm").unwrap();
        let c = NominalCompute::new(h800, Precision::Fp8Blockwise, FlashKernel::Newest, &NOMINAL);
        let tflops = |m: f64, n: f64, k: f64| c.gemm_flops_per_s(m, n, k) / 1e12;
        let dense = [
            (2112.0, 7168.0, 1058.0),
            (24576.0, 1536.0, 990.0),
            (32768.0, 512.0, 590.0),
            (7168.0, 16384.0, 1358.0),
            (4096.0, 7168.0, 1304.0),
            (7168.0, 2048.0, 1025.0),
        ];
        for (n, k, measured) in dense {
            let model = tflops(4096.0, n, k);
            assert!(
                (model / measured - 1.0).abs() < 0.05,
                "N {n} K {k}: {model:.0} vs {measured}"
            );
        }
        // (experts, rows each, N, K, TFLOPS)
        let grouped = [
            (4.0, 8192.0, 4096.0, 7168.0, 1297.0),
            (4.0, 8192.0, 7168.0, 2048.0, 1099.0),
            (8.0, 4096.0, 4096.0, 7168.0, 1288.0),
            (8.0, 4096.0, 7168.0, 2048.0, 1093.0),
        ];
        for (experts, rows, n, k, measured) in grouped {
            let model = tflops(experts * rows, n, k);
            assert!(
                (model / measured - 1.0).abs() < 0.05,
                "{experts} x {rows}: {model:.0}"
            );
        }
        // The 96 columns of a bf16 k-loop would price K = 512 at 1.83x the rate of 640.
        let bf16_loop = k_loop(512.0, K_OVERHEAD) / k_loop(16384.0, K_OVERHEAD);
        let fp8_loop =
            k_loop(512.0, HOPPER_FP8_K_OVERHEAD) / k_loop(16384.0, HOPPER_FP8_K_OVERHEAD);
        assert!(bf16_loop / fp8_loop > 1.8, "{bf16_loop} {fp8_loop}");
    }

    /// The output layer and the router stay in bf16 under fp8 (Megatron-Core's
    /// `ColumnParallelLinear` head and `router_gating_linear`, torchtitan's filter on
    /// "output", DeepSeek-V3 §3.3.1): Qwen3-30B-A3B's head on H100, 4096 tokens from 2048
    /// features to 151,936 logits, is priced at the bf16 rate, not the fp8 one.
    #[test]
    fn the_output_layer_stays_in_bf16_under_fp8() {
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let at = |p| NominalCompute::new(h100, p, FlashKernel::Newest, &NOMINAL);
        let (t, vocab, h) = (4096.0, 151936.0, 2048.0);
        let (fp8, bf16) = (at(Precision::Fp8), at(Precision::Bf16));
        assert_eq!(fp8.bf16_linear_s(t, vocab, h), bf16.linear_s(t, vocab, h));
        assert_eq!(bf16.bf16_linear_s(t, vocab, h), bf16.linear_s(t, vocab, h));
        // 128x256 tiles: 32 x 594 = 19,008 tiles in 144 full waves of 132 SMs, 4096 x 151,936
        // of 19,008 x 128 x 256 busy (0.99916). bf16: 0.76 x 0.99916 x 2048/2144 = 0.72536 of
        // 989.4 TFLOP/s; fp8: the plateau 0.66 x (8192/8288)/(8192/8832) = 0.70332 x 0.99916 x
        // 2048/2688 = 0.53541 of 1978.9. The head takes 1059.5/717.7 = 1.476x the fp8 time.
        let ratio = bf16.gemm_s(t, vocab, h) / fp8.gemm_s(t, vocab, h);
        assert!((ratio - 1.4763).abs() < 1e-3, "{ratio}");
        // Without fp8 tensor cores the recipe runs in bf16 throughout.
        let a100 = catalog::gpu("a100-sxm-80gb").unwrap();
        let a = NominalCompute::new(a100, Precision::Fp8, FlashKernel::Flash2, &NOMINAL);
        assert_eq!(a.bf16_linear_s(t, vocab, h), a.linear_s(t, vocab, h));
    }

    #[test]
    fn hopper_attention_by_kernel_generation() {
        // FA3 paper, head dim 128: FA2 ~325 TFLOP/s, FA3/cuDNN ~520 on H100 fwd+bwd.
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let f2 = NominalCompute::new(h100, Precision::Bf16, FlashKernel::Flash2, &NOMINAL);
        let f3 = NominalCompute::new(h100, Precision::Bf16, FlashKernel::Newest, &NOMINAL);
        let flops = 1e12;
        assert!((flops / f2.attention_s(flops, 16384.0, 128.0) - 0.33 * 989.4e12).abs() < 1e6);
        assert!(
            f3.attention_s(flops, 16384.0, 128.0) < 0.75 * f2.attention_s(flops, 16384.0, 128.0)
        );
        // FlashAttention-1's generation: Ampere's 0.33 of 312 TFLOP/s times the measured
        // H100/A100 ratio of FlashAttention-1 (137/83 TFLOP/s, causal, head dim 128, 16k
        // tokens) = 170 TFLOP/s, 0.1718 of the H100's 989.4.
        let f1 = NominalCompute::new(h100, Precision::Bf16, FlashKernel::Flash1, &NOMINAL);
        let derived: f64 = 0.33 * 312e12 * 137.0 / 83.0;
        assert!((derived / 989.4e12 - 0.1718).abs() < 1e-4, "{derived}");
        assert!((flops / f1.attention_s(flops, 16384.0, 128.0) / derived - 1.0).abs() < 1e-3);
    }

    #[test]
    fn short_sequences_keep_the_measured_share_of_attention_throughput() {
        // FA3 paper Fig. 5, causal, head dim 128: FlashAttention-2 at 2k tokens runs 298 of
        // its 335 TFLOP/s; halfway between 2k and 4k (log scale) it is (298 + 319) / 2.
        let share = |k, s| flash_seq_share(Arch::Hopper, k, s);
        assert!((share(FlashKernel::Flash2, 2048.0) - 298.0 / 335.0).abs() < 1e-12);
        let mid = 2f64.powf(11.5);
        assert!((share(FlashKernel::Flash2, mid) - 308.5 / 335.0).abs() < 1e-12);
        assert!((share(FlashKernel::Newest, 1024.0) - 410.0 / 539.0).abs() < 1e-12);
        // Past the last point the plateau holds; below the first, the 512-token figure.
        assert_eq!(share(FlashKernel::Flash2, 131072.0), 1.0);
        assert_eq!(share(FlashKernel::Flash2, 128.0), 191.0 / 335.0);
        // No measured curve for Ampere or FlashAttention-1: the plateau.
        assert_eq!(
            flash_seq_share(Arch::Ampere, FlashKernel::Flash2, 512.0),
            1.0
        );
        assert_eq!(share(FlashKernel::Flash1, 512.0), 1.0);
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let f2 = NominalCompute::new(h100, Precision::Bf16, FlashKernel::Flash2, &NOMINAL);
        let t = f2.attention_s(1e12, 2048.0, 128.0) / f2.attention_s(1e12, 16384.0, 128.0);
        assert!((t - 335.0 / 298.0).abs() < 1e-12, "{t}");
    }
}
