//! Collective communication time: the [`CollectiveModel`] interface and its nominal
//! (catalog) implementation. Measured implementations plug in through the same trait.

use record::Kind;
use serde::Serialize;

use crate::catalog::{gpus::pcie_x16_bytes_per_s, Cluster, Efficiency};
use crate::placement::{GroupSpan, LinkClass};

/// The collectives the cost model asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// Sum across ranks, result everywhere.
    AllReduce,
    /// Concatenate shards everywhere.
    AllGather,
    /// Sum, then shard.
    ReduceScatter,
    /// Every rank sends a distinct slice to every other.
    AllToAll,
    /// One point-to-point transfer.
    SendRecv,
}

impl Collective {
    /// The collective a record kind measures; `None` for GEMMs and copies.
    pub fn of(kind: Kind) -> Option<Collective> {
        Some(match kind {
            Kind::AllReduce => Collective::AllReduce,
            Kind::AllGather => Collective::AllGather,
            Kind::ReduceScatter => Collective::ReduceScatter,
            Kind::AllToAll => Collective::AllToAll,
            Kind::SendRecv => Collective::SendRecv,
            _ => return None,
        })
    }

    /// The record kind that measures this collective.
    pub fn kind(self) -> Kind {
        match self {
            Collective::AllReduce => Kind::AllReduce,
            Collective::AllGather => Kind::AllGather,
            Collective::ReduceScatter => Kind::ReduceScatter,
            Collective::AllToAll => Kind::AllToAll,
            Collective::SendRecv => Kind::SendRecv,
        }
    }

    /// nccl-tests bus-bandwidth factor for `n` ranks (the record crate's one table):
    /// busbw = algbw x factor.
    pub fn busbw_factor(self, n: u32) -> f64 {
        record::busbw_factor(self.kind(), n.max(1)).unwrap_or(1.0)
    }
}

/// Where a collective time came from, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Catalog figures times catalog efficiencies.
    Nominal,
    /// Fitted to measurements of the same rank count.
    Measured,
    /// Fitted to measurements of other rank counts.
    Extrapolated,
}

/// Time of collective C on a group, for S bytes per rank (nccl-tests convention: the
/// all-reduce buffer, the gathered output of all-gather, the input of reduce-scatter, the send
/// buffer of all-to-all).
pub trait CollectiveModel {
    /// Seconds for one collective.
    fn time_s(&self, collective: Collective, group: &GroupSpan, bytes: f64) -> f64;
    /// Seconds for `calls` equal collectives that move `bytes` in all: frameworks issue one
    /// call per bucket or per layer, and each pays its own latency.
    fn calls_s(&self, collective: Collective, group: &GroupSpan, bytes: f64, calls: f64) -> f64 {
        if calls <= 0.0 {
            return 0.0;
        }
        calls * self.time_s(collective, group, bytes / calls)
    }
    /// Where the figure for this collective and group comes from.
    fn source(&self, collective: Collective, group: &GroupSpan) -> Source;
    /// Where the figure for one call of `bytes` comes from: a measured curve prices only sizes
    /// near those it swept.
    fn origin(&self, collective: Collective, group: &GroupSpan, bytes: f64) -> Source {
        let _ = bytes;
        self.source(collective, group)
    }
    /// Relative 1-sigma uncertainty of the figure: the fit residuals for measured figures, 0
    /// for catalog ones (whose error validate measures instead).
    fn uncertainty(&self, _collective: Collective, _group: &GroupSpan) -> f64 {
        0.0
    }
}

/// NCCL's algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Ring: n-1 steps per pass, full bus bandwidth.
    Ring,
    /// Double binary tree (all-reduce only): 2 log2(nodes) network steps, half the algorithm
    /// bandwidth of a ring and a tenth less bus bandwidth.
    Tree,
}

/// NCCL's protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// 8-byte lines with inline flags: lowest latency, a quarter of the bandwidth.
    Ll,
    /// 128-byte lines: low latency, 92% of the bandwidth; NVLink only.
    Ll128,
    /// Plain copies behind fences: full bandwidth, highest latency.
    Simple,
}

const PROTOCOLS: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

