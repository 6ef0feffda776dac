//! What discovery found: GPUs, the link matrix, PCIe links and NICs.

use super::{Collector, Out, Type};
use crate::cache::{Discovery, Snapshot};
use microbench::discovery::{Gpu, Link};

/// Topology families.
pub struct Topology;

/// The identity labels every per-GPU series carries, dcgm-exporter spellings.
pub(super) fn gpu_labels(g: &Gpu) -> [(&'static str, String); 3] {
    [
        ("gpu", g.index.to_string()),
        ("UUID", g.uuid.clone()),
        ("pci_bus_id", g.pci_bus_id.clone()),
    ]
}

/// Owned labels as the borrowed pairs [`super::Family::sample`] takes.
pub(super) fn borrow<'a>(labels: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

impl Collector for Topology {
    fn name(&self) -> &'static str {
        "topology"
    }

    fn collect(&self, s: &Snapshot, out: &mut Out) -> Result<(), String> {
        let Discovery::Found(t) = &s.discovery else {
            return Ok(());
        };
        let n = t.gpus.len();
        if t.links.len() != n || t.links.iter().any(|row| row.len() != n) {
            return Err(format!("link matrix is not {n} x {n}"));
        }
        // NCCL's version is known once the calibration child has loaded it.
        let nccl = s
            .calibration
            .records
            .iter()
            .find_map(|r| r.versions.nccl.clone());
        let unknown = || "unknown".to_string();
        out.family(
            "meshfit_software_info",
            Type::Gauge,
            "Driver, CUDA and NCCL versions behind the measurements (always 1); unknown until read.",
        )
        .sample(
            &[
                ("driver_version", &t.versions.driver.clone().unwrap_or_else(unknown)),
                ("cuda_version", &t.versions.cuda.clone().unwrap_or_else(unknown)),
                ("nccl_version", &nccl.unwrap_or_else(unknown)),
            ],
            1.0,
        );
        let mut info = out.family(
            "meshfit_gpu_info",
            Type::Gauge,
            "GPU identity (always 1), from discovery at start.",
        );
        for g in &t.gpus {
            let cc = format!("{}.{}", g.compute_capability[0], g.compute_capability[1]);
            let mut labels = gpu_labels(g).to_vec();
            labels.push(("model_name", g.name.clone()));
            labels.push(("compute_capability", cc));
            info.sample(&borrow(&labels), 1.0);
        }
        let mut memory = out.family(
            "meshfit_gpu_memory_bytes",
            Type::Gauge,
            "Total GPU memory in bytes, from discovery at start.",
        );
        for g in &t.gpus {
            memory.sample(&borrow(&gpu_labels(g)), g.memory_bytes as f64);
        }
        let pairs = || (0..n).flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)));
        let mut links = out.family(
            "meshfit_gpu_link_info",
            Type::Gauge,
            "How gpu reaches peer_gpu as nvidia-smi topo -m prints it (NV<n>, PIX, PXB, PHB, NODE, SYS); always 1.",
        );
        // A pair discovery could not place has no series (issue 10).
        for (a, b) in pairs() {
            if let Some(link) = t.links[a][b] {
                let (ga, gb, link) = (a.to_string(), b.to_string(), link.to_string());
                links.sample(&[("gpu", &ga), ("peer_gpu", &gb), ("link", &link)], 1.0);
            }
        }
        let mut nvlinks = out.family(
            "meshfit_gpu_nvlink_active_links",
            Type::Gauge,
            "Active NVLinks between gpu and peer_gpu (through NVSwitches where present), from discovery.",
        );
        for (a, b) in pairs() {
            let count = match t.links[a][b] {
                Some(Link::NvLink(k)) => k,
                Some(_) => 0,
                None => continue,
            };
            let (ga, gb) = (a.to_string(), b.to_string());
            nvlinks.sample(&[("gpu", &ga), ("peer_gpu", &gb)], f64::from(count));
        }
        for (name, help, pick) in [
            (
                "meshfit_gpu_pcie_link_generation",
                "PCIe generation the GPU's host link trained at, from discovery.",
                (|p: &microbench::discovery::Pcie| p.generation) as fn(&_) -> u32,
            ),
            (
                "meshfit_gpu_pcie_link_max_generation",
                "Highest PCIe generation the GPU's host link supports, from discovery.",
                |p| p.generation_max,
            ),
            (
                "meshfit_gpu_pcie_link_width",
                "PCIe lanes the GPU's host link trained at, from discovery.",
                |p| p.width,
            ),
            (
                "meshfit_gpu_pcie_link_max_width",
                "Most PCIe lanes the GPU's host link supports, from discovery.",
                |p| p.width_max,
            ),
        ] {
            let mut family = out.family(name, Type::Gauge, help);
            for g in &t.gpus {
                if let Some(p) = &g.pcie {
                    family.sample(&borrow(&gpu_labels(g)), f64::from(pick(p)));
                }
            }
        }
        let mut nic_info = out.family(
            "meshfit_node_nic_info",
            Type::Gauge,
            "RDMA NIC with its port state, PCI address and NUMA node; always 1.",
        );
        for nic in &t.nics {
            let numa = nic.numa_node.map(|n| n.to_string()).unwrap_or_default();
            let pci = nic.pci_address.clone().unwrap_or_default();
            nic_info.sample(
                &[
                    ("nic", &nic.name),
                    ("state", &nic.state),
                    ("pci_address", &pci),
                    ("numa_node", &numa),
                ],
                1.0,
            );
        }
        let mut rate = out.family(
            "meshfit_node_nic_rate_bytes_per_second",
            Type::Gauge,
            "Nominal rate of the NIC's port in bytes per second.",
        );
        for nic in &t.nics {
            if let Some(r) = nic.rate_bytes_per_s {
                rate.sample(&[("nic", &nic.name)], r);
            }
        }
        Ok(())
    }
}
