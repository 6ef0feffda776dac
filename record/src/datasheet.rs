//! GPU datasheet figures, shared by the tuner's catalog and microbench's sim profiles so the
//! two never disagree on a peak. Dense (no 2:4 sparsity) tensor-core peaks; HBM capacity as
//! `nvidia-smi` reports it where the datasheet rounds; NVLink bandwidth per GPU and direction
//! (datasheets quote both directions added). What real kernels reach against these figures
//! is the tuner's business (`catalog::efficiency`), not the datasheet's.

use serde::Serialize;

/// One GPU model's datasheet figures, in base units.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    /// Catalog id, as in `cluster.gpu` of a runs file.
    pub id: &'static str,
    /// Marketing name.
    pub name: &'static str,
    /// Dense bf16/fp16 tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
    /// Dense fp8 peak, FLOP/s; `None` where the GPU has no fp8 tensor cores.
    pub fp8_flops: Option<f64>,
    /// Dense tf32 peak, FLOP/s.
    pub tf32_flops: f64,
    /// Memory capacity, bytes.
    pub hbm_bytes: f64,
    /// Memory bandwidth, bytes/s.
    pub hbm_bytes_per_s: f64,
    /// NVLink bandwidth per GPU in one direction, bytes/s; 0 without NVLink.
    pub nvlink_bytes_per_s: f64,
    /// PCIe generation of the host link (x16).
    pub pcie_gen: u32,
    /// Streaming multiprocessors, over which GEMM tiles are spread in waves.
    pub sms: u32,
    /// Architecture, which decides the kernels' achieved efficiencies.
    pub arch: Arch,
    /// Where the figures come from.
    pub source: &'static str,
}

/// GPU architecture generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// A100 (sm_80).
    Ampere,
    /// L40S (sm_89).
    Ada,
    /// H100, H800, H200 (sm_90).
    Hopper,
    /// B200, GB200 (sm_100).
    Blackwell,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Meta's Grand Teton H100: the 96 GB HBM2e part at its default 500 W limit, which torchtitan's
/// benchmarks ran and runs files label `h100-sxm`.
pub const GRAND_TETON_H100: &str = "h100-sxm-96gb-500w";

