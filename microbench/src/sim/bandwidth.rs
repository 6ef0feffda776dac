//! What the sim's transfers sustain: the shares of the nominal NVLink, PCIe, HBM and NIC
//! rates that NCCL and the copy engines reach, and the bandwidth of a pair, a ring, a
//! node's collective and a collective across the job's nodes, from the node's topology.
//! These are an idle microbenchmark's shares, written apart from the tuner's catalog on
//! purpose; `docs/measured.md` sets the two side by side and says why they differ.

use super::{Fault, SimBackend};
use crate::discovery::Link;
use record::Kind;

/// Share of the NVLink rate a ring collective reaches (NCCL's Simple protocol on H100: about
/// 380 of 450 GB/s all-reduce busbw; DGX-1 V100 all-gather: 129 of 150, nccl-tests issue 37).
const RING_SHARE: f64 = 0.85;
/// Share of the NVLink rate a single copy engine reaches between two GPUs.
const P2P_SHARE: f64 = 0.9;
/// Share of the PCIe rate pinned host copies reach.
pub(super) const HOST_COPY_SHARE: f64 = 0.85;
/// Share of the memory bandwidth a device-to-device copy reaches (H200: 4.3 of 4.8 TB/s).
const HBM_COPY_SHARE: f64 = 0.9;
/// Share of the NIC line rate an inter-node ring reaches on an idle fabric (InfiniBand and
/// RoCE nccl-tests busbw: about 90% of line rate at large sizes).
const NET_SHARE: f64 = 0.9;
/// Per-step latency of a ring that crosses the network, against NVLink's: a NIC round trip
/// takes several microseconds, an NVLink hop about one.
pub(super) const NET_HOP_SCALE: f64 = 4.0;
/// Share of its rail's rate a GPU whose own NIC is down still reaches: NCCL sends through a
/// NIC under another PCIe switch, across the CPU's root complex, which halves it (the PHB
/// path class of [`SimBackend::pair_bytes_per_s`] is no better).
const DOWN_RAIL_SHARE: f64 = 0.5;

impl SimBackend {
    /// What GPU `rail` sends through its own NIC to another node: that NIC's share of the
    /// line rate, or [`DOWN_RAIL_SHARE`] of it through a neighbour when it is down.
    pub(super) fn rail_bytes_per_s(&self, rail: u32) -> f64 {
        let t = &self.topology;
        let nic = (rail as usize * t.nics.len()) / t.gpus.len().max(1);
        t.nics.get(nic).map_or(0.0, |n| {
            let rate = n.rate_bytes_per_s.unwrap_or(0.0) * NET_SHARE * self.fabric_factor();
            if n.is_active() {
                rate
            } else {
                rate * DOWN_RAIL_SHARE
            }
        })
    }

    pub(super) fn host_bytes_per_s(&self, gpu: u32) -> f64 {
        self.topology.gpus[gpu as usize]
            .pcie
            .map_or(0.0, |p| p.bytes_per_s())
    }

    /// One-way bandwidth between two GPUs: their NVLinks, or PCIe scaled by the path class.
    pub(super) fn pair_bytes_per_s(&self, a: u32, b: u32) -> f64 {
        match self.topology.link(a, b) {
            Some(Link::NvLink(n)) => f64::from(n) * self.profile.nvlink_bytes_per_s * P2P_SHARE,
            Some(Link::Itself) => self.profile.hbm_bytes_per_s * HBM_COPY_SHARE / 2.0,
            class => {
                // P2P through one switch runs near the PCIe rate; through the CPU it is
                // staged and slower, and across sockets (or an unknown path) slower still.
                let share = match class {
                    Some(Link::Pix) => 0.85,
                    Some(Link::Pxb) => 0.8,
                    Some(Link::Phb) => 0.75,
                    Some(Link::Node) => 0.7,
                    _ => 0.45,
                };
                self.host_bytes_per_s(a).min(self.host_bytes_per_s(b)) * share
            }
        }
    }

    /// Bus bandwidth a ring over `gpus` sustains, and the per-step latency scale of its path.
    fn ring_bytes_per_s(&self, gpus: &[u32]) -> (f64, f64) {
        let t = &self.topology;
        let nv = self.profile.nvlink_bytes_per_s;
        if gpus.len() < 2 {
            return (self.profile.hbm_bytes_per_s * HBM_COPY_SHARE / 2.0, 1.0);
        }
        if t.nvswitch {
            let links = gpus
                .iter()
                .map(|&g| t.gpus[g as usize].nvlinks)
                .min()
                .unwrap_or(0);
            return (f64::from(links) * nv * RING_SHARE, 1.0);
        }
        // Direct NVLinks: NCCL lays several rings over them, so each GPU's links to the
        // group's other members count, if every member has enough neighbours for a ring.
        let neighbours_needed = (gpus.len() - 1).min(2);
        let nv_links = |g: u32| {
            gpus.iter()
                .map(|&h| if h == g { 0 } else { t.nvlinks(g, h) })
                .collect::<Vec<_>>()
        };
        if gpus
            .iter()
            .all(|&g| nv_links(g).iter().filter(|&&n| n > 0).count() >= neighbours_needed)
        {
            let links = gpus
                .iter()
                .map(|&g| nv_links(g).iter().sum::<u32>())
                .min()
                .unwrap_or(0);
            return (f64::from(links) * nv * RING_SHARE, 1.0);
        }
        let ring = gpus.iter().zip(gpus.iter().cycle().skip(1));
        (
            ring.map(|(&a, &b)| self.pair_bytes_per_s(a, b))
                .fold(f64::INFINITY, f64::min),
            2.0,
        )
    }

