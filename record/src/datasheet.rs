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
    /// A100, A800 (sm_80).
    Ampere,
    /// L40S (sm_89).
    Ada,
    /// H100, H800, H20, GH200, H200 (sm_90).
    Hopper,
    /// B200, GB200 (sm_100) and Blackwell Ultra: B300, GB300 (sm_103).
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
        id: "a800-sxm-80gb",
        name: "NVIDIA A800 SXM4 80GB",
        bf16_flops: 312e12,
        fp8_flops: None,
        tf32_flops: 156e12,
        hbm_bytes: 80.0 * GIB,
        hbm_bytes_per_s: 2039e9,
        nvlink_bytes_per_s: 200e9,
        pcie_gen: 4,
        sms: 108,
        arch: Arch::Ampere,
        source: "NVIDIA A800 (Nov 2022, for China): the A100 SXM4 80GB of the A100 datasheet (2021) with NVLink cut to 400 GB/s both directions, 8 NVLink 3 links of 50 GB/s where the A100 has 12 (Reuters via tweakers.net, 2022; NV8 in `nvidia-smi topo -m`); 81920 MiB and 400 W per nvidia-smi (`NVIDIA A800-SXM4-80GB`)",
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
        id: "h20",
        name: "NVIDIA H20 96GB",
        bf16_flops: 148e12,
        fp8_flops: Some(296e12),
        tf32_flops: 74e12,
        hbm_bytes: 97871.0 * MIB,
        hbm_bytes_per_s: 4.0e12,
        nvlink_bytes_per_s: 450e9,
        pcie_gen: 5,
        sms: 78,
        arch: Arch::Hopper,
        source: "NVIDIA H20 product brief (2024, for China; no NVIDIA-hosted page found, the figures as partner listings and Hugging Face's hardware page quote them alike): 148 TFLOP/s fp16/bf16, 296 fp8, 74 tf32 dense, 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s both directions, PCIe Gen5; 78 SMs per its Geekbench listing (a device query, not a datasheet); 97871 MiB and 500 W per nvidia-smi (`NVIDIA H20`; the 141 GB `H20-3e` is another part)",
    },
    Gpu {
        id: "gh200-96gb",
        name: "NVIDIA GH200 Grace Hopper Superchip, 96GB HBM3",
        bf16_flops: 989.4e12,
        fp8_flops: Some(1978.9e12),
        tf32_flops: 494.7e12,
        hbm_bytes: 97871.0 * MIB,
        hbm_bytes_per_s: 4.0e12,
        nvlink_bytes_per_s: 450e9,
        pcie_gen: 5,
        sms: 132,
        arch: Arch::Hopper,
        source: "NVIDIA GH200 Grace Hopper Superchip datasheet (2024), HBM3 column: the H100 SXM's tensor peaks (1,979 TFLOP/s bf16 and 3,958 fp8 sparse, halved as that row), 96 GB HBM3 at 4 TB/s (the HBM3e part has 144 GB at 4.9); 97871 MiB per nvidia-smi (`NVIDIA GH200 480GB`, `NVIDIA GH200 120GB`: the names count Grace's LPDDR5X); 18 NVLink 4 links, 900 GB/s both directions; the host link is NVLink-C2C to Grace, 900 GB/s both directions (7x PCIe Gen5 x16), which nothing here prices, so it stays out of the table's fields; PCIe Gen5 to the NICs",
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
        name: "NVIDIA B200 (HGX/DGX B200, 1000 W)",
        bf16_flops: 2.25e15,
        fp8_flops: Some(4.5e15),
        tf32_flops: 1.125e15,
        hbm_bytes: 183359.0 * MIB,
        hbm_bytes_per_s: 7.7e12,
        nvlink_bytes_per_s: 900e9,
        pcie_gen: 5,
        sms: 148,
        arch: Arch::Blackwell,
        source: "NVIDIA HGX B200 specifications (nvidia.com/data-center/hgx, 2025): 36 PFLOP/s fp16/bf16, 72 fp8 and 18 tf32 sparse per 8 GPUs, halved; DGX B200 datasheet (2024): 72 PF fp8 training, 1440 GB; HBM3e 7.7 TB/s per the Blackwell Architecture Technical Brief (Table 3) and the driver's 7680-bit bus at 3996 MHz (pytorch/ao#4002: 7.67 TB/s), where the DGX B200 datasheet's 64 TB/s / 8 said 8; 183359 MiB per nvidia-smi; NVLink 5 1.8 TB/s both directions; PCIe Gen5 x16 host link (MLCommons Inference v6.0 Nebius B200 system)",
    },
    Gpu {
        id: "b300",
        name: "NVIDIA B300 Blackwell Ultra (HGX/DGX B300, 1100 W)",
        bf16_flops: 2.25e15,
        fp8_flops: Some(4.5e15),
        tf32_flops: 1.125e15,
        hbm_bytes: 275040.0 * MIB,
        hbm_bytes_per_s: 8.0e12,
        nvlink_bytes_per_s: 900e9,
        pcie_gen: 6,
        sms: 148,
        arch: Arch::Blackwell,
        source: "NVIDIA HGX B300 specifications (nvidia.com/data-center/hgx, 2025): 36 PFLOP/s fp16/bf16, 72 fp8 and 18 tf32 sparse per 8 GPUs, halved, the same as HGX B200 (Blackwell Ultra raises fp4, not bf16 or fp8, and cuts fp64 and int8); DGX B300 datasheet: 2.3 TB HBM3e / 8 = 288 GB at 8 TB/s; 275040 MiB and 1100 W per nvidia-smi (`NVIDIA B300 SXM6 AC`); 148 SMs per the CCCL fpmp specification's test platforms (B300 SXM6 AC at 2032 MHz); NVLink 5 1.8 TB/s both directions; PCIe Gen6 to the ConnectX-8 SuperNICs",
    },
    Gpu {
        id: "gb200",
        name: "NVIDIA GB200 (NVL72, 1200 W)",
        bf16_flops: 2.5e15,
        fp8_flops: Some(5.0e15),
        tf32_flops: 1.25e15,
        hbm_bytes: 189471.0 * MIB,
        hbm_bytes_per_s: 8.0e12,
        nvlink_bytes_per_s: 900e9,
        pcie_gen: 6,
        sms: 148,
        arch: Arch::Blackwell,
        source: "NVIDIA GB200 NVL72 datasheet (2024): 360 PF bf16, 720 fp8 and 180 tf32 sparse / 72 GPUs, halved, 576 TB/s HBM3e / 72 = 8 TB/s (13.4 TB / 72 = 186 GB); 189471 MiB and 1200 W per nvidia-smi; NVLink 5 1.8 TB/s both directions; the host link is NVLink-C2C to Grace (900 GB/s both directions), which nothing here prices",
    },
    Gpu {
        id: "gb300",
        name: "NVIDIA GB300 Blackwell Ultra (NVL72, 1400 W)",
        bf16_flops: 2.5e15,
        fp8_flops: Some(5.0e15),
        tf32_flops: 1.25e15,
        hbm_bytes: 284208.0 * MIB,
        hbm_bytes_per_s: 8.0e12,
        nvlink_bytes_per_s: 900e9,
        pcie_gen: 6,
        sms: 148,
        arch: Arch::Blackwell,
        source: "NVIDIA GB300 NVL72 specifications (2025): 360 PF fp16/bf16 and 720 fp8 sparse / 72 GPUs, halved (the same as GB200; dense fp4 rises to 15 PF, 1.1 EF a rack), 288 GB HBM3e at 576 TB/s / 72 = 8 TB/s; tf32 1250 TFLOP/s dense (stas00/ml-engineering accelerator table, GB300 row); 284208 MiB and 1400 W per nvidia-smi; SMs unverified: no GB300 device query found, the B300's 148 assumed; NVLink 5 1.8 TB/s both directions; host link NVLink-C2C to Grace (900 GB/s both directions), not priced",
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
    // Longer names first: `gb300` holds `b300`, `gh200` holds `h200` and `h200` holds `h20`.
    let id = if n.contains("gb300") {
        "gb300"
    } else if n.contains("gb200") {
        "gb200"
    } else if n.contains("b300") {
        "b300"
    } else if n.contains("b200") {
        "b200"
    } else if n.contains("gh200") {
        // `NVIDIA GH200 480GB` and `120GB` count Grace's memory; `GH200 144G HBM3e` is the
        // HBM3e part, which the table does not hold.
        if n.contains("hbm3e") {
            return None;
        }
        "gh200-96gb"
    } else if n.contains("h200") {
        "h200-sxm"
    } else if n.contains("h20") && !n.contains("h20-3e") {
        // The 141 GB `H20-3e` is another part.
        "h20"
    } else if n.contains("h800") {
        "h800-sxm"
    } else if n.contains("h100") && n.contains("pcie") {
        "h100-pcie"
    } else if n.contains("h100") {
        "h100-sxm"
    } else if n.contains("a800") && n.contains("sxm") {
        "a800-sxm-80gb"
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

    fn sheet(id: &str) -> &'static Gpu {
        gpu(id).unwrap_or_else(|| panic!("{id} is in the table"))
    }

    fn close(got: f64, want: f64, tol: f64) -> bool {
        (got / want - 1.0).abs() < tol
    }

    #[test]
    fn issue_27_a800_is_an_a100_with_two_thirds_of_its_nvlink() {
        // A800: the A100 SXM4 80GB with 8 of its 12 NVLink 3 links, 400 of 600 GB/s both ways.
        let (a800, a100) = (sheet("a800-sxm-80gb"), sheet("a100-sxm-80gb"));
        assert_eq!(
            (a800.bf16_flops, a800.hbm_bytes, a800.sms),
            (a100.bf16_flops, a100.hbm_bytes, a100.sms)
        );
        assert!(close(2.0 * a800.nvlink_bytes_per_s, 400e9, 1e-12));
        assert!(close(
            a800.nvlink_bytes_per_s / a100.nvlink_bytes_per_s,
            8.0 / 12.0,
            1e-12
        ));
    }

    #[test]
    fn issue_27_h20_trades_compute_for_memory() {
        // H20 brief: 148 TFLOP/s bf16 and 296 fp8 dense on 78 SMs, 4.0 TB/s of HBM3: a ridge
        // point of 148 / 4.0 = 37 FLOP/byte, an eighth of the H100 SXM's 989.4 / 3.35 = 295.
        let h20 = sheet("h20");
        assert!(close(h20.bf16_flops, 148e12, 1e-12));
        assert!(close(h20.fp8_flops.unwrap(), 296e12, 1e-12));
        assert!(close(h20.bf16_flops / h20.hbm_bytes_per_s, 37.0, 1e-12));
        let h100 = sheet("h100-sxm");
        assert!(close(h100.bf16_flops / h100.hbm_bytes_per_s, 295.3, 1e-3));
        assert!(close(2.0 * h20.nvlink_bytes_per_s, 900e9, 1e-12));
        // 97871 MiB is 99.6% of the 96 GiB the brief rounds to.
        assert!(close(h20.hbm_bytes, 96.0 * GIB, 0.005));
    }

    #[test]
    fn issue_27_gh200_is_an_h100_with_more_and_faster_memory() {
        let (gh200, h100) = (sheet("gh200-96gb"), sheet("h100-sxm"));
        assert_eq!(
            (gh200.bf16_flops, gh200.fp8_flops, gh200.sms),
            (h100.bf16_flops, h100.fp8_flops, h100.sms)
        );
        // GH200 datasheet, HBM3 column: 96 GB at 4 TB/s, against the H100 SXM's 80 at 3.35.
        assert!(close(
            gh200.hbm_bytes_per_s / h100.hbm_bytes_per_s,
            4.0 / 3.35,
            1e-12
        ));
        assert!(close(gh200.hbm_bytes, 96.0 * GIB, 0.005));
    }

    #[test]
    fn issue_27_blackwell_rows_add_up_to_their_systems() {
        // HGX B200 and HGX B300: 36 PFLOP/s bf16 and 72 fp8 sparse per 8 GPUs.
        for id in ["b200", "b300"] {
            let g = sheet(id);
            assert!(close(8.0 * 2.0 * g.bf16_flops, 36e15, 1e-12), "{id}");
            assert!(
                close(8.0 * 2.0 * g.fp8_flops.unwrap(), 72e15, 1e-12),
                "{id}"
            );
            assert!(close(2.0 * g.nvlink_bytes_per_s, 1.8e12, 1e-12), "{id}");
        }
        // GB200 and GB300 NVL72: 360 PF bf16 and 720 fp8 sparse, 576 TB/s of HBM3e a rack.
        for id in ["gb200", "gb300"] {
            let g = sheet(id);
            assert!(close(72.0 * 2.0 * g.bf16_flops, 360e15, 1e-12), "{id}");
            assert!(
                close(72.0 * 2.0 * g.fp8_flops.unwrap(), 720e15, 1e-12),
                "{id}"
            );
            assert!(close(72.0 * g.hbm_bytes_per_s, 576e12, 1e-12), "{id}");
        }
        // DGX B300: 2.3 TB of HBM3e in 8 GPUs, 275040 MiB each as nvidia-smi reports.
        assert!(close(8.0 * sheet("b300").hbm_bytes, 2.3e12, 0.01));
        // DGX B200's 180 GB and GB200 NVL72's 186 GB a GPU are GiB as nvidia-smi counts them:
        // 183359 MiB is 179.1 GiB, 189471 MiB 185.0 GiB.
        assert!(close(sheet("b200").hbm_bytes, 180.0 * GIB, 0.006));
        assert!(close(sheet("gb200").hbm_bytes, 186.0 * GIB, 0.006));
    }

    #[test]
    fn issue_27_every_row_is_complete() {
        // One id per row, a source on each, and the NVLink domain fields the tuner checks.
        for (i, g) in GPUS.iter().enumerate() {
            assert!(GPUS[..i].iter().all(|h| h.id != g.id), "{} twice", g.id);
            assert!(
                !g.source.is_empty() && g.sms > 0 && g.pcie_gen >= 4,
                "{}",
                g.id
            );
            assert!(g.bf16_flops > 0.0 && g.hbm_bytes > 0.0, "{}", g.id);
        }
    }
}
