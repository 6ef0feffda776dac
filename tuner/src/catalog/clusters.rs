//! Node and cluster presets. A preset says what one node holds and how nodes connect; the GPU
//! count comes from `--gpus`.

use serde::Serialize;

/// A node design, repeated as often as the job needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterPreset {
    /// Preset id for `--cluster`.
    pub id: &'static str,
    /// GPU catalog id.
    pub gpu: &'static str,
    /// GPUs in one node (one host, one PCIe tree).
    pub gpus_per_node: u32,
    /// GPUs that reach each other over NVLink; 1 for a PCIe-only node. May span nodes (NVL72).
    pub nvlink_domain: u32,
    /// Scale-out NICs per node.
    pub nics_per_node: u32,
    /// Line rate of one NIC, bits/s.
    pub nic_bits_per_s: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

/// Every preset the catalog knows.
pub const CLUSTERS: &[ClusterPreset] = &[
    ClusterPreset {
        id: "dgx-a100",
        gpu: "a100-sxm-80gb",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 200e9,
        source: "NVIDIA DGX A100 datasheet: 8x A100 80GB on NVSwitch, 8x ConnectX-6 HDR 200 Gb/s compute NICs",
    },
    ClusterPreset {
        id: "dgx-h100",
        gpu: "h100-sxm",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 400e9,
        source: "NVIDIA DGX H100 datasheet: 8x H100 SXM5 on NVSwitch, 8x ConnectX-7 NDR 400 Gb/s (4 OSFP ports)",
    },
    ClusterPreset {
        id: "grand-teton-h100",
        gpu: record::datasheet::GRAND_TETON_H100,
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 400e9,
        source: "torchtitan benchmarks (llama3_h100_202412_torchtitan.md): Meta Grand Teton hosts, 8 H100 96GB HBM2e at the default 500 W limit fully connected with NVLink, 400 Gb/s RDMA per GPU",
    },
    ClusterPreset {
        id: "hgx-h200",
        gpu: "h200-sxm",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 400e9,
        source: "NVIDIA HGX H200 reference design: 8x H200 SXM on NVSwitch, one 400 Gb/s ConnectX-7 per GPU",
    },
    ClusterPreset {
        id: "hgx-h800",
        gpu: "h800-sxm",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 400e9,
        source: "DeepSeek-V3 technical report (arXiv 2412.19437) §3.1: 8x H800 per node, 8x 400 Gb/s InfiniBand",
    },
    ClusterPreset {
        id: "dgx-b200",
        gpu: "b200",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 400e9,
        source: "NVIDIA DGX B200 datasheet: 8x B200 on NVLink 5 switches, 8x ConnectX-7 400 Gb/s",
    },
    ClusterPreset {
        id: "gb200-nvl72",
        gpu: "gb200",
        gpus_per_node: 4,
        nvlink_domain: 72,
        nics_per_node: 4,
        nic_bits_per_s: 400e9,
        source: "NVIDIA GB200 NVL72 datasheet: 18 compute trays of 2 Grace + 4 B200, one 72-GPU NVLink domain; one 400 Gb/s ConnectX-7 per GPU for scale-out",
    },
    ClusterPreset {
        id: "l40s-pcie",
        gpu: "l40s",
        gpus_per_node: 8,
        nvlink_domain: 1,
        nics_per_node: 2,
        nic_bits_per_s: 200e9,
        source: "PCIe-only 8x L40S server (NVIDIA OVX / 4U PCIe reference builds): no NVLink, GPUs talk through PCIe switches; 2x 200 Gb/s NICs is our assumption, override with --nics-per-node and --nic-gbps",
    },
    ClusterPreset {
        id: "h100-pcie",
        gpu: "h100-pcie",
        gpus_per_node: 8,
        nvlink_domain: 1,
        nics_per_node: 4,
        nic_bits_per_s: 400e9,
        source: "PCIe 8x H100 server: no NVLink bridges; 4x 400 Gb/s NICs is our assumption, override with --nics-per-node and --nic-gbps",
    },
];
