//! Discovery through NVML: GPUs, their NVLinks and PCIe paths, and what runs on them.

use super::nvml_raw::{self, RemoteType};
use super::sysfs::{self, PciPlace};
use super::{Activity, Clocks, Gpu, Link, Pcie, Topology};
use crate::error::{Error, Result};
use nvml_wrapper::enum_wrappers::device::{Clock, TopologyLevel};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::path::Path;

/// NVML_NVLINK_MAX_LINKS in nvml.h (18 on Hopper).
pub(super) const MAX_NVLINKS: u32 = 18;

/// CPU mask words asked of NVML: 16 x 64 = 1024 CPUs.
const CPU_MASK_WORDS: usize = 16;

/// Loads NVML, telling a missing driver apart from other failures.
pub(super) fn init() -> Result<Nvml> {
    Nvml::init().map_err(|e| match e {
        NvmlError::LibloadingError(_) => Error::NoDriver(
            "libnvidia-ml.so.1 cannot be loaded (is the NVIDIA driver installed?)".into(),
        ),
        NvmlError::DriverNotLoaded => {
            Error::NoDriver("the NVIDIA kernel driver is not loaded".into())
        }
        source => Error::Nvml {
            call: "nvmlInit",
            gpu: None,
            source,
        },
    })
}

pub(super) fn nvml_err(call: &'static str, gpu: Option<u32>) -> impl FnOnce(NvmlError) -> Error {
    move |source| Error::Nvml { call, gpu, source }
}

/// Every GPU's handle, in index order.
pub(super) fn devices(nvml: &Nvml) -> Result<Vec<Device<'_>>> {
    let count = nvml
        .device_count()
        .map_err(nvml_err("nvmlDeviceGetCount", None))?;
    (0..count)
        .map(|i| {
            nvml.device_by_index(i)
                .map_err(nvml_err("nvmlDeviceGetHandleByIndex", Some(i)))
        })
        .collect()
}

/// Discovers this node's GPUs, their link matrix and its RDMA NICs. A GPU pair NVML cannot
/// place is left out of the matrix with a note, not the whole discovery (issue 10).
pub fn discover() -> Result<Topology> {
    let nvml = init()?;
    let devices = devices(&nvml)?;
    let mut gpus: Vec<Gpu> = devices
        .iter()
        .zip(0..)
        .map(|(d, i)| gpu(d, i))
        .collect::<Result<_>>()?;
    let bus_ids: Vec<String> = gpus.iter().map(|g| short_bus_id(&g.pci_bus_id)).collect();
    let nvlinks: Vec<NvLinks> = devices
        .iter()
        .map(|d| NvLinks::tally(&remotes(d), &bus_ids))
        .collect();
    let nvswitch = nvlinks.iter().any(|n| n.to_switch > 0);
    let mut notes = Vec::new();
    let links = link_matrix(
        &nvlinks,
        |i, j| {
            let peer = nvml.device_by_index(j as u32)?;
            devices[i].topology_common_ancestor(peer)
        },
        &mut notes,
    );
    for (g, n) in gpus.iter_mut().zip(&nvlinks) {
        g.nvlinks = n.total();
    }
    let sys = Path::new("/sys");
    let places: Vec<Option<PciPlace>> = gpus
        .iter()
        .map(|g| sysfs::place(sys, &sysfs::gpu_device_dir(sys, &g.pci_bus_id)))
        .collect();
    let versions = record::Versions {
        driver: nvml.sys_driver_version().ok(),
        cuda: nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        ..record::Versions::default()
    };
    Ok(Topology {
        node: hostname(),
        source: record::Backend::Cuda,
        versions,
        nics: sysfs::nics(sys, &places),
        gpus,
        links,
        nvswitch,
        notes,
    })
}

