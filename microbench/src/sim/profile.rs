//! Node profiles for the sim: datasheet figures of common 8-GPU servers, and the 4-GPU tray
//! of a GB200 NVL72 rack.
//!
//! The GPU figures (dense tensor-core peaks, memory as `nvidia-smi` reports it, HBM and NVLink
//! bandwidth, SMs) come from `record::datasheet`, the table the tuner's catalog prices with, so
//! sim and tuner never disagree on a peak. NVLink bandwidth here is per link and direction:
//! the datasheet's per-GPU figure over the links (H100 18 NVLink4, A100 12 NVLink3). The V100
//! has no bf16 and is not in that table (the tuner prices Ampere and newer): its figures are
//! the V100 SXM2 datasheet's (125 TFLOP/s fp16, 900 GB/s, 6 NVLink2 links). DGX H100/A100/DGX-1
//! user guides for NICs and NUMA layout.

use crate::discovery::Pcie;
use crate::error::{Error, Result};
use record::datasheet::{self, Gpu};
use record::Dtype;

/// How the GPUs reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    /// Every GPU's `links` NVLinks go to NVSwitches.
    NvSwitch {
        /// NVLinks per GPU.
        links: u32,
    },
    /// Direct NVLinks as printed in a `topo -m` table (DGX-1's hybrid cube-mesh).
    Mesh(&'static str),
    /// PCIe only, `per_switch` GPUs under each PCIe switch.
    Pcie {
        /// GPUs sharing a switch (PIX to each other).
        per_switch: u32,
    },
}

/// Dense tensor-core peaks in FLOP/s; `None` where the GPU has no such path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peaks {
    /// bfloat16.
    pub bf16: Option<f64>,
    /// fp16.
    pub fp16: Option<f64>,
    /// TF32.
    pub tf32: Option<f64>,
    /// fp8 (e4m3 and e5m2).
    pub fp8: Option<f64>,
}

impl Peaks {
    /// The peak for `dtype`, if the GPU's tensor cores take it.
    pub fn of(&self, dtype: Dtype) -> Option<f64> {
        match dtype {
            Dtype::Bf16 => self.bf16,
            Dtype::Fp16 => self.fp16,
            Dtype::Tf32 => self.tf32,
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => self.fp8,
            _ => None,
        }
    }
}

/// One server model.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Name given to `--profile`.
    pub name: &'static str,
    /// GPU model name as NVML reports it.
    pub gpu_name: &'static str,
    /// GPUs in the node.
    pub gpus: u32,
    /// Memory per GPU in bytes.
    pub memory_bytes: u64,
    /// CUDA compute capability.
    pub compute_capability: [u32; 2],
    /// Streaming multiprocessors (for GEMM wave quantisation).
    pub sms: u32,
    /// Maximum SM and memory clocks in MHz.
    pub clocks_mhz: [u32; 2],
    /// Tensor-core peaks.
    pub peaks: Peaks,
    /// Memory bandwidth in bytes per second (read plus write).
    pub hbm_bytes_per_s: f64,
    /// Host link of each GPU.
    pub pcie: Pcie,
    /// GPU-to-GPU fabric.
    pub fabric: Fabric,
    /// NVLink bandwidth per link and direction, bytes per second.
    pub nvlink_bytes_per_s: f64,
    /// GPUs that share one NVLink fabric: the node's GPUs, or 72 for the 18 trays of 4 of a
    /// GB200 NVL72 rack, whose NVLink switches join the trays. A sim job fills a domain with
    /// consecutive nodes.
    pub nvlink_domain: u32,
    /// NUMA nodes (GPUs split evenly, in index order).
    pub numa_nodes: u32,
    /// CPU cores per NUMA node (affinity lists count hyperthreads after all cores).
    pub cores_per_numa: u32,
    /// RDMA NICs, spread evenly over the GPUs.
    pub nics: u32,
    /// NIC rate in bytes per second.
    pub nic_bytes_per_s: f64,
}

const GB: f64 = 1e9;
const TFLOPS: f64 = 1e12;
const GIB: u64 = 1 << 30;
const PCIE4: Pcie = Pcie {
    generation: 4,
    generation_max: 4,
    width: 16,
    width_max: 16,
    generation_gpu_max: Some(4),
};
const PCIE5: Pcie = Pcie {
    generation: 5,
    generation_max: 5,
    width: 16,
    width_max: 16,
    generation_gpu_max: Some(5),
};