    /// One GPU's share of the node's active NICs, as an inter-node ring drives it: each GPU
    /// uses its own rail, so a down NIC costs every GPU its share.
    fn nic_share_bytes_per_s(&self) -> f64 {
        let t = &self.topology;
        let active: f64 = t
            .nics
            .iter()
            .filter(|n| n.is_active())
            .filter_map(|n| n.rate_bytes_per_s)
            .sum();
        active / t.gpus.len().max(1) as f64 * NET_SHARE * self.fabric_factor()
    }

    /// The share of its healthy rate the scale-out fabric delivers to this node.
    fn fabric_factor(&self) -> f64 {
        self.faults
            .iter()
            .map(|f| match *f {
                Fault::FabricSlow { factor } => factor,
                _ => 1.0,
            })
            .product()
    }

    /// Bus bandwidth and per-step latency scale of a collective over `gpus` on each node.
    /// Across nodes the ring crosses one NIC per member at each node boundary, so it runs at
    /// the members' NIC shares, never faster than the members reach inside a node; send/recv
    /// and all-to-all run as the tuner prices them (`nic_multiple` in its collective model).
    pub(super) fn collective_bytes_per_s(&self, kind: Kind, gpus: &[u32]) -> (f64, f64) {
        let (inside, scale) = self.node_bytes_per_s(kind, gpus);
        if self.nodes < 2 {
            return (inside, scale);
        }
        if self.domains_of(self.nodes) == 1 {
            return self.domain_bytes_per_s(kind, gpus);
        }
        let per_node = gpus.len() as f64;
        let ranks = per_node * f64::from(self.nodes);
        let members = match kind {
            // Each boundary pair of a send/recv ring uses one NIC.
            Kind::SendRecv => 1.0,
            // Each GPU of an all-to-all sends through its own NIC, which NCCL cannot
            // aggregate (NVIDIA/nccl-tests#267), and only the share bound for other nodes
            // crosses it: (n - 1) / (n - per node) of a NIC in busbw (nccl-tests#130).
            Kind::AllToAll => (ranks - 1.0) / (ranks - per_node),
            _ => per_node,
        };
        let speed = self.group_speed(gpus);
        let own = (inside, members * self.nic_share_bytes_per_s() * speed);
        // A ring across the job's nodes runs at its slowest node.
        let (inside, net) = self
            .job
            .iter()
            .map(|n| {
                let inside = n.sim.node_bytes_per_s(kind, gpus).0 * speed;
                (inside, members * n.sim.nic_share_bytes_per_s() * speed)
            })
            .fold(own, |(i, n), (a, b)| (i.min(a), n.min(b)));
        let inside = if gpus.len() > 1 {
            inside
        } else {
            f64::INFINITY
        };
        (inside.min(net), scale.max(NET_HOP_SCALE))
    }

    /// Bus bandwidth and per-step latency scale of a collective over `gpus` on each of the
    /// job's nodes when all of them share one NVLink domain (trays of one NVL72 rack): every
    /// GPU reaches every other through the rack's NVLink switches, so the collective runs as
    /// inside an NVSwitch node, at the NVLink rate of its slowest member on the slowest node,
    /// with NVLink's step latency, and no NIC carries it.
    fn domain_bytes_per_s(&self, kind: Kind, gpus: &[u32]) -> (f64, f64) {
        let share = if kind == Kind::SendRecv {
            P2P_SHARE
        } else {
            RING_SHARE
        };
        let rate = |sim: &SimBackend| {
            gpus.iter()
                .map(|&g| sim.gpu_nvlink_bytes_per_s(g))
                .fold(f64::INFINITY, f64::min)
                * share
        };
        let slowest = self
            .job
            .iter()
            .map(|n| rate(&n.sim))
            .fold(rate(self), f64::min);
        (slowest * self.group_speed(gpus), 1.0)
    }

    /// All of GPU `gpu`'s NVLinks together, one direction, bytes per second.
    pub(super) fn gpu_nvlink_bytes_per_s(&self, gpu: u32) -> f64 {
        let links = self
            .topology
            .gpus
            .get(gpu as usize)
            .map_or(0, |g| g.nvlinks);
        f64::from(links) * self.profile.nvlink_bytes_per_s
    }

    /// What a copy engine moves between GPU `rail` of two nodes of one NVLink domain.
    pub(super) fn domain_pair_bytes_per_s(&self, rail: u32) -> f64 {
        self.gpu_nvlink_bytes_per_s(rail) * P2P_SHARE
    }

    /// Bus bandwidth and per-step latency scale of a collective over `gpus` inside this
    /// node: the ring, or for send/recv and (without NVSwitches) all-to-all, the slowest
    /// pair; at the slowest member's speed.
    fn node_bytes_per_s(&self, kind: Kind, gpus: &[u32]) -> (f64, f64) {
        let (ring, scale) = self.ring_bytes_per_s(gpus);
        let bw = match kind {
            Kind::SendRecv if gpus.len() > 1 => {
                let ring = gpus.iter().zip(gpus.iter().cycle().skip(1));
                ring.map(|(&a, &b)| self.pair_bytes_per_s(a, b))
                    .fold(f64::INFINITY, f64::min)
            }
            Kind::AllToAll if !self.topology.nvswitch && gpus.len() > 1 => {
                // Every pair talks: the slowest pair, n-1 of them at once, bounds it.
                let slowest = gpus
                    .iter()
                    .flat_map(|&a| gpus.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
                    .map(|(a, b)| self.pair_bytes_per_s(a, b))
                    .fold(f64::INFINITY, f64::min);
                ring.min(slowest * (gpus.len() - 1) as f64)
            }
            _ => ring,
        };
        (bw * self.group_speed(gpus), scale)
    }
}