/// The GPU link matrix: NVLink where the census found it (directly, or both GPUs on
/// NVSwitches), else the PCIe path class from `common_ancestor(i, j)`. A pair whose ancestor
/// NVML cannot give is `None`, with a note.
fn link_matrix(
    nvlinks: &[NvLinks],
    mut common_ancestor: impl FnMut(usize, usize) -> Result<TopologyLevel, NvmlError>,
    notes: &mut Vec<String>,
) -> Vec<Vec<Option<Link>>> {
    let n = nvlinks.len();
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        Some(Link::Itself)
                    } else if nvlinks[i].to_gpu[j] > 0 {
                        Some(Link::NvLink(nvlinks[i].to_gpu[j]))
                    } else if nvlinks[i].to_switch > 0 && nvlinks[j].to_switch > 0 {
                        Some(Link::NvLink(nvlinks[i].to_switch.min(nvlinks[j].to_switch)))
                    } else {
                        match common_ancestor(i, j) {
                            Ok(level) => Some(pcie_link(level)),
                            Err(e) => {
                                notes.push(format!(
                                    "GPU{i}-GPU{j}: nvmlDeviceGetTopologyCommonAncestor failed \
                                     ({e}); the pair is left out of the link matrix"
                                ));
                                None
                            }
                        }
                    }
                })
                .collect()
        })
        .collect()
}

/// The NVIDIA driver's version as NVML reports it, `580.65.06`; `None` where NVML does not
/// start (no driver, or no kernel module).
pub fn driver_version() -> Option<String> {
    init().ok()?.sys_driver_version().ok()
}

/// Utilisation and compute processes per GPU. A counter NVML cannot give for one GPU is
/// unknown rather than an error for the node: MIG instances report utilisation as not
/// supported, and the process count still tells busy from idle there.
pub fn activity() -> Result<Vec<Activity>> {
    let nvml = init()?;
    Ok(devices(&nvml)?
        .iter()
        .zip(0..)
        .map(|(d, gpu)| {
            let utilization = d.utilization_rates().map(|u| u.gpu);
            let processes = d.running_compute_processes().map(|p| p.len() as u32);
            activity_of(gpu, utilization, processes)
        })
        .collect())
}

/// One GPU's activity from its two NVML counters, each known or not. The reason one is not
/// known is not kept: on MIG it is the same every read, and `None` already says it.
fn activity_of(
    gpu: u32,
    utilization: std::result::Result<u32, NvmlError>,
    processes: std::result::Result<u32, NvmlError>,
) -> Activity {
    Activity {
        gpu,
        utilization_percent: utilization.ok(),
        processes: processes.ok(),
    }
}

/// The node's host name.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".to_string())
}

fn gpu(d: &Device, index: u32) -> Result<Gpu> {
    let at = Some(index);
    let pci = d.pci_info().map_err(nvml_err("nvmlDeviceGetPciInfo", at))?;
    let cc = d
        .cuda_compute_capability()
        .map_err(nvml_err("nvmlDeviceGetCudaComputeCapability", at))?;
    let pcie = (|| -> Result<Pcie, NvmlError> {
        Ok(Pcie {
            generation: d.current_pcie_link_gen()?,
            generation_max: d.max_pcie_link_gen()?,
            width: d.current_pcie_link_width()?,
            width_max: d.max_pcie_link_width()?,
            generation_gpu_max: nvml_raw::gpu_max_pcie_generation(d).ok(),
        })
    })();
    Ok(Gpu {
        index,
        uuid: d.uuid().map_err(nvml_err("nvmlDeviceGetUUID", at))?,
        name: d.name().map_err(nvml_err("nvmlDeviceGetName", at))?,
        memory_bytes: d
            .memory_info()
            .map_err(nvml_err("nvmlDeviceGetMemoryInfo", at))?
            .total,
        pci_bus_id: pci.bus_id,
        numa_node: d.numa_node_id().ok(),
        cpu_affinity: d
            .cpu_affinity(CPU_MASK_WORDS)
            .map_or_else(|_| "N/A".to_string(), |mask| cpu_list(&mask)),
        compute_capability: [cc.major.max(0) as u32, cc.minor.max(0) as u32],
        clocks: Clocks {
            sm_mhz: d.clock_info(Clock::SM).ok(),
            sm_max_mhz: d.max_clock_info(Clock::SM).ok(),
            memory_mhz: d.clock_info(Clock::Memory).ok(),
            memory_max_mhz: d.max_clock_info(Clock::Memory).ok(),
        },
        pcie: pcie.ok(),
        nvlinks: 0,
        nvlink_fabric: nvml_raw::nvlink_fabric(d),
    })
}