/// NCCL's cost model (`src/graph/tuning.cc`, NCCL 2.1x): per-call base latency by algorithm
/// and protocol, us.
fn base_latency_us(a: Algorithm, p: Protocol) -> f64 {
    match (a, p) {
        (Algorithm::Tree, Protocol::Ll) => 6.8,
        (Algorithm::Tree, Protocol::Ll128) => 14.0,
        (Algorithm::Tree, Protocol::Simple) => 0.0,
        (Algorithm::Ring, Protocol::Ll) => 6.6,
        (Algorithm::Ring, Protocol::Ll128) => 14.0,
        (Algorithm::Ring, Protocol::Simple) => 8.4,
    }
}

/// NCCL's per-step (hop) latency by link, algorithm and protocol, us (`hwLat` in
/// `src/graph/tuning.cc`).
fn hop_latency_us(link: LinkClass, a: Algorithm, p: Protocol) -> f64 {
    // (LL, LL128, Simple) for tree, then for ring.
    let (tree, ring) = match link {
        LinkClass::Nvlink => ([0.52, 1.2, 28.0], [0.47, 1.9, 3.4]),
        LinkClass::Pcie => ([1.0, 1.9, 28.0], [1.0, 2.5, 5.7]),
        LinkClass::Network => ([5.0, 8.5, 50.0], [2.7, 4.0, 9.6]),
    };
    let row = match a {
        Algorithm::Tree => tree,
        Algorithm::Ring => ring,
    };
    match p {
        Protocol::Ll => row[0],
        Protocol::Ll128 => row[1],
        Protocol::Simple => row[2],
    }
}

/// The link inside a node: NVLink where the GPUs have it, else PCIe.
fn intra_link(nvlink: bool) -> LinkClass {
    if nvlink {
        LinkClass::Nvlink
    } else {
        LinkClass::Pcie
    }
}

/// Bus bandwidth of a protocol against the link's (NCCL `tuning.cc` model refinements).
fn protocol_share(a: Algorithm, p: Protocol, nodes: u32, per_node: u32) -> f64 {
    match (a, p) {
        (Algorithm::Ring, Protocol::Ll) => 0.25,
        (Algorithm::Ring, Protocol::Ll128) if per_node < 2 => 0.7,
        (Algorithm::Ring, Protocol::Ll128) => 0.92,
        (Algorithm::Ring, Protocol::Simple) => 1.0,
        (Algorithm::Tree, Protocol::Ll) => 0.9 / 3.8,
        (Algorithm::Tree, Protocol::Ll128) if nodes == 1 => 0.9 * 7.0 / 9.0,
        (Algorithm::Tree, Protocol::Ll128) => 0.9 * 0.915,
        (Algorithm::Tree, Protocol::Simple) => 0.9,
    }
}

/// Ring steps of one call on n ranks and how many of them cross the network on `nodes` nodes.
fn ring_steps(c: Collective, n: u32, nodes: u32) -> (f64, f64) {
    let (n, nodes) = (f64::from(n), f64::from(nodes));
    match c {
        Collective::AllReduce => (2.0 * (n - 1.0), 2.0 * (nodes - 1.0)),
        Collective::AllGather | Collective::ReduceScatter => (n - 1.0, nodes - 1.0),
        // One message to each peer; the ones on other nodes cross the network.
        Collective::AllToAll => (n - 1.0, n - n / nodes),
        Collective::SendRecv => (1.0, if nodes > 1.0 { 1.0 } else { 0.0 }),
    }
}

/// Collective times as NCCL prices and picks them, from datasheet line rates times catalog
/// efficiencies. For each size it takes the fastest algorithm and protocol, as NCCL's tuner
/// does: t = latency(algorithm, protocol, steps) + S x factor / (busbw x protocol share),
/// with ring latency (n - 1 - inter) x intra hop + inter x network hop (2(n-1) steps for
/// all-reduce) and tree latency 2 ((n/nodes - 1) x intra hop + log2(nodes) x network hop).
#[derive(Debug, Clone)]
pub struct NominalCollectives {
    nvlink_busbw: f64,
    pcie_busbw: f64,
    nic_share_busbw: f64,
    network_contention: f64,
    tier_contention: f64,
    nvlink: bool,
}

/// The bus bandwidth of a collective across nodes in units of one GPU's NIC share, for `n`
/// ranks with `per_node` on each node. NCCL's rings stripe their channels over the NICs, so a
/// group with g members per node drives g of them. A send/recv pair crosses one NIC whatever
/// the count. An all-to-all sends each GPU's share straight to its peers through its own NIC
/// ("Alltoall cannot aggregate the bandwidth of multiple NICs", S. Jeaugey, NCCL,
/// NVIDIA/nccl-tests#267), and only the (n - per_node)/n of it bound for other nodes crosses
/// that NIC, against the (n - 1)/n that busbw counts: N/(N - 1) of a NIC on N nodes, 2x on two
/// (nccl-tests#130).
pub fn nic_multiple(c: Collective, n: u32, per_node: u32) -> f64 {
    match c {
        Collective::SendRecv => 1.0,
        Collective::AllToAll if n > per_node => f64::from(n - 1) / f64::from(n - per_node),
        Collective::AllToAll => 1.0,
        _ => f64::from(per_node.max(1)),
    }
}

