//! The node a [`Profile`] describes, as discovery would find it, with the [`Fault`]s that
//! show in a topology (degraded NVLinks, a slow GPU's clock, a downtrained PCIe link, a
//! NIC that is down) applied. Built once, when the backend is made.

use super::fault::Fault;
use super::profile::{Fabric, Profile};
use crate::discovery::matrix::Matrix;
use crate::discovery::{Clocks, Gpu, Link, Nic, NvlinkFabric, Topology};
use crate::error::{Error, Result};

/// The node a profile describes, with the faults applied.
pub(super) fn build_topology(p: &Profile, faults: &[Fault]) -> Result<Topology> {
    let links = gpu_links(p, faults)?;
    let gpus = (0..p.gpus).map(|g| gpu(p, faults, &links, g)).collect();
    let nics = (0..p.nics).map(|k| nic(p, faults, k)).collect();
    Ok(Topology {
        node: format!("sim-{}", p.name),
        source: record::Backend::Sim,
        versions: record::Versions::default(),
        gpus,
        links: links
            .into_iter()
            .map(|row| row.into_iter().map(Some).collect())
            .collect(),
        nvswitch: matches!(p.fabric, Fabric::NvSwitch { .. }),
        nics,
        notes: Vec::new(),
    })
}

/// The NUMA node of GPU `g`: the GPUs are spread evenly over the sockets, in order.
fn numa(p: &Profile, g: u32) -> u32 {
    g * p.numa_nodes / p.gpus.max(1)
}

/// The divisor of GPU `g`'s NVLinks, where an `nvlink-degraded` fault names it.
fn nvlink_divisor(faults: &[Fault], g: u32) -> Option<u32> {
    faults.iter().find_map(|f| match *f {
        Fault::NvlinkDegraded { gpu, divisor } if gpu == g => Some(divisor),
        _ => None,
    })
}

/// The PCIe path between two devices under different switches: through the CPU on one
/// socket, across the sockets otherwise.
fn pcie_fallback(p: &Profile, a: u32, b: u32) -> Link {
    if numa(p, a) == numa(p, b) {
        Link::Node
    } else {
        Link::Sys
    }
}

/// The `topo -m` table of a [`Fabric::Mesh`] profile; `None` for the other fabrics.
fn mesh(p: &Profile) -> Result<Option<Matrix>> {
    Ok(match p.fabric {
        Fabric::Mesh(text) => Some(Matrix::parse(text).map_err(|e| Error::BadValue {
            field: "profile",
            value: p.name.into(),
            expected: format!("a readable topo -m table ({e})"),
        })?),
        _ => None,
    })
}

/// The link between every pair of GPUs: the profile's NVLinks, divided where a fault
/// degrades either end, else the PCIe path.
fn gpu_links(p: &Profile, faults: &[Fault]) -> Result<Vec<Vec<Link>>> {
    let n = p.gpus;
    let mut links = vec![vec![Link::Itself; n as usize]; n as usize];
    let mesh = mesh(p)?;
    for a in 0..n {
        for b in (0..n).filter(|&b| b != a) {
            let nvlinks = match (p.fabric, &mesh) {
                (Fabric::NvSwitch { links }, _) => links,
                (_, Some(m)) => match m.gpu_links[a as usize][b as usize] {
                    Some(Link::NvLink(k)) => k,
                    _ => 0,
                },
                _ => 0,
            };
            let nvlinks = [a, b].iter().fold(nvlinks, |k, &g| {
                nvlink_divisor(faults, g).map_or(k, |d| k / d)
            });
            links[a as usize][b as usize] = match p.fabric {
                _ if nvlinks > 0 => Link::NvLink(nvlinks),
                Fabric::Pcie { per_switch } if a / per_switch.max(1) == b / per_switch.max(1) => {
                    Link::Pix
                }
                _ => pcie_fallback(p, a, b),
            };
        }
    }
    Ok(links)
}

/// GPU `g` as NVML would report it: a slow GPU's SM clock scaled down, a downtrained PCIe
/// link's width, its NVLinks summed from `links`.
fn gpu(p: &Profile, faults: &[Fault], links: &[Vec<Link>], g: u32) -> Gpu {
    let cores = p.cores_per_numa;
    let lo = numa(p, g) * cores;
    let threads = p.numa_nodes * cores;
    let slow: f64 = faults
        .iter()
        .map(|f| match *f {
            Fault::SlowGpu { gpu, factor } if gpu == g => factor,
            _ => 1.0,
        })
        .product();
    let mut pcie = p.pcie;
    for f in faults {
        if let Fault::PcieDowntrained { gpu, width } = *f {
            if gpu == g {
                pcie.width = width.unwrap_or(pcie.width_max / 2).min(pcie.width_max);
            }
        }
    }
    let nvlinks = match p.fabric {
        Fabric::NvSwitch { links } => nvlink_divisor(faults, g).map_or(links, |d| links / d),
        _ => links[g as usize]
            .iter()
            .map(|l| if let Link::NvLink(k) = l { *k } else { 0 })
            .sum(),
    };
    Gpu {
        index: g,
        uuid: format!("GPU-sim-{}-{g}", p.name),
        name: p.gpu_name.to_string(),
        memory_bytes: p.memory_bytes,
        pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + 0x10 * g),
        numa_node: Some(numa(p, g)),
        cpu_affinity: format!(
            "{lo}-{},{}-{}",
            lo + cores - 1,
            lo + threads,
            lo + threads + cores - 1
        ),
        compute_capability: p.compute_capability,
        clocks: Clocks {
            sm_mhz: Some((f64::from(p.clocks_mhz[0]) * slow).round() as u32),
            sm_max_mhz: Some(p.clocks_mhz[0]),
            memory_mhz: Some(p.clocks_mhz[1]),
            memory_max_mhz: Some(p.clocks_mhz[1]),
        },
        pcie: Some(pcie),
        nvlinks,
        // A node that is its own domain says so; which rack a tray is in depends on the job
        // (`SimBackend::set_job`), which one node's topology does not know.
        nvlink_fabric: (p.nvlink_domain <= p.gpus).then_some(NvlinkFabric::Node),
    }
}

/// The GPU under whose PCIe switch NIC `k` sits: GPU `k x gpus / nics`, as in DGX systems.
fn nic_gpu(p: &Profile, k: u32) -> u32 {
    k * p.gpus / p.nics.max(1)
}

/// NIC `k` as sysfs would show it: its port down where a `nic-down` fault names it, PIX to
/// the GPUs under its switch.
fn nic(p: &Profile, faults: &[Fault], k: u32) -> Nic {
    let n = p.gpus;
    let gpus_per_nic = (n / p.nics.max(1)).max(1);
    let home = nic_gpu(p, k);
    let down = faults.contains(&Fault::NicDown { nic: k });
    Nic {
        name: format!("mlx5_{k}"),
        state: if down { "DOWN" } else { "ACTIVE" }.to_string(),
        rate_bytes_per_s: Some(p.nic_bytes_per_s),
        pci_address: Some(format!("0000:{:02x}:00.0", 0x19 + 0x10 * home)),
        numa_node: Some(numa(p, home)),
        gpu_links: (0..n)
            .map(|g| {
                if g / gpus_per_nic == home / gpus_per_nic {
                    Link::Pix
                } else {
                    pcie_fallback(p, g, home)
                }
            })
            .collect(),
        nic_links: (0..p.nics)
            .map(|j| {
                if j == k {
                    Link::Itself
                } else {
                    pcie_fallback(p, nic_gpu(p, j), home)
                }
            })
            .collect(),
    }
}