/// Where one active NVLink leads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Remote {
    /// A GPU, by its short PCI bus id.
    Gpu(String),
    /// An NVSwitch: only when NVML's remote device type says so.
    Switch,
    /// Anything else, or a link whose far end NVML cannot tell.
    Other,
}

/// The far end of every active NVLink of `d`.
fn remotes(d: &Device) -> Vec<Remote> {
    (0..MAX_NVLINKS)
        .filter_map(|l| {
            let link = d.link_wrapper_for(l);
            // Links a GPU does not have answer with an error; they are not active.
            if !link.is_active().unwrap_or(false) {
                return None;
            }
            Some(match nvml_raw::remote_type(d, l) {
                Ok(RemoteType::Switch) => Remote::Switch,
                Ok(RemoteType::Gpu) => link
                    .remote_pci_info()
                    .map_or(Remote::Other, |p| Remote::Gpu(short_bus_id(&p.bus_id))),
                Ok(RemoteType::Other) | Err(_) => Remote::Other,
            })
        })
        .collect()
}

/// Active NVLinks of one GPU, by where they lead.
#[derive(Debug, PartialEq, Eq)]
struct NvLinks {
    /// Links to each GPU of this node, by index.
    to_gpu: Vec<u32>,
    /// Links to NVSwitches.
    to_switch: u32,
    /// Links to anything else: another node's GPU, an unknown device.
    other: u32,
}

impl NvLinks {
    /// Counts `remotes` by where they lead; `bus_ids` are this node's GPUs' short bus ids.
    fn tally(remotes: &[Remote], bus_ids: &[String]) -> NvLinks {
        let mut n = NvLinks {
            to_gpu: vec![0; bus_ids.len()],
            to_switch: 0,
            other: 0,
        };
        for r in remotes {
            match r {
                Remote::Switch => n.to_switch += 1,
                Remote::Gpu(bus) => match bus_ids.iter().position(|b| b == bus) {
                    Some(peer) => n.to_gpu[peer] += 1,
                    None => n.other += 1,
                },
                Remote::Other => n.other += 1,
            }
        }
        n
    }

    /// Every active link.
    fn total(&self) -> u32 {
        self.to_gpu.iter().sum::<u32>() + self.to_switch + self.other
    }
}

/// `00000000:18:00.0` and `0000:18:00.0` name the same device.
fn short_bus_id(id: &str) -> String {
    let id = id.to_ascii_lowercase();
    id[id.len().saturating_sub(12)..].to_string()
}

fn pcie_link(level: TopologyLevel) -> Link {
    match level {
        TopologyLevel::Internal => Link::Itself,
        TopologyLevel::Single => Link::Pix,
        TopologyLevel::Multiple => Link::Pxb,
        TopologyLevel::HostBridge => Link::Phb,
        TopologyLevel::Node => Link::Node,
        TopologyLevel::System => Link::Sys,
    }
}