/// nvidia-smi topo -m of a DGX-1 with V100s, from nccl-tests issue 37.
const DGX1_MESH: &str = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity
GPU0\t X \tNV1\tNV1\tNV2\tSYS\tSYS\tNV2\tSYS\t0-95
GPU1\tNV1\t X \tNV2\tNV1\tSYS\tSYS\tSYS\tNV2\t0-95
GPU2\tNV1\tNV2\t X \tNV2\tNV1\tSYS\tSYS\tSYS\t0-95
GPU3\tNV2\tNV1\tNV2\t X \tSYS\tNV1\tSYS\tSYS\t0-95
GPU4\tSYS\tSYS\tNV1\tSYS\t X \tNV2\tNV1\tNV2\t0-95
GPU5\tSYS\tSYS\tSYS\tNV1\tNV2\t X \tNV2\tNV1\t0-95
GPU6\tNV2\tSYS\tSYS\tSYS\tNV1\tNV2\t X \tNV1\t0-95
GPU7\tSYS\tNV2\tSYS\tSYS\tNV2\tNV1\tNV1\t X \t0-95
";

/// The shared datasheet of catalog GPU `id`; every id named below is in the table (a test
/// builds every profile).
fn sheet(id: &str) -> &'static Gpu {
    datasheet::gpu(id).unwrap_or_else(|| panic!("GPU `{id}` is missing from record::datasheet"))
}

/// Tensor-core peaks of a datasheet GPU: fp16 runs at the bf16 rate on every GPU there.
fn peaks(gpu: &Gpu) -> Peaks {
    Peaks {
        bf16: Some(gpu.bf16_flops),
        fp16: Some(gpu.bf16_flops),
        tf32: Some(gpu.tf32_flops),
        fp8: gpu.fp8_flops,
    }
}

/// Memory in whole bytes, as NVML reports it.
fn memory_bytes(gpu: &Gpu) -> u64 {
    gpu.hbm_bytes as u64
}

/// Every profile.
pub fn profiles() -> Vec<Profile> {
    let (h100, h200, gb200, a100, l40s) = (
        sheet("h100-sxm"),
        sheet("h200-sxm"),
        sheet("gb200"),
        sheet("a100-sxm-80gb"),
        sheet("l40s"),
    );
    let h100_node = Profile {
        name: "dgx-h100",
        gpu_name: "NVIDIA H100 80GB HBM3",
        gpus: 8,
        memory_bytes: memory_bytes(h100),
        compute_capability: [9, 0],
        sms: h100.sms,
        clocks_mhz: [1980, 2619],
        peaks: peaks(h100),
        hbm_bytes_per_s: h100.hbm_bytes_per_s,
        pcie: PCIE5,
        fabric: Fabric::NvSwitch { links: 18 },
        nvlink_bytes_per_s: h100.nvlink_bytes_per_s / 18.0,
        nvlink_domain: 8,
        numa_nodes: 2,
        cores_per_numa: 56,
        nics: 8,
        nic_bytes_per_s: 50.0 * GB,
    };
    vec![
        h100_node.clone(),
        Profile {
            name: "hgx-h200",
            gpu_name: "NVIDIA H200",
            memory_bytes: memory_bytes(h200),
            hbm_bytes_per_s: h200.hbm_bytes_per_s,
            cores_per_numa: 48,
            ..h100_node
        },
        Profile {
            name: "gb200-nvl72",
            gpu_name: "NVIDIA GB200",
            gpus: 4,
            memory_bytes: memory_bytes(gb200),
            compute_capability: [10, 0],
            sms: gb200.sms,
            // nvidia-smi's maximum SM clock and the memory clock under load on GB200 trays.
            clocks_mhz: [2062, 3996],
            peaks: peaks(gb200),
            hbm_bytes_per_s: gb200.hbm_bytes_per_s,
            // The datasheet's host link generation; the tray's GPUs reach Grace over
            // NVLink-C2C, which the sim's host copies do not model.
            pcie: Pcie {
                generation: gb200.pcie_gen,
                generation_max: gb200.pcie_gen,
                width: 16,
                width_max: 16,
                generation_gpu_max: Some(gb200.pcie_gen),
            },
            // NV18 in a tray's topology: 18 NVLink 5 links per GPU to the rack's switches.
            fabric: Fabric::NvSwitch { links: 18 },
            nvlink_bytes_per_s: gb200.nvlink_bytes_per_s / 18.0,
            nvlink_domain: 72,
            // Two Grace CPUs of 72 cores, one 400 Gb/s ConnectX-7 per GPU for scale-out.
            numa_nodes: 2,
            cores_per_numa: 72,
            nics: 4,
            nic_bytes_per_s: 50.0 * GB,
        },
        Profile {
            name: "dgx-a100",
            gpu_name: "NVIDIA A100-SXM4-80GB",
            gpus: 8,
            memory_bytes: memory_bytes(a100),
            compute_capability: [8, 0],
            sms: a100.sms,
            clocks_mhz: [1410, 1593],
            peaks: peaks(a100),
            hbm_bytes_per_s: a100.hbm_bytes_per_s,
            pcie: PCIE4,
            fabric: Fabric::NvSwitch { links: 12 },
            nvlink_bytes_per_s: a100.nvlink_bytes_per_s / 12.0,
            nvlink_domain: 8,
            numa_nodes: 2,
            cores_per_numa: 64,
            nics: 8,
            nic_bytes_per_s: 25.0 * GB,
        },
        Profile {
            name: "l40s-pcie",
            gpu_name: "NVIDIA L40S",
            gpus: 8,
            memory_bytes: memory_bytes(l40s),
            compute_capability: [8, 9],
            sms: l40s.sms,
            clocks_mhz: [2520, 9001],
            peaks: peaks(l40s),
            hbm_bytes_per_s: l40s.hbm_bytes_per_s,
            pcie: PCIE4,
            fabric: Fabric::Pcie { per_switch: 2 },
            nvlink_bytes_per_s: 0.0,
            nvlink_domain: 1,
            numa_nodes: 2,
            cores_per_numa: 32,
            nics: 2,
            nic_bytes_per_s: 25.0 * GB,
        },
        Profile {
            name: "dgx1-v100",
            gpu_name: "Tesla V100-SXM2-32GB",
            gpus: 8,
            memory_bytes: 32 * GIB,
            compute_capability: [7, 0],
            sms: 80,
            clocks_mhz: [1530, 877],
            peaks: Peaks {
                bf16: None,
                fp16: Some(125.0 * TFLOPS),
                tf32: None,
                fp8: None,
            },
            hbm_bytes_per_s: 900.0 * GB,
            pcie: Pcie {
                generation: 3,
                generation_max: 3,
                width: 16,
                width_max: 16,
                generation_gpu_max: Some(3),
            },
            fabric: Fabric::Mesh(DGX1_MESH),
            nvlink_bytes_per_s: 25.0 * GB,
            nvlink_domain: 8,
            numa_nodes: 2,
            cores_per_numa: 20,
            nics: 4,
            nic_bytes_per_s: 12.5 * GB,
        },
    ]
}