/// Nodes under one leaf switch of a rail-optimized fabric: NVIDIA's DGX SuperPOD reference
/// architecture builds scalable units of 32 nodes, each rail on its own leaf; a spine joins up
/// to 32 of them, and bigger fabrics add a third tier.
const LEAF_NODES: u32 = 32;

/// Switch tiers a collective over `nodes` nodes crosses.
pub fn fabric_tiers(nodes: u32) -> u32 {
    match nodes {
        0..=LEAF_NODES => 1,
        n if n <= LEAF_NODES * LEAF_NODES => 2,
        _ => 3,
    }
}

impl NominalCollectives {
    /// Builds the model for one cluster.
    pub fn new(cluster: &Cluster, eff: &Efficiency) -> Self {
        NominalCollectives {
            nvlink_busbw: cluster.gpu.nvlink_bytes_per_s * eff.nvlink_busbw,
            pcie_busbw: pcie_x16_bytes_per_s(cluster.gpu.pcie_gen) * eff.pcie_busbw,
            nic_share_busbw: cluster.nic_share_bytes_per_s() * eff.network_busbw,
            network_contention: eff.network_busbw / eff.network_idle_busbw,
            tier_contention: eff.tier_contention,
            nvlink: cluster.nvlink_domain > 1,
        }
    }

    /// The share of an idle-fabric measurement a job gets across nodes: the catalog's in-job
    /// network efficiency over its idle one.
    pub fn network_contention(&self) -> f64 {
        self.network_contention
    }

    /// The bus bandwidth a sweep of `collective` on `group` would show: the job's figure inside
    /// a node, and across nodes the idle fabric's, above the in-job one the model prices.
    pub fn sweep_busbw(&self, collective: Collective, group: &GroupSpan) -> f64 {
        self.busbw(collective, group) / self.sweep_share(group)
    }

    /// The time a sweep would show for `bytes`; see [`Self::sweep_busbw`].
    pub fn sweep_time_s(&self, collective: Collective, group: &GroupSpan, bytes: f64) -> f64 {
        self.time_s(collective, group, bytes * self.sweep_share(group))
    }

    fn sweep_share(&self, group: &GroupSpan) -> f64 {
        match group.link {
            LinkClass::Network => self.network_contention,
            _ => 1.0,
        }
    }

    /// Bus bandwidth inside one node: NVLink where the GPUs have it, else PCIe.
    pub fn intra_busbw(&self) -> f64 {
        if self.nvlink_busbw > 0.0 {
            self.nvlink_busbw
        } else {
            self.pcie_busbw
        }
    }

    /// Bus bandwidth of a collective on a group, bytes/s: across nodes, its
    /// [`nic_multiple`] of one GPU's NIC share, never more than its members reach inside the
    /// node.
    pub fn busbw(&self, collective: Collective, group: &GroupSpan) -> f64 {
        let intra = self.intra_busbw();
        match group.link {
            LinkClass::Nvlink => self.nvlink_busbw,
            LinkClass::Pcie => self.pcie_busbw,
            LinkClass::Network => {
                let tiers = fabric_tiers(group.nodes) as i32;
                let spine = (1.0 - self.tier_contention).powi(tiers - 1);
                let nics = nic_multiple(collective, group.ranks, group.members_per_node);
                (nics * self.nic_share_busbw * spine).min(intra)
            }
        }
    }

