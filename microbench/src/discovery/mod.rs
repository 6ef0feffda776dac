//! What is wired to what on one node: GPUs, the pairwise link matrix, NICs.
//!
//! [`Topology`] is filled from NVML and sysfs ([`discover`]) or from a sim profile, and printed
//! the way `nvidia-smi topo -m` prints it by [`matrix::Matrix`].

mod live;
pub mod matrix;
mod nvml;
pub mod sysfs;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub use live::{counters, Counters, LiveReader, NvlinkErrors, THROTTLE_REASONS};
pub use nvml::{activity, discover};

/// One node as discovery sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Host name.
    pub node: String,
    /// Where the facts came from: `cuda` for this node's hardware (NVML and sysfs), `sim` for
    /// a model.
    pub source: record::Backend,
    /// Driver and CUDA versions (NCCL's is known only once it is loaded).
    pub versions: record::Versions,
    /// GPUs by index.
    pub gpus: Vec<Gpu>,
    /// `links[i][j]`: how GPU i reaches GPU j, as `nvidia-smi topo -m` prints it.
    pub links: Vec<Vec<Link>>,
    /// True when the GPUs' NVLinks go to NVSwitches, so every GPU reaches every other at the
    /// full NVLink bandwidth.
    pub nvswitch: bool,
    /// RDMA NICs.
    pub nics: Vec<Nic>,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// NVML index (the order `nvidia-smi` uses).
    pub index: u32,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Model name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// PCI bus id, `00000000:18:00.0`.
    pub pci_bus_id: String,
    /// NUMA node the GPU hangs off, when the platform reports it.
    pub numa_node: Option<u32>,
    /// CPUs close to the GPU, as a list like `0-55,112-167`.
    pub cpu_affinity: String,
    /// CUDA compute capability, `[major, minor]`.
    pub compute_capability: [u32; 2],
    /// SM and memory clocks.
    pub clocks: Clocks,
    /// PCIe link to the host, when NVML reports it.
    pub pcie: Option<Pcie>,
    /// Active NVLinks.
    pub nvlinks: u32,
}

/// Clocks in MHz, current against maximum; `None` where NVML does not report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    /// Current SM clock.
    pub sm_mhz: Option<u32>,
    /// Maximum SM clock.
    pub sm_max_mhz: Option<u32>,
    /// Current memory clock.
    pub memory_mhz: Option<u32>,
    /// Maximum memory clock.
    pub memory_max_mhz: Option<u32>,
}

/// The PCIe link's trained generation and width against the most the pair can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pcie {
    /// Current generation.
    pub generation: u32,
    /// Maximum generation.
    pub generation_max: u32,
    /// Current width (lanes).
    pub width: u32,
    /// Maximum width (lanes).
    pub width_max: u32,
}

impl Pcie {
    /// True when the link trained below its maximum width or generation. An idle GPU may
    /// lower its generation to save power, so a generation drop means more under load.
    pub fn degraded(&self) -> bool {
        self.width < self.width_max || self.generation < self.generation_max
    }

    /// Usable host bandwidth per direction in bytes per second, after 128b/130b (gen 3+) or
    /// 8b/10b (gen 1-2) encoding: 2.5, 5, 8, 16, 32, 64 GT/s per lane for gen 1-6.
    pub fn bytes_per_s(&self) -> f64 {
        let (gts, encoding) = match self.generation {
            1 => (2.5, 0.8),
            2 => (5.0, 0.8),
            3 => (8.0, 128.0 / 130.0),
            4 => (16.0, 128.0 / 130.0),
            5 => (32.0, 128.0 / 130.0),
            _ => (64.0, 128.0 / 130.0),
        };
        gts * 1e9 / 8.0 * encoding * f64::from(self.width)
    }
}