/// Every GPU the catalog knows.
pub const GPUS: &[Gpu] = &[
    Gpu {
        id: "a100-sxm-40gb",
        name: "NVIDIA A100 SXM4 40GB",
        bf16_flops: 312e12,
        fp8_flops: None,
        tf32_flops: 156e12,
        hbm_bytes: 40.0 * GIB,
        hbm_bytes_per_s: 1555e9,
        nvlink_bytes_per_s: 300e9,
        pcie_gen: 4,
        sms: 108,
        arch: Arch::Ampere,
        source: "NVIDIA A100 Tensor Core GPU datasheet (2021), SXM4 40GB column; NVLink 600 GB/s both directions",
    },
    Gpu {
        id: "a100-sxm-80gb",
        name: "NVIDIA A100 SXM4 80GB",
        bf16_flops: 312e12,
        fp8_flops: None,
        tf32_flops: 156e12,
        hbm_bytes: 80.0 * GIB,
        hbm_bytes_per_s: 2039e9,
        nvlink_bytes_per_s: 300e9,
        pcie_gen: 4,
        sms: 108,
        arch: Arch::Ampere,
        source: "NVIDIA A100 Tensor Core GPU datasheet (2021), SXM4 80GB column; NVLink 600 GB/s both directions",
    },
    Gpu {
        id: "h100-sxm",
        name: "NVIDIA H100 SXM5 80GB",
        bf16_flops: 989.4e12,
        fp8_flops: Some(1978.9e12),
        tf32_flops: 494.7e12,
        hbm_bytes: 81559.0 * MIB,
        hbm_bytes_per_s: 3.35e12,
        nvlink_bytes_per_s: 450e9,
        pcie_gen: 5,
        sms: 132,
        arch: Arch::Hopper,
        source: "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column, sparse figures halved; NVLink 900 GB/s both directions; 81559 MiB per nvidia-smi",
    },
    Gpu {
        id: GRAND_TETON_H100,
        name: "NVIDIA H100 SXM5 96GB HBM2e at 500 W (Meta Grand Teton)",
        // The source bounds the tensor peak between the H100 NVL's 835.5 TFLOP/s (400 W) and
        // the SXM's 989.4 (700 W); interpolated linearly in the power limit, 500 W gives 886.8.
        bf16_flops: 886.8e12,
        fp8_flops: Some(1773.3e12),
        tf32_flops: 443.2e12,
        hbm_bytes: 96.0 * GIB,
        hbm_bytes_per_s: 2.4e12,
        nvlink_bytes_per_s: 450e9,
        pcie_gen: 5,
        sms: 132,
        arch: Arch::Hopper,
        source: "torchtitan benchmarks/llama3_h100_202412_torchtitan.md and asyncTP_llama3_h100_2025-06_torchtitan.md, Hardware: 96GB HBM2e at 2.4 TB/s, the default 500 W power limit, 'the actual peak TFLOPs number is between SXM and NVL'; peaks interpolated in the power limit between the H100 NVL (835.5 TFLOP/s bf16 dense at 400 W) and H100 SXM (989.4 at 700 W) columns of the NVIDIA H100 datasheet (2023); 96 GiB is the nominal size, for want of an nvidia-smi figure",
    },
    Gpu {
        id: "h100-pcie",
        name: "NVIDIA H100 PCIe 80GB",
        bf16_flops: 756e12,
        fp8_flops: Some(1513e12),
        tf32_flops: 378e12,
        hbm_bytes: 81559.0 * MIB,
        hbm_bytes_per_s: 2.0e12,
        nvlink_bytes_per_s: 0.0,
        pcie_gen: 5,
        sms: 114,
        arch: Arch::Hopper,
        source: "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 PCIe column, sparse figures halved; the optional 2-GPU NVLink bridge is not modelled",
    },
    Gpu {
        id: "h800-sxm",
        name: "NVIDIA H800 SXM5 80GB",
        bf16_flops: 989.4e12,
        fp8_flops: Some(1978.9e12),
        tf32_flops: 494.7e12,
        hbm_bytes: 81559.0 * MIB,
        hbm_bytes_per_s: 3.35e12,
        nvlink_bytes_per_s: 200e9,
        pcie_gen: 5,
        sms: 132,
        arch: Arch::Hopper,
        source: "NVIDIA H800 product brief: H100 SXM compute with NVLink cut to 400 GB/s both directions (DeepSeek-V3 report, §3.1)",
    },
    Gpu {
        id: "h200-sxm",
        name: "NVIDIA H200 SXM 141GB",
        bf16_flops: 989.4e12,
        fp8_flops: Some(1978.9e12),
        tf32_flops: 494.7e12,
        hbm_bytes: 143771.0 * MIB,
        hbm_bytes_per_s: 4.8e12,
        nvlink_bytes_per_s: 450e9,
        pcie_gen: 5,
        sms: 132,
        arch: Arch::Hopper,
        source: "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column, sparse figures halved; 143771 MiB per nvidia-smi",
    },
    Gpu {
        id: "b200",
        name: "NVIDIA B200 (DGX B200)",
        bf16_flops: 2.25e15,
        fp8_flops: Some(4.5e15),
        tf32_flops: 1.1e15,
        hbm_bytes: 180e9,
        hbm_bytes_per_s: 8.0e12,
        nvlink_bytes_per_s: 900e9,
        pcie_gen: 5,
        sms: 148,
        arch: Arch::Blackwell,
        source: "NVIDIA DGX B200 datasheet (2024): 72 PF fp8 training / 8 GPUs (sparse, halved), 1440 GB and 64 TB/s HBM3e / 8; NVLink 5 1.8 TB/s both directions",
    },
    Gpu {
        id: "gb200",
        name: "NVIDIA GB200 (NVL72)",
        bf16_flops: 2.5e15,
        fp8_flops: Some(5.0e15),
        tf32_flops: 1.25e15,
        hbm_bytes: 186e9,
        hbm_bytes_per_s: 8.0e12,
        nvlink_bytes_per_s: 900e9,
        pcie_gen: 6,
        sms: 148,
        arch: Arch::Blackwell,
        source: "NVIDIA GB200 NVL72 datasheet (2024): 360 PF bf16 sparse / 72 GPUs halved, 13.4 TB HBM3e / 72, 8 TB/s per GPU; NVLink 5 1.8 TB/s both directions",
    },
    Gpu {
        id: "l40s",
        name: "NVIDIA L40S 48GB",
        bf16_flops: 362.05e12,
        fp8_flops: Some(733e12),
        tf32_flops: 183e12,
        hbm_bytes: 46068.0 * MIB,
        hbm_bytes_per_s: 864e9,
        nvlink_bytes_per_s: 0.0,
        pcie_gen: 4,
        sms: 142,
        arch: Arch::Ada,
        source: "NVIDIA L40S datasheet (2023), sparse figures halved; GDDR6 48 GB ECC on, 46068 MiB per nvidia-smi; no NVLink",
    },
];

