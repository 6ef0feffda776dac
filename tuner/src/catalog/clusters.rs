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
        id: "hgx-a800",
        gpu: "a800-sxm-80gb",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 200e9,
        source: "8x A800 SXM4 80GB on the HGX A100 board's six NVSwitches (NV8 between every pair in `nvidia-smi topo -m`) with one GPU-dedicated NIC per GPU, as the DGX A100 reference ships them: 8x ConnectX-6 HDR 200 Gb/s (NVIDIA DGX A100 datasheet; Architects' Tech Alliance, 'GPU server architectures: A100/A800 and H100/H800 nodes')",
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
        id: "hgx-h20",
        gpu: "h20",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 400e9,
        source: "HGX H20: 8x H20 on the HGX H100 board's NVSwitches (NVLink 900 GB/s both directions per the H20 brief); one 400 Gb/s ConnectX-7 per GPU as the HGX H100 reference ships is our assumption, no H20 cluster states its NICs: override with --nics-per-node and --nic-gbps",
    },
    ClusterPreset {
        id: "cray-ex254n-gh200",
        gpu: "gh200-96gb",
        gpus_per_node: 4,
        nvlink_domain: 4,
        nics_per_node: 4,
        nic_bits_per_s: 200e9,
        source: "HPE Cray EX254n, the GH200 node of CSCS Alps (2,688 nodes, 10,752 GH200) and JSC JUPITER: 4 GH200 96GB HBM3 a node, their GPUs NVLink-connected all to all (6 of 18 links to each peer, 150 GB/s a direction per pair; the model prices the GPU's 450), each Grace on its GPU by NVLink-C2C (900 GB/s both directions) and one 200 Gb/s Slingshot-11 NIC per superchip (CSCS user docs, docs/alps/hardware.md and its gh200-schematic: 'l2all: 3x6', '200Gb/s (25GB/s)')",
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
        id: "dgx-b300",
        gpu: "b300",
        gpus_per_node: 8,
        nvlink_domain: 8,
        nics_per_node: 8,
        nic_bits_per_s: 800e9,
        source: "NVIDIA HGX B300 specifications (2025): 8x B300 on NVLink 5 switches (14.4 TB/s), networking 1.6 TB/s against HGX B200's 0.8: one 800 Gb/s ConnectX-8 SuperNIC per GPU, as DGX B300 ships them (its datasheet's port list was not checked word for word)",
    },
    ClusterPreset {
        id: "gb200-nvl72",
        gpu: "gb200",
        gpus_per_node: 4,
        nvlink_domain: 72,
        nics_per_node: 4,
        nic_bits_per_s: 400e9,
        source: "NVIDIA GB200 NVL72 datasheet: 18 compute trays of 2 Grace + 4 B200, one 72-GPU NVLink domain; one 400 Gb/s ConnectX-7 per GPU for scale-out (4 BlueField-3 / ConnectX-7 a tray in MLCommons Inference v6.1, Crusoe GB200-NVL72)",
    },
    ClusterPreset {
        id: "gb300-nvl72",
        gpu: "gb300",
        gpus_per_node: 4,
        nvlink_domain: 72,
        nics_per_node: 4,
        nic_bits_per_s: 800e9,
        source: "NVIDIA GB300 NVL72 enterprise reference architecture (docs.nvidia.com, 'System Hardware & Components'): 18 compute trays of 2 Grace + 4 Blackwell Ultra GPUs, 9 NVSwitch trays joining all 72 GPUs in one NVLink domain (130 TB/s), each tray 4 ConnectX-8 HCAs at 800 Gb/s, one per GPU",
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