    /// Seconds of one call with a given algorithm and protocol; `None` where NCCL has no such
    /// pair (tree is all-reduce only; LL128 needs NVLink).
    pub fn algorithm_time_s(
        &self,
        c: Collective,
        group: &GroupSpan,
        bytes: f64,
        a: Algorithm,
        p: Protocol,
    ) -> Option<f64> {
        if a == Algorithm::Tree && c != Collective::AllReduce {
            return None;
        }
        if p == Protocol::Ll128 && !self.nvlink {
            return None;
        }
        let n = group.ranks;
        let nodes = group.nodes.max(1);
        let per_node = n.div_ceil(nodes);
        let intra = intra_link(self.nvlink && group.link != LinkClass::Pcie);
        let mut intra_hop = hop_latency_us(intra, a, p);
        if nodes > 1 && p == Protocol::Ll {
            intra_hop *= 1.8;
        }
        let net_hop = hop_latency_us(LinkClass::Network, a, p);
        let latency_us = base_latency_us(a, p)
            + match a {
                Algorithm::Ring => {
                    let (steps, inter) = ring_steps(c, n, nodes);
                    let lat = (steps - inter) * intra_hop + inter * net_hop;
                    // NCCL's "plateau effect of ring" for large multi-node simple all-reduces.
                    if nodes > 1
                        && p == Protocol::Simple
                        && c == Collective::AllReduce
                        && bytes >= f64::from(n) / 16.0 * 65536.0
                    {
                        lat * 1.9
                    } else {
                        lat
                    }
                }
                Algorithm::Tree => {
                    2.0 * (f64::from(per_node - 1) * intra_hop
                        + f64::from(nodes).log2().floor() * net_hop)
                }
            };
        let busbw = self.busbw(c, group) * protocol_share(a, p, nodes, per_node);
        let factor = match a {
            Algorithm::Ring => c.busbw_factor(n),
            Algorithm::Tree => 2.0,
        };
        Some(latency_us * 1e-6 + bytes * factor / busbw)
    }
}

impl CollectiveModel for NominalCollectives {
    fn time_s(&self, collective: Collective, group: &GroupSpan, bytes: f64) -> f64 {
        if group.ranks <= 1 {
            return 0.0;
        }
        [Algorithm::Ring, Algorithm::Tree]
            .into_iter()
            .flat_map(|a| PROTOCOLS.map(|p| (a, p)))
            .filter_map(|(a, p)| self.algorithm_time_s(collective, group, bytes, a, p))
            .fold(f64::INFINITY, f64::min)
    }

    fn source(&self, _: Collective, _: &GroupSpan) -> Source {
        Source::Nominal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};
    use crate::placement::span;

    #[test]
    fn busbw_factors_follow_nccl_tests() {
        assert_eq!(Collective::AllReduce.busbw_factor(8), 1.75);
        assert_eq!(Collective::AllGather.busbw_factor(8), 0.875);
        assert_eq!(Collective::ReduceScatter.busbw_factor(4), 0.75);
        assert_eq!(Collective::AllToAll.busbw_factor(2), 0.5);
        assert_eq!(Collective::SendRecv.busbw_factor(2), 1.0);
    }

    #[test]
    fn large_nvlink_all_reduce_runs_ring_simple_at_busbw() {
        // 1 GiB over 8 H100s: ring/Simple, 8.4 us + 14 hops x 3.4 us, then 1.75 x 1 GiB at
        // 450 GB/s x 0.78 (5.35 ms); the tree pays 2 x 7 x 28 us and 2 x 1 GiB at 90%.
        let c = catalog::cluster("dgx-h100").unwrap();
        let m = NominalCollectives::new(&c, &NOMINAL);
        let g = span(8, 1, &c);
        let bytes = 1073741824.0;
        let t = m.time_s(Collective::AllReduce, &g, bytes);
        let expected = (8.4 + 14.0 * 3.4) * 1e-6 + 1.75 * bytes / (450e9 * 0.78);
        assert!((t / expected - 1.0).abs() < 1e-12, "{t} vs {expected}");
        let tree = m.algorithm_time_s(
            Collective::AllReduce,
            &g,
            bytes,
            Algorithm::Tree,
            Protocol::Simple,
        );
        assert!(tree.unwrap() > t);
    }

