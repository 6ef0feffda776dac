//! What discovery found: GPUs, the link matrix, PCIe links and NICs.

use super::{Collector, Out, Type};
use crate::cache::{Discovery, Snapshot};
use microbench::discovery::{Gpu, Link, Topology as Found};
use record::{datasheet, Family};

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

/// The node's GPU model as the fleet rules compare it: the one model its GPUs report, or
/// `mixed` where they report several (a node is compared with nodes of its own model, and two
/// models would give a node two places in the fleet).
pub(super) fn node_model(t: &Found) -> &str {
    match t.gpus.split_first() {
        Some((first, rest)) if rest.iter().all(|g| g.name == first.name) => &first.name,
        Some(_) => "mixed",
        None => "",
    }
}

/// `labels` after the node's or GPU's model (`model_name`) where it is known: the series the
/// fleet rules reduce per model carry it, so that no rule joins every node's series to its
/// model (issue 28).
pub(super) fn with_model<'a>(
    model: Option<&'a str>,
    labels: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    model
        .map(|m| ("model_name", m))
        .into_iter()
        .chain(labels.iter().copied())
        .collect()
}

/// Owned labels as the borrowed pairs [`super::Family::sample`] takes.
pub(super) fn borrow<'a>(labels: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Each datasheet GPU model on the node with its nominal intra-node bus bandwidth per
/// direction: the datasheet's NVLink figure when every placed pair of the model's GPUs is
/// NVLink-connected (NVSwitch or full mesh), else PCIe x16 of the part's generation, the
/// path an intra-node collective then crosses. Models outside the datasheet have none.
fn nominal_busbw(t: &Found) -> Vec<(&str, f64)> {
    let mut models: Vec<&str> = t.gpus.iter().map(|g| g.name.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    models
        .into_iter()
        .filter_map(|model| {
            let sheet = datasheet::gpu_for_model_name(model)?;
            let of_model: Vec<usize> = (0..t.gpus.len())
                .filter(|&i| t.gpus[i].name == model)
                .collect();
            let mut placed = of_model
                .iter()
                .flat_map(|&a| {
                    of_model
                        .iter()
                        .filter(move |&&b| b != a)
                        .map(move |&b| (a, b))
                })
                .filter_map(|(a, b)| t.links.get(a)?.get(b).copied().flatten())
                .peekable();
            let nvlink =
                placed.peek().is_some() && placed.all(|l| matches!(l, Link::NvLink(k) if k > 0));
            let bytes_per_s = if nvlink && sheet.nvlink_bytes_per_s > 0.0 {
                sheet.nvlink_bytes_per_s
            } else {
                datasheet::pcie_x16_bytes_per_s(sheet.pcie_gen)
            };
            Some((model, bytes_per_s))
        })
        .collect()
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
        Topology::software(t, s, out);
        Topology::gpus(t, out);
        Topology::links(t, out);
        Topology::nominal(t, out);
        Topology::pcie(t, out);
        Topology::nics(t, out);
        Ok(())
    }
}