/// The datasheet of catalog id `id` (`h100-sxm`, `a100-sxm-80gb`, ...).
pub fn gpu(id: &str) -> Option<&'static Gpu> {
    GPUS.iter().find(|g| g.id == id)
}

/// The datasheet entry an NVML model name denotes (`NVIDIA H100 80GB HBM3` is the H100 SXM),
/// as the agent exports it in `model_name` and the tuner reads it back.
pub fn gpu_for_model_name(name: &str) -> Option<&'static Gpu> {
    let n = name.to_ascii_lowercase();
    let id = if n.contains("gb200") {
        "gb200"
    } else if n.contains("b200") {
        "b200"
    } else if n.contains("h200") {
        "h200-sxm"
    } else if n.contains("h800") {
        "h800-sxm"
    } else if n.contains("h100") && n.contains("pcie") {
        "h100-pcie"
    } else if n.contains("h100") {
        "h100-sxm"
    } else if n.contains("a100") && n.contains("40gb") {
        "a100-sxm-40gb"
    } else if n.contains("a100") {
        "a100-sxm-80gb"
    } else if n.contains("l40s") {
        "l40s"
    } else {
        return None;
    };
    gpu(id)
}

/// PCIe x16 bandwidth per direction for a generation, bytes/s (PCI-SIG base specifications,
/// 128b/130b encoding: gen3 15.75 GB/s, doubling per generation).
pub fn pcie_x16_bytes_per_s(gen: u32) -> f64 {
    15.75e9 * 2f64.powi(gen.saturating_sub(3) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grand_teton_h100_sits_between_nvl_and_sxm_by_its_power_limit() {
        // H100 NVL: 835.5 TFLOP/s bf16 and 1670.5 fp8 dense at 400 W; SXM: 989.4 and 1978.9 at
        // 700 W. A third of the way along the power line is 886.8 and 1773.3.
        let g = gpu(GRAND_TETON_H100).unwrap();
        let at_500w = |nvl: f64, sxm: f64| nvl + (sxm - nvl) * (500.0 - 400.0) / (700.0 - 400.0);
        assert!((g.bf16_flops / at_500w(835.5e12, 989.4e12) - 1.0).abs() < 1e-4);
        assert!((g.fp8_flops.unwrap() / at_500w(1670.5e12, 1978.9e12) - 1.0).abs() < 1e-4);
        let sxm = gpu("h100-sxm").unwrap();
        assert!((g.hbm_bytes_per_s / sxm.hbm_bytes_per_s - 0.716).abs() < 1e-3);
    }
}
