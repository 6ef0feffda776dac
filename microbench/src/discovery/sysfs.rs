//! RDMA NICs from `/sys/class/infiniband`, and how near each is to each GPU by PCI path.
//!
//! NVML knows GPU-to-GPU paths only, so NIC nearness is read from where devices sit in the
//! sysfs PCI tree, with nvidia-smi's classes: PIX (one switch), PXB (several), PHB (same root
//! complex), NODE (same NUMA node), SYS (across NUMA nodes).

use super::{Link, Nic};
use std::fs;
use std::path::{Path, PathBuf};

/// A PCI device's place in the tree: the sysfs path components below `/sys/devices`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciPlace {
    /// `["pci0000:17", "0000:17:01.0", ..., "0000:18:00.0"]`.
    pub path: Vec<String>,
    /// NUMA node, when reported (sysfs prints -1 for none).
    pub numa_node: Option<u32>,
}

/// Reads the NICs under `sys` (normally `/sys`); `gpus` are the GPUs' places, by index.
/// A machine without `/sys/class/infiniband` has no RDMA NICs: an empty list.
pub fn nics(sys: &Path, gpus: &[Option<PciPlace>]) -> Vec<Nic> {
    let class = sys.join("class/infiniband");
    let Ok(entries) = fs::read_dir(&class) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let places: Vec<Option<PciPlace>> = names
        .iter()
        .map(|n| place(sys, &class.join(n).join("device")))
        .collect();
    names
        .iter()
        .zip(&places)
        .map(|(name, here)| {
            let port = class.join(name).join("ports/1");
            let read = |file: &str| fs::read_to_string(port.join(file)).ok();
            let near = |other: &Option<PciPlace>| match (here, other) {
                (Some(a), Some(b)) => nearness(a, b),
                _ => Link::Sys,
            };
            Nic {
                name: name.clone(),
                state: read("state").map_or_else(|| "UNKNOWN".to_string(), |s| port_state(&s)),
                rate_bytes_per_s: read("rate").and_then(|r| rate_bytes_per_s(&r)),
                pci_address: here.as_ref().and_then(|p| p.path.last().cloned()),
                numa_node: here.as_ref().and_then(|p| p.numa_node),
                gpu_links: gpus.iter().map(near).collect(),
                nic_links: places
                    .iter()
                    .map(|p| if p == here { Link::Itself } else { near(p) })
                    .collect(),
            }
        })
        .collect()
}