/// The steps of [`Topology`]'s collection, one function for each group of families, in the
/// order they are written.
impl Topology {
    /// The driver, CUDA and NCCL versions the measurements were taken with.
    fn software(t: &Found, s: &Snapshot, out: &mut Out) {
        // NCCL's version is known once the calibration child has loaded it.
        let nccl = s
            .calibration
            .records
            .iter()
            .find_map(|r| r.versions.nccl.clone());
        let unknown = || "unknown".to_string();
        out.family(
            "meshfit_software_info",
            Type::Info,
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
    }

    /// Each GPU's identity and memory.
    fn gpus(t: &Found, out: &mut Out) {
        let mut info = out.family(
            Family::GpuInfo.as_str(),
            Type::Info,
            "GPU identity (always 1), from discovery at start.",
        );
        for g in &t.gpus {
            let cc = format!("{}.{}", g.compute_capability[0], g.compute_capability[1]);
            let mut labels = gpu_labels(g).to_vec();
            labels.push(("model_name", g.name.clone()));
            labels.push(("compute_capability", cc));
            info.sample(&borrow(&labels), 1.0);
        }
        // One series per node for the rules' joins by hostname, so that they do not reduce
        // the GPUs' series to it on every evaluation (deploy/README.md, "Rules at fleet scale").
        if !t.gpus.is_empty() {
            out.family(
                "meshfit_node_gpu_model_info",
                Type::Info,
                "The node's GPU model (always 1): the one model its GPUs report, or mixed where they report several.",
            )
            .sample(&[("model_name", node_model(t))], 1.0);
        }
        let mut memory = out.family(
            "meshfit_gpu_memory_bytes",
            Type::Gauge,
            "Total GPU memory in bytes, from discovery at start.",
        );
        for g in &t.gpus {
            memory.sample(&borrow(&gpu_labels(g)), g.memory_bytes as f64);
        }
    }

    /// How each GPU reaches each other: the `topo -m` class and the NVLinks between them.
    fn links(t: &Found, out: &mut Out) {
        let n = t.gpus.len();
        let pairs = || (0..n).flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)));
        let mut links = out.family(
            Family::GpuLinkInfo.as_str(),
            Type::Info,
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
        // What the fleet's NVLink alert compares, 8 series a node where the pairs are 56: a
        // pair through NVSwitches counts the fewer links of its two GPUs, so a GPU that lost
        // one lowers all its pairs, and the GPU itself names it once.
        let mut active = out.family(
            "meshfit_gpu_nvlinks_active",
            Type::Gauge,
            "Active NVLinks of gpu, to NVSwitches and peer GPUs, from discovery; model_name is the node's GPU model, as meshfit_node_gpu_model_info names it.",
        );
        let model = node_model(t);
        for g in &t.gpus {
            let gpu = g.index.to_string();
            active.sample(
                &[("gpu", &gpu), ("model_name", model)],
                f64::from(g.nvlinks),
            );
        }
    }

    /// The datasheet's intra-node bus bandwidth of each GPU model ([`nominal_busbw`]).
    fn nominal(t: &Found, out: &mut Out) {
        let mut nominal = out.family(
            "meshfit_nominal_busbw_bytes_per_second",
            Type::Gauge,
            "Datasheet intra-node bus bandwidth of a model_name GPU in bytes per second and direction: NVLink per GPU where every pair of the node's GPUs is NVLink-connected, else PCIe x16 of the part's generation. The datasheet's figure, not a measurement (meshfit_collective_busbw_bytes_per_second is).",
        );
        for (model, bytes_per_s) in nominal_busbw(t) {
            nominal.sample(
                &[("scope", "intra_node"), ("model_name", model)],
                bytes_per_s,
            );
        }
    }

    /// Each GPU's PCIe host link: generation and width, as trained and at most.
    fn pcie(t: &Found, out: &mut Out) {
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
    }

    /// Each RDMA NIC: its port state, address and NUMA node, and its nominal rate.
    fn nics(t: &Found, out: &mut Out) {
        let mut nic_info = out.family(
            "meshfit_node_nic_info",
            Type::Info,
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
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache::Cache;
    use microbench::{sim, Backend, SimBackend};
    use std::sync::Arc;

    /// The node's topology as the `profile` sim discovers it.
    pub(crate) fn found(profile: &str) -> Found {
        found_with(profile, vec![])
    }

    /// The same with `faults` injected.
    fn found_with(profile: &str, faults: Vec<sim::Fault>) -> Found {
        SimBackend::new(sim::profile(profile).unwrap(), faults, 7)
            .unwrap()
            .topology()
            .unwrap()
    }

    /// What the collector exports for node `n1` with topology `t`.
    fn exported(t: Found) -> String {
        let cache = Cache::new(
            "n1".into(),
            record::Backend::Sim,
            crate::state::Calibration::default(),
        );
        cache.update(|s| s.discovery = Discovery::Found(Arc::new(t)));
        let mut out = Out::new(&cache.snapshot());
        Topology.collect(&cache.snapshot(), &mut out).unwrap();
        out.text()
    }

    /// A DGX H100 (NVSwitch: NV18 between every pair) gets the datasheet's 450 GB/s per GPU
    /// and direction (900 GB/s both directions added); an L40S node (PCIe only) the PCIe
    /// gen4 x16 rate, 15.75 GB/s x 2 = 31.5 GB/s per direction; a V100 is not in the
    /// datasheet and has no series.
    #[test]
    fn nominal_busbw_is_nvlink_where_every_pair_has_it_else_pcie() {
        assert_eq!(
            nominal_busbw(&found("dgx-h100")),
            [("NVIDIA H100 80GB HBM3", 450e9)]
        );
        assert_eq!(
            nominal_busbw(&found("l40s-pcie")),
            [("NVIDIA L40S", 31.5e9)]
        );
        assert_eq!(nominal_busbw(&found("dgx1-v100")), []);
        // One pair of an H100 node over PCIe only: no longer NVLink-connected.
        let mut t = found("dgx-h100");
        t.links[0][1] = Some(Link::Sys);
        assert_eq!(nominal_busbw(&t), [("NVIDIA H100 80GB HBM3", 63e9)]);

        let text = exported(found("dgx-h100"));
        assert!(
            text.contains("meshfit_nominal_busbw_bytes_per_second{scope=\"intra_node\",model_name=\"NVIDIA H100 80GB HBM3\",hostname=\"n1\",backend=\"sim\"} 450000000000\n"),
            "{text}"
        );
    }

    /// An H100 whose GPU 3 has half its 18 NVLinks: through the NVSwitches every pair of
    /// GPU 3 runs on 9, and GPU 3 alone counts 9 of its own, where the alert looks.
    #[test]
    fn a_gpu_that_lost_links_counts_them_once() {
        let fault = "nvlink-degraded:gpu=3".parse().unwrap();
        let text = exported(found_with("dgx-h100", vec![fault]));
        let value = |series: &str| -> Vec<&str> {
            text.lines()
                .filter(|l| l.starts_with(series))
                .filter_map(|l| l.rsplit(' ').next())
                .collect()
        };
        let model = "model_name=\"NVIDIA H100 80GB HBM3\"";
        assert_eq!(
            value(&format!("meshfit_gpu_nvlinks_active{{gpu=\"3\",{model}")),
            ["9"]
        );
        assert_eq!(
            value(&format!("meshfit_gpu_nvlinks_active{{gpu=\"0\",{model}")),
            ["18"]
        );
        assert_eq!(
            value("meshfit_gpu_nvlink_active_links{gpu=\"0\",peer_gpu=\"3\""),
            ["9"]
        );
        assert_eq!(value("meshfit_gpu_nvlinks_active{").len(), 8);
    }

    /// The rules compare a node with nodes of its model; a node of two models is its own
    /// kind, `mixed`, rather than a member of both fleets.
    #[test]
    fn a_node_has_one_model_or_is_mixed() {
        let mut t = found("dgx-h100");
        assert_eq!(node_model(&t), "NVIDIA H100 80GB HBM3");
        t.gpus[3].name = "NVIDIA H200".into();
        assert_eq!(node_model(&t), "mixed");
        t.gpus.clear();
        assert_eq!(node_model(&t), "");

        let lines: Vec<String> = exported(found("dgx-a100"))
            .lines()
            .filter(|l| l.starts_with("meshfit_node_gpu_model_info{"))
            .map(String::from)
            .collect();
        assert_eq!(
            lines,
            ["meshfit_node_gpu_model_info{model_name=\"NVIDIA A100-SXM4-80GB\",hostname=\"n1\",backend=\"sim\"} 1"]
        );
    }

    #[test]
    fn nvml_names_map_to_datasheet_gpus() {
        let id = |n: &str| datasheet::gpu_for_model_name(n).map(|g| g.id);
        assert_eq!(id("NVIDIA H100 80GB HBM3"), Some("h100-sxm"));
        assert_eq!(id("NVIDIA H100 PCIe"), Some("h100-pcie"));
        assert_eq!(id("NVIDIA A100-SXM4-40GB"), Some("a100-sxm-40gb"));
        assert_eq!(id("NVIDIA B200"), Some("b200"));
        assert_eq!(id("Tesla V100-SXM2-32GB"), None);
    }
}