/// The profile called `name`.
pub fn profile(name: &str) -> Result<Profile> {
    let all = profiles();
    let names: Vec<&str> = all.iter().map(|p| p.name).collect();
    all.iter()
        .find(|p| p.name == name)
        .cloned()
        .ok_or_else(|| Error::BadValue {
            field: "--profile",
            value: name.to_string(),
            expected: format!("one of {}", names.join(", ")),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_take_the_tuners_datasheet() {
        let all = profiles();
        let h100 = profile("dgx-h100").unwrap();
        let sheet = datasheet::gpu("h100-sxm").unwrap();
        assert_eq!(h100.peaks.bf16, Some(sheet.bf16_flops));
        assert_eq!(h100.peaks.fp8, sheet.fp8_flops);
        assert_eq!(h100.hbm_bytes_per_s, sheet.hbm_bytes_per_s);
        // NVML reports 81559 MiB for the H100 80GB, which the datasheet keeps.
        assert_eq!(h100.memory_bytes, 81559 << 20);
        assert_eq!(h100.nvlink_bytes_per_s, 25e9);
        assert_eq!(all.len(), 6);
        // A GB200 tray: 4 of the rack's 72 GPUs, 18 links of 50 GB/s each way to its
        // NVLink switches (900 GB/s), one 50 GB/s NIC per GPU.
        let tray = profile("gb200-nvl72").unwrap();
        assert_eq!((tray.gpus, tray.nvlink_domain, tray.nics), (4, 72, 4));
        assert_eq!(tray.nvlink_bytes_per_s, 50e9);
        assert_eq!(tray.peaks.bf16, Some(2.5e15));
    }

    #[test]
    fn profiles_are_found_by_name_and_unknown_ones_listed() {
        assert_eq!(profile("dgx-a100").unwrap().peaks.fp8, None);
        let err = profile("dgx-h300").unwrap_err().to_string();
        assert_eq!(
            err,
            "--profile `dgx-h300`: one of dgx-h100, hgx-h200, gb200-nvl72, dgx-a100, l40s-pcie, \
             dgx1-v100"
        );
    }
}
