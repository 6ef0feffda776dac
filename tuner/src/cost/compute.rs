//! Kernel time on one GPU: the [`ComputeModel`] interface and its nominal implementation.

use crate::catalog::{Efficiency, Gpu};
use crate::mesh::Precision;

/// Time of the kernels of one GPU.
pub trait ComputeModel {
    /// One GEMM of an (m x k) by (k x n) product.
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64;
    /// Fused attention executing `flops`.
    fn attention_s(&self, flops: f64) -> f64;
    /// Memory-bound kernels moving `bytes` through HBM.
    fn memory_s(&self, bytes: f64) -> f64;
    /// Host and launch overhead of one layer in one pass.
    fn layer_overhead_s(&self) -> f64;
    /// Where the GEMM figures come from.
    fn source(&self) -> super::collective::Source {
        super::collective::Source::Nominal
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

/// Datasheet peak times catalog efficiency.
#[derive(Debug, Clone)]
pub struct NominalCompute {
    peak_flops: f64,
    attention_flops: f64,
    memory_bytes_per_s: f64,
    gemm_peak: f64,
    gemm_half_dim: f64,
    layer_overhead_s: f64,
    measured: Option<f64>,
}

impl NominalCompute {
    /// Builds the model for one GPU and precision. fp8 falls back to bf16 on GPUs without fp8
    /// tensor cores; the caller reports that.
    pub fn new(gpu: &Gpu, precision: Precision, eff: &Efficiency) -> Self {
        let peak = match precision {
            Precision::Fp8 => gpu.fp8_flops.unwrap_or(gpu.bf16_flops),
            Precision::Bf16 => gpu.bf16_flops,
        };
        NominalCompute {
            peak_flops: peak,
            // Attention runs in bf16 even in fp8 recipes (Transformer Engine keeps it there).
            attention_flops: gpu.bf16_flops * eff.attention,
            memory_bytes_per_s: gpu.hbm_bytes_per_s * eff.memory,
            gemm_peak: eff.gemm_peak,
            gemm_half_dim: eff.gemm_half_dim,
            layer_overhead_s: eff.layer_overhead_s,
            measured: None,
        }
    }

    /// The same model with GEMM efficiency fitted to measurements (relative uncertainty
    /// `rms`) and, when measured, the memory bandwidth.
    pub fn with_measured(
        mut self,
        gemm_peak: f64,
        gemm_half_dim: f64,
        rms: f64,
        memory_bytes_per_s: Option<f64>,
    ) -> Self {
        self.gemm_peak = gemm_peak;
        self.gemm_half_dim = gemm_half_dim;
        self.measured = Some(rms);
        if let Some(bw) = memory_bytes_per_s {
            self.memory_bytes_per_s = bw;
        }
        self
    }

    /// GEMM efficiency against peak: e_max / ((1 + d0/min(n,k)) (1 + d0/m)). Small inner
    /// dimensions starve the tensor cores of reuse; a small m leaves SMs idle (NVIDIA
    /// "Matrix Multiplication Background" guide, sections on tile and wave quantization).
    pub fn gemm_efficiency(&self, m: f64, n: f64, k: f64) -> f64 {
        let d0 = self.gemm_half_dim;
        self.gemm_peak / ((1.0 + d0 / n.min(k)) * (1.0 + d0 / m))
    }
}

impl ComputeModel for NominalCompute {
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64 {
        2.0 * m * n * k / (self.peak_flops * self.gemm_efficiency(m, n, k))
    }

    fn attention_s(&self, flops: f64) -> f64 {
        flops / self.attention_flops
    }

    fn memory_s(&self, bytes: f64) -> f64 {
        bytes / self.memory_bytes_per_s
    }

    fn layer_overhead_s(&self) -> f64 {
        self.layer_overhead_s
    }

    fn source(&self) -> super::collective::Source {
        if self.measured.is_some() {
            super::collective::Source::Measured
        } else {
            super::collective::Source::Nominal
        }
    }

    fn uncertainty(&self) -> f64 {
        self.measured.unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};

    #[test]
    fn big_square_gemm_near_catalog_peak() {
        let gpu = catalog::gpu("h200-sxm").unwrap();
        let c = NominalCompute::new(gpu, Precision::Bf16, &NOMINAL);
        let n = 8192.0;
        let achieved = c.gemm_flops_per_s(n, n, n) / gpu.bf16_flops;
        // e_max / (1 + d0/8192)^2: 0.85 / 1.0123^2 = 0.829 with the catalog figures.
        let (e, d0) = (NOMINAL.gemm_peak, NOMINAL.gemm_half_dim);
        assert!((achieved - e / (1.0 + d0 / 8192.0f64).powi(2)).abs() < 1e-12);
        assert!(achieved > 0.75 && achieved < 0.9);
    }

    #[test]
    fn narrow_gemm_is_less_efficient() {
        // 16384 x 768 x 768 (a 125M model's projection): e_max / ((1 + d0/768)(1 + d0/16384)).
        let gpu = catalog::gpu("a100-sxm-80gb").unwrap();
        let c = NominalCompute::new(gpu, Precision::Bf16, &NOMINAL);
        let narrow = c.gemm_efficiency(16384.0, 768.0, 768.0);
        let (e, d0) = (NOMINAL.gemm_peak, NOMINAL.gemm_half_dim);
        assert!((narrow - e / ((1.0 + d0 / 768.0) * (1.0 + d0 / 16384.0))).abs() < 1e-12);
        assert!(narrow < c.gemm_efficiency(16384.0, 8192.0, 8192.0));
        assert!(
            c.gemm_efficiency(256.0, 8192.0, 8192.0) < c.gemm_efficiency(4096.0, 8192.0, 8192.0)
        );
    }

    #[test]
    fn fp8_doubles_hopper_gemm_rate_but_not_ampere() {
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let a100 = catalog::gpu("a100-sxm-80gb").unwrap();
        let (m, n, k) = (8192.0, 8192.0, 8192.0);
        let ratio = |g| {
            NominalCompute::new(g, Precision::Bf16, &NOMINAL).gemm_s(m, n, k)
                / NominalCompute::new(g, Precision::Fp8, &NOMINAL).gemm_s(m, n, k)
        };
        assert!((ratio(h100) - 2.0).abs() < 0.01);
        assert_eq!(ratio(a100), 1.0);
    }
}