/// How two devices reach each other, in `nvidia-smi topo -m` terms, nearest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Link {
    /// The device itself (`X`).
    Itself,
    /// A bonded set of n NVLinks (`NV<n>`).
    NvLink(u32),
    /// At most one PCIe bridge.
    Pix,
    /// Several PCIe bridges, without the host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU).
    Phb,
    /// Between host bridges within one NUMA node.
    Node,
    /// Across NUMA nodes (QPI/UPI/xGMI).
    Sys,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Link::Itself => f.write_str("X"),
            Link::NvLink(n) => write!(f, "NV{n}"),
            Link::Pix => f.write_str("PIX"),
            Link::Pxb => f.write_str("PXB"),
            Link::Phb => f.write_str("PHB"),
            Link::Node => f.write_str("NODE"),
            Link::Sys => f.write_str("SYS"),
        }
    }
}

/// A link name that `nvidia-smi topo -m` does not print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("link `{0}`: expected X, NV<n>, PIX, PXB, PHB, NODE or SYS")]
pub struct BadLink(pub String);

impl FromStr for Link {
    type Err = BadLink;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "X" => Link::Itself,
            "PIX" => Link::Pix,
            "PXB" => Link::Pxb,
            "PHB" => Link::Phb,
            "NODE" => Link::Node,
            "SYS" => Link::Sys,
            _ => match s.strip_prefix("NV").map(str::parse) {
                Some(Ok(n)) if n > 0 => Link::NvLink(n),
                _ => return Err(BadLink(s.to_string())),
            },
        })
    }
}

impl From<Link> for String {
    fn from(link: Link) -> String {
        link.to_string()
    }
}

impl TryFrom<String> for Link {
    type Error = BadLink;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// An RDMA NIC from `/sys/class/infiniband`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// Device name, e.g. `mlx5_0`.
    pub name: String,
    /// Port state of port 1, e.g. `ACTIVE` or `DOWN`.
    pub state: String,
    /// Nominal rate in bytes per second (`400 Gb/sec` is 5e10); `None` if unreadable.
    pub rate_bytes_per_s: Option<f64>,
    /// PCI address, `0000:18:00.1`.
    pub pci_address: Option<String>,
    /// NUMA node, when the platform reports it.
    pub numa_node: Option<u32>,
    /// How the NIC reaches each GPU, by GPU index.
    pub gpu_links: Vec<Link>,
    /// How the NIC reaches each NIC, by NIC position.
    pub nic_links: Vec<Link>,
}

impl Nic {
    /// True when port 1 is up.
    pub fn is_active(&self) -> bool {
        self.state == "ACTIVE"
    }
}

/// What a GPU is busy with; the agent calibrates only idle GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    /// GPU index.
    pub gpu: u32,
    /// Percent of the last sample period a kernel ran.
    pub utilization_percent: u32,
    /// Compute processes running on it.
    pub processes: u32,
}

impl Activity {
    /// True when anything runs on the GPU.
    pub fn is_busy(&self) -> bool {
        self.utilization_percent > 0 || self.processes > 0
    }
}

impl Topology {
    /// How GPU `a` reaches GPU `b`.
    pub fn link(&self, a: u32, b: u32) -> Link {
        self.links[a as usize][b as usize]
    }

    /// NVLinks between `a` and `b` (0 without a direct NVLink).
    pub fn nvlinks(&self, a: u32, b: u32) -> u32 {
        match self.link(a, b) {
            Link::NvLink(n) => n,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_round_trip() {
        for text in ["X", "NV1", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"] {
            assert_eq!(text.parse::<Link>().unwrap().to_string(), text);
        }
        assert_eq!(
            "NV0".parse::<Link>().unwrap_err().to_string(),
            "link `NV0`: expected X, NV<n>, PIX, PXB, PHB, NODE or SYS"
        );
    }

    /// PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s per direction.
    #[test]
    fn pcie_bandwidth_by_generation_and_width() {
        let gen4 = Pcie {
            generation: 4,
            generation_max: 4,
            width: 16,
            width_max: 16,
        };
        assert!((gen4.bytes_per_s() / 1e9 - 31.5).abs() < 0.05);
        assert!(!gen4.degraded());
        let narrow = Pcie { width: 8, ..gen4 };
        assert!(narrow.degraded());
        assert!((narrow.bytes_per_s() * 2.0 - gen4.bytes_per_s()).abs() < 1.0);
    }
}