/// The place of the PCI device whose sysfs directory (or a link to it) is `dev`.
pub fn place(sys: &Path, dev: &Path) -> Option<PciPlace> {
    let real: PathBuf = fs::canonicalize(dev).ok()?;
    let devices = fs::canonicalize(sys.join("devices")).ok()?;
    let rel = real.strip_prefix(&devices).ok()?;
    let numa = fs::read_to_string(real.join("numa_node"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok());
    Some(PciPlace {
        path: rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect(),
        numa_node: numa.and_then(|n| u32::try_from(n).ok()),
    })
}

/// The sysfs directory of a GPU from NVML's bus id (`00000000:18:00.0` -> `0000:18:00.0`).
pub fn gpu_device_dir(sys: &Path, nvml_bus_id: &str) -> PathBuf {
    let id = nvml_bus_id.to_ascii_lowercase();
    let short = if id.len() > 12 {
        &id[id.len() - 12..]
    } else {
        &id
    };
    sys.join("bus/pci/devices").join(short)
}

/// How two PCI devices reach each other. Under one switch the paths share the root port and
/// the switch's upstream port and differ in one downstream port each: 4 hops, PIX.
pub fn nearness(a: &PciPlace, b: &PciPlace) -> Link {
    if a.path == b.path {
        return Link::Itself;
    }
    let shared = a
        .path
        .iter()
        .zip(&b.path)
        .take_while(|(x, y)| x == y)
        .count();
    match shared {
        0 if a.numa_node.is_some() && a.numa_node == b.numa_node => Link::Node,
        0 => Link::Sys,
        // Only the root complex in common: through the host bridge.
        1 => Link::Phb,
        _ if (a.path.len() - shared) + (b.path.len() - shared) <= 4 => Link::Pix,
        _ => Link::Pxb,
    }
}

/// `4: ACTIVE` -> `ACTIVE`.
fn port_state(text: &str) -> String {
    let s = text.trim();
    s.split_once(':')
        .map_or(s, |(_, name)| name.trim())
        .to_string()
}

/// `400 Gb/sec (4X NDR)` -> 5e10 bytes per second.
fn rate_bytes_per_s(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let value: f64 = it.next()?.parse().ok()?;
    match it.next()? {
        "Gb/sec" => Some(value * 1e9 / 8.0),
        "Mb/sec" => Some(value * 1e6 / 8.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, numa: u32) -> PciPlace {
        PciPlace {
            path: path.split('/').map(String::from).collect(),
            numa_node: Some(numa),
        }
    }

    #[test]
    fn nearness_follows_nvidia_smi_classes() {
        let gpu = at(
            "pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0",
            0,
        );
        let nic_same_switch = at(
            "pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:01.0/0000:1b:00.0",
            0,
        );
        let nic_deeper = at("pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:02.0/0000:1c:00.0/0000:1d:00.0/0000:1e:00.0", 0);
        let nic_root = at("pci0000:17/0000:17:02.0/0000:30:00.0", 0);
        let nic_node = at("pci0000:38/0000:38:01.0/0000:39:00.0", 0);
        let nic_sys = at("pci0000:97/0000:97:01.0/0000:98:00.0", 1);
        assert_eq!(nearness(&gpu, &gpu), Link::Itself);
        assert_eq!(nearness(&gpu, &nic_same_switch), Link::Pix);
        assert_eq!(nearness(&gpu, &nic_deeper), Link::Pxb);
        assert_eq!(nearness(&gpu, &nic_root), Link::Phb);
        assert_eq!(nearness(&gpu, &nic_node), Link::Node);
        assert_eq!(nearness(&gpu, &nic_sys), Link::Sys);
    }

    #[test]
    fn port_files_are_read() {
        assert_eq!(rate_bytes_per_s("400 Gb/sec (4X NDR)\n"), Some(5e10));
        assert_eq!(rate_bytes_per_s("100 Mb/sec"), Some(1.25e7));
        assert_eq!(rate_bytes_per_s("fast"), None);
        assert_eq!(port_state("4: ACTIVE\n"), "ACTIVE");
        assert_eq!(port_state("1: DOWN"), "DOWN");
    }

    #[test]
    fn bus_ids_map_to_sysfs() {
        assert_eq!(
            gpu_device_dir(Path::new("/sys"), "00000000:1A:00.0"),
            Path::new("/sys/bus/pci/devices/0000:1a:00.0")
        );
    }

    /// A sysfs tree as the kernel lays it out: a GPU and a NIC under one PCIe switch, a second
    /// NIC on another root complex of the other socket, its port down.
    #[test]
    fn nics_are_read_from_sysfs() {
        let sys = tempfile::tempdir().unwrap();
        let root = sys.path();
        let switch = "devices/pci0000:17/0000:17:01.0/0000:18:00.0";
        let dev = |rel: &str, numa: i32| {
            let dir = root.join(rel);
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("numa_node"), format!("{numa}\n")).unwrap();
            dir
        };
        let gpu = dev(&format!("{switch}/0000:19:00.0/0000:1a:00.0"), 0);
        let nic0 = dev(&format!("{switch}/0000:19:01.0/0000:1b:00.0"), 0);
        let nic1 = dev("devices/pci0000:97/0000:97:01.0/0000:98:00.0", 1);
        for (name, target, state, rate) in [
            ("mlx5_0", &nic0, "4: ACTIVE", "400 Gb/sec (4X NDR)"),
            ("mlx5_1", &nic1, "1: DOWN", "200 Gb/sec (4X HDR)"),
        ] {
            let port = root.join("class/infiniband").join(name).join("ports/1");
            fs::create_dir_all(&port).unwrap();
            fs::write(port.join("state"), state).unwrap();
            fs::write(port.join("rate"), rate).unwrap();
            std::os::unix::fs::symlink(
                target,
                root.join("class/infiniband").join(name).join("device"),
            )
            .unwrap();
        }
        let found = nics(root, &[place(root, &gpu)]);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (
                found[0].name.as_str(),
                found[0].state.as_str(),
                found[0].rate_bytes_per_s
            ),
            ("mlx5_0", "ACTIVE", Some(5e10))
        );
        assert_eq!(found[0].pci_address.as_deref(), Some("0000:1b:00.0"));
        assert_eq!(found[0].gpu_links, vec![Link::Pix]);
        assert_eq!(found[0].nic_links, vec![Link::Itself, Link::Sys]);
        assert_eq!((found[1].is_active(), found[1].numa_node), (false, Some(1)));
        assert_eq!(found[1].gpu_links, vec![Link::Sys]);
    }

    #[test]
    fn a_machine_without_rdma_has_no_nics() {
        assert!(nics(Path::new("/nonexistent-sys"), &[]).is_empty());
    }
}