/// A CPU bit mask as a list of ranges, `0-55,112-167`, the way nvidia-smi prints affinity.
pub(crate) fn cpu_list(mask: &[std::os::raw::c_ulong]) -> String {
    let bits = std::os::raw::c_ulong::BITS as usize;
    let cpus: Vec<usize> = (0..mask.len() * bits)
        .filter(|&c| (mask[c / bits] >> (c % bits)) & 1 == 1)
        .collect();
    let mut ranges: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        ranges.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    if ranges.is_empty() {
        "N/A".to_string()
    } else {
        ranges.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a MIG instance utilisation is not supported: the GPU's activity keeps its process
    /// count and leaves utilisation unknown, instead of failing the whole node.
    #[test]
    fn a_counter_nvml_lacks_is_unknown_not_fatal() {
        let mig = activity_of(2, Err(NvmlError::NotSupported), Ok(1));
        assert_eq!(
            (mig.gpu, mig.utilization_percent, mig.processes),
            (2, None, Some(1))
        );
        assert!(mig.is_busy());
        let idle = activity_of(0, Err(NvmlError::NotSupported), Ok(0));
        assert!(!idle.is_busy());
        let both = activity_of(1, Ok(40), Err(NvmlError::Unknown));
        assert_eq!((both.utilization_percent, both.processes), (Some(40), None));
        assert!(both.is_busy());
    }

    #[test]
    fn cpu_masks_print_as_ranges() {
        assert_eq!(cpu_list(&[0xff, 0]), "0-7");
        assert_eq!(cpu_list(&[0b1011]), "0-1,3");
        assert_eq!(cpu_list(&[0, 1]), "64");
        assert_eq!(cpu_list(&[0]), "N/A");
    }

    #[test]
    fn bus_ids_compare_without_the_long_domain() {
        assert_eq!(
            short_bus_id("00000000:1A:00.0"),
            short_bus_id("0000:1a:00.0")
        );
    }

    fn bus(id: &str) -> String {
        short_bus_id(id)
    }

    /// Two GPUs and a switch: a link counts as an NVSwitch only when NVML says so; a GPU
    /// that is not on this node, or a device NVML cannot name, is neither (issue 10).
    #[test]
    fn nvlinks_count_a_switch_only_when_nvml_says_so() {
        let bus_ids = [bus("0000:18:00.0"), bus("0000:2a:00.0")];
        let n = NvLinks::tally(
            &[
                Remote::Gpu(bus("00000000:2A:00.0")),
                Remote::Gpu(bus("0000:2a:00.0")),
                Remote::Switch,
                Remote::Gpu(bus("0000:99:00.0")),
                Remote::Other,
            ],
            &bus_ids,
        );
        assert_eq!(
            n,
            NvLinks {
                to_gpu: vec![0, 2],
                to_switch: 1,
                other: 2,
            }
        );
        assert_eq!(n.total(), 5);
        let unknown = NvLinks::tally(&vec![Remote::Other; 18], &bus_ids);
        assert_eq!(unknown.to_switch, 0);
        assert_eq!(unknown.total(), 18);
    }

    fn pcie_only(gpus: usize) -> Vec<NvLinks> {
        (0..gpus)
            .map(|_| NvLinks {
                to_gpu: vec![0; gpus],
                to_switch: 0,
                other: 0,
            })
            .collect()
    }

    /// A common-ancestor error drops that pair with a note; the rest of the matrix stands.
    #[test]
    fn a_pair_nvml_cannot_place_is_dropped_not_the_discovery() {
        let mut notes = Vec::new();
        let links = link_matrix(
            &pcie_only(3),
            |i, j| match (i.min(j), i.max(j)) {
                (0, 2) => Err(NvmlError::Unknown),
                (0, 1) => Ok(TopologyLevel::Single),
                _ => Ok(TopologyLevel::System),
            },
            &mut notes,
        );
        assert_eq!(
            links,
            vec![
                vec![Some(Link::Itself), Some(Link::Pix), None],
                vec![Some(Link::Pix), Some(Link::Itself), Some(Link::Sys)],
                vec![None, Some(Link::Sys), Some(Link::Itself)],
            ]
        );
        assert_eq!(notes.len(), 2);
        assert!(
            notes[0].starts_with("GPU0-GPU2: nvmlDeviceGetTopologyCommonAncestor failed ("),
            "{}",
            notes[0]
        );
        assert!(notes[0].ends_with("the pair is left out of the link matrix"));
    }

    /// GPUs on NVSwitches reach each other over the fewer of their switch links, without
    /// asking NVML for a PCIe path.
    #[test]
    fn switched_gpus_reach_each_other_over_nvlink() {
        let mut nvlinks = pcie_only(2);
        nvlinks[0].to_switch = 18;
        nvlinks[1].to_switch = 9;
        let mut notes = Vec::new();
        let links = link_matrix(&nvlinks, |_, _| Err(NvmlError::Unknown), &mut notes);
        assert_eq!(links[0][1], Some(Link::NvLink(9)));
        assert!(notes.is_empty());
    }

    /// This machine has no NVIDIA driver: discovery says so in one line, and does not panic.
    #[test]
    fn no_driver_is_a_clear_error() {
        if Path::new("/dev/nvidiactl").exists() {
            return;
        }
        let err = discover().unwrap_err().to_string();
        assert!(err.starts_with("no NVIDIA driver:"), "{err}");
        assert!(!err.contains('\n'));
    }
}