    #[test]
    fn ring_latency_at_1024_ranks_and_the_tree_that_avoids_it() {
        // 1,024 ranks on 128 DGX H100 nodes, 8 bytes. Ring all-gather, LL: 6.6 us base +
        // (1023 - 127) NVLink hops at 0.47 x 1.8 us + 127 network hops at 2.7 us = 1.108 ms.
        let c = catalog::cluster("dgx-h100").unwrap();
        let m = NominalCollectives::new(&c, &NOMINAL);
        let g = span(1024, 1, &c);
        assert_eq!((g.nodes, g.members_per_node), (128, 8));
        let bytes = 8.0;
        let ll_ring = (6.6 + 896.0 * 0.47 * 1.8 + 127.0 * 2.7) * 1e-6;
        let busbw = m.busbw(Collective::AllGather, &g);
        let ag = m.time_s(Collective::AllGather, &g, bytes);
        let expected = ll_ring + bytes * 1023.0 / 1024.0 / (busbw * 0.25);
        assert!((ag / expected - 1.0).abs() < 1e-12, "{ag} vs {expected}");
        assert!(ag > 1.1e-3 && ag < 1.12e-3);
        // All-reduce takes the tree: 6.8 + 2 (7 x 0.52 x 1.8 + 7 x 5.0) = 89.9 us, where the
        // ring would pay 2.2 ms and the old alpha x ceil(log2 n) model said 0.3 ms.
        let ar = m.time_s(Collective::AllReduce, &g, bytes);
        let tree =
            (6.8 + 2.0 * (7.0 * 0.52 * 1.8 + 7.0 * 5.0)) * 1e-6 + bytes * 2.0 / (busbw * 0.9 / 3.8);
        assert!((ar / tree - 1.0).abs() < 1e-12, "{ar} vs {tree}");
    }

    #[test]
    fn fabric_tiers_follow_the_superpod_leaf_and_spine() {
        // 32 nodes per rail leaf; a spine joins 32 leaves (1,024 nodes); beyond, a third tier.
        assert_eq!(fabric_tiers(1), 1);
        assert_eq!(fabric_tiers(32), 1);
        assert_eq!(fabric_tiers(33), 2);
        assert_eq!(fabric_tiers(1024), 2);
        assert_eq!(fabric_tiers(1025), 3);
    }

    #[test]
    fn crossing_nodes_runs_at_the_nic_share() {
        // TP=16 over two DGX H100: 8 members per node drive 8 x 50 GB/s of NICs (220 GB/s at
        // the catalog's 55.0%), below NVLink's 351 GB/s; one member per node gets 27.5 GB/s
        // under one leaf, and, at the prior's 10% a tier (the global fit has it at 0), 10%
        // less across 64 nodes, whose traffic crosses the spine.
        let c = catalog::cluster("dgx-h100").unwrap();
        let eff = Efficiency {
            tier_contention: 0.10,
            ..NOMINAL
        };
        let m = NominalCollectives::new(&c, &eff);
        let net = NOMINAL.network_busbw;
        assert!((8.0 * 50e9 * net - 219.88e9).abs() < 1e7);
        let spine = 0.90;
        let ar = Collective::AllReduce;
        assert!((m.busbw(ar, &span(16, 1, &c)) - 8.0 * 50e9 * net).abs() < 1.0);
        assert!((m.busbw(ar, &span(32, 8, &c)) - 50e9 * net).abs() < 1.0);
        assert!((m.busbw(ar, &span(64, 8, &c)) - 50e9 * net * spine).abs() < 1.0);
        assert!((m.busbw(ar, &span(8, 1, &c)) - 450e9 * NOMINAL.nvlink_busbw).abs() < 1.0);
        // A sweep on an idle fabric shows 0.90 of line rate, more than a job gets.
        let dp = span(64, 8, &c);
        let idle = NOMINAL.network_idle_busbw;
        assert!((m.sweep_busbw(ar, &dp) - 50e9 * idle * spine).abs() < 1.0);
        let inside = span(8, 1, &c);
        assert_eq!(m.sweep_busbw(ar, &inside), m.busbw(ar, &inside));
        // Send/recv between two nodes of eight: each pair has one rail. An all-to-all over
        // the same 16 GPUs sends through one NIC per GPU, but only the half of it bound for
        // the other node: busbw 15/8 of a NIC, against the ring's 8 NICs. Over 16 nodes with
        // one GPU each it is one NIC.
        let sr = m.busbw(Collective::SendRecv, &span(16, 1, &c));
        assert!((sr - 50e9 * net).abs() < 1.0);
        let a2a = m.busbw(Collective::AllToAll, &span(16, 1, &c));
        assert!((a2a - 15.0 / 8.0 * 50e9 * net).abs() < 1.0);
        let a2a_spread = m.busbw(Collective::AllToAll, &span(16, 8, &c));
        assert!((a2a_spread - 50e9 * net).abs() < 1.0);
        let bytes = 256e6;
        let inside = m.time_s(Collective::AllReduce, &span(8, 1, &c), bytes);
        let across = m.time_s(Collective::AllReduce, &span(16, 1, &c), bytes);
        assert!(across > inside, "{across} vs {inside}");
    }
}
