//! What is wired to what on one node: GPUs, the pairwise link matrix, NICs.
//!
//! [`Topology`] is filled from NVML and sysfs ([`discover`]) or from a sim profile, and printed
//! the way `nvidia-smi topo -m` prints it by [`matrix::Matrix`].

mod live;
pub mod matrix;
mod nvml;
mod nvml_raw;
pub mod sysfs;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub use live::{counters, Counters, LiveReader, NvlinkErrors, SmClock, THROTTLE_REASONS};
pub use nvml::{activity, discover, driver_version};

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
    /// `links[i][j]`: how GPU i reaches GPU j, as `nvidia-smi topo -m` prints it; `None` for a
    /// pair NVML could not place (see `notes`).
    pub links: Vec<Vec<Option<Link>>>,
    /// True when the GPUs' NVLinks go to NVSwitches, so every GPU reaches every other at the
    /// full NVLink bandwidth.
    pub nvswitch: bool,
    /// RDMA NICs.
    pub nics: Vec<Nic>,
    /// What discovery could not read and left out, one line each, for the caller to log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
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
    /// The NVLink fabric the GPU is on; `None` where NVML could not say (its registration
    /// with the fabric manager not finished, or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_fabric: Option<NvlinkFabric>,
}

/// Which NVLink fabric a GPU is on, from NVML's GPU fabric info: GPUs that share one reach
/// each other over NVLink, whatever node they are in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlinkFabric {
    /// Registered with a fabric that spans nodes (a GB200 or GB300 NVL72 rack): every GPU of
    /// the NVLink domain has the same cluster UUID and clique.
    Shared {
        /// The fabric's cluster UUID, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
        cluster_uuid: String,
        /// The clique, a partition of the cluster whose GPUs reach each other.
        clique_id: u32,
    },
    /// No fabric beyond the node: NVSwitches inside it (DGX H100) or none. The node is the
    /// GPU's NVLink domain.
    Node,
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

/// The PCIe link's trained generation and width against the most the link can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pcie {
    /// Current generation. An idle GPU lowers it to save power, so at idle it says nothing
    /// about the link's health.
    pub generation: u32,
    /// Highest generation the GPU and its slot together allow (NVML's "max link generation
    /// possible with this device and system"); what the link trains to under load.
    pub generation_max: u32,
    /// Current width (lanes); a GPU keeps its lanes at idle.
    pub width: u32,
    /// Highest width the GPU and its slot together allow.
    pub width_max: u32,
    /// Highest generation the GPU itself supports, when NVML reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_gpu_max: Option<u32>,
}

impl Pcie {
    /// True when the link lost lanes, or when the slot holds the GPU below its own generation
    /// (a Gen5 GPU behind a Gen4 riser). The current generation does not count: it drops at
    /// idle (issue 10).
    pub fn degraded(&self) -> bool {
        self.width < self.width_max
            || self
                .generation_gpu_max
                .is_some_and(|gpu| gpu > self.generation_max)
    }

    /// Usable host bandwidth per direction in bytes per second under load: the generation the
    /// link trains to when busy ([`Pcie::generation_max`]) at its current width, after
    /// 128b/130b (gen 3+) or 8b/10b (gen 1-2) encoding: 2.5, 5, 8, 16, 32, 64 GT/s per lane for
    /// gen 1-6.
    pub fn bytes_per_s(&self) -> f64 {
        let (gts, encoding) = match self.generation_max {
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
    /// Percent of the last sample period a kernel ran; `None` where NVML cannot say (MIG).
    pub utilization_percent: Option<u32>,
    /// Compute processes running on it; `None` where NVML cannot say.
    pub processes: Option<u32>,
}

impl Activity {
    /// True when a counter NVML gave shows something running on the GPU.
    pub fn is_busy(&self) -> bool {
        self.utilization_percent.is_some_and(|u| u > 0) || self.processes.is_some_and(|p| p > 0)
    }
}

impl Topology {
    /// How GPU `a` reaches GPU `b`; `None` where discovery could not tell.
    pub fn link(&self, a: u32, b: u32) -> Option<Link> {
        self.links[a as usize][b as usize]
    }

    /// NVLinks between `a` and `b` (0 without a direct NVLink).
    pub fn nvlinks(&self, a: u32, b: u32) -> u32 {
        match self.link(a, b) {
            Some(Link::NvLink(n)) => n,
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

    const GEN4_X16: Pcie = Pcie {
        generation: 4,
        generation_max: 4,
        width: 16,
        width_max: 16,
        generation_gpu_max: Some(4),
    };

    /// PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s per direction.
    #[test]
    fn pcie_bandwidth_by_generation_and_width() {
        assert!((GEN4_X16.bytes_per_s() / 1e9 - 31.5).abs() < 0.05);
        assert!(!GEN4_X16.degraded());
        let narrow = Pcie {
            width: 8,
            ..GEN4_X16
        };
        assert!(narrow.degraded());
        assert!((narrow.bytes_per_s() * 2.0 - GEN4_X16.bytes_per_s()).abs() < 1.0);
    }

    /// nvidia-smi on an idle H100 prints `PCIe Generation Max 5, Current 1`: the link is
    /// healthy and runs at gen 5 once busy (issue 10).
    #[test]
    fn an_idle_link_at_a_low_generation_is_not_degraded() {
        let idle = Pcie {
            generation: 1,
            ..GEN4_X16
        };
        assert!(!idle.degraded());
        assert_eq!(idle.bytes_per_s(), GEN4_X16.bytes_per_s());
    }

    /// A Gen5 GPU whose slot allows gen 4 at most is held back; a GPU whose own maximum
    /// NVML does not report is judged by its width alone.
    #[test]
    fn a_slot_below_the_gpus_generation_is_degraded() {
        let gen5_gpu_in_gen4_slot = Pcie {
            generation_gpu_max: Some(5),
            ..GEN4_X16
        };
        assert!(gen5_gpu_in_gen4_slot.degraded());
        let unknown = Pcie {
            generation_gpu_max: None,
            ..GEN4_X16
        };
        assert!(!unknown.degraded());
    }
}
