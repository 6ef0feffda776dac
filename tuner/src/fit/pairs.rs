//! The pairwise pass of a fabric run (issue 12): send/recv between two nodes over one rail
//! (GPU i and NIC i on both ends). A slow NIC, cable or leaf port shows on every pair that
//! crosses it, and only on those; a healthy NIC reaches full speed with at least one peer.
//! So a node's figure on a rail is its best pair there, and a node whose best pair on a rail
//! falls behind the fleet is the one to hunt. With two nodes the single pair cannot tell
//! which end is slow, and both are named.

use std::collections::{BTreeMap, BTreeSet};

use record::{Kind, Record, Scope};
use serde::Serialize;

use super::fleet::{Aggregate, Straggler};

/// One node's NIC as its pairs measured it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NicFigure {
    /// Node name.
    pub node: String,
    /// Rail: the GPU and NIC index.
    pub rail: u32,
    /// Best send/recv bus bandwidth over its peers at the largest size, bytes/s (idle fabric).
    pub busbw_bytes_per_s: f64,
    /// Peers measured on this rail.
    pub peers: usize,
}

/// Whether a record is a pairwise point: send/recv across nodes with the other end named.
pub fn is_pair(r: &Record) -> bool {
    r.kind == Kind::SendRecv && r.group.scope == Scope::InterNode && r.detail.peer_node.is_some()
}

/// Each node's figure per rail from the pair records among `records` (others are ignored).
/// Each pair counts for both ends, at its largest out-of-place size. A pair between trays of
/// one NVLink domain ran over NVLink, not through the NICs, and does not count.
pub fn nic_figures(records: &[Record]) -> Vec<NicFigure> {
    // (end, other end, rail) -> (bytes, busbw) of the largest size.
    let mut largest: BTreeMap<(String, String, u32), (u64, f64)> = BTreeMap::new();
    let through_nics = |r: &&Record| is_pair(r) && !r.in_place && !r.inside_one_nvlink_domain();
    for r in records.iter().filter(through_nics) {
        let (Some(a), Some(b), [rail], Some(bw)) = (
            r.group.node.as_deref(),
            r.detail.peer_node.as_deref(),
            r.group.gpus.as_slice(),
            r.busbw.or(r.algbw),
        ) else {
            continue;
        };
        for (end, other) in [(a, b), (b, a)] {
            let e = largest
                .entry((end.to_string(), other.to_string(), *rail))
                .or_insert((r.bytes, bw));
            if r.bytes > e.0 {
                *e = (r.bytes, bw);
            }
        }
    }
    let mut best: BTreeMap<(String, u32), NicFigure> = BTreeMap::new();
    for ((node, _, rail), (_, bw)) in largest {
        let f = best
            .entry((node.clone(), rail))
            .or_insert_with(|| NicFigure {
                node,
                rail,
                busbw_bytes_per_s: bw,
                peers: 0,
            });
        f.busbw_bytes_per_s = f.busbw_bytes_per_s.max(bw);
        f.peers += 1;
    }
    best.into_values().collect()
}

/// Nodes with a NIC more than `threshold` below the median of every node's NIC figures, one
/// straggler per node naming its slow NICs, at the slowest one's figure.
pub fn slow_nics(figures: &[NicFigure], threshold: f64) -> Vec<Straggler> {
    let nodes: BTreeSet<&str> = figures.iter().map(|f| f.node.as_str()).collect();
    if nodes.len() < 2 {
        return Vec::new();
    }
    let all: Vec<f64> = figures.iter().map(|f| f.busbw_bytes_per_s).collect();
    let median = Aggregate::Median.rate(&all);
    let mut slow: BTreeMap<&str, Vec<&NicFigure>> = BTreeMap::new();
    for f in figures
        .iter()
        .filter(|f| f.busbw_bytes_per_s < (1.0 - threshold) * median)
    {
        slow.entry(f.node.as_str()).or_default().push(f);
    }
    slow.into_iter()
        .map(|(node, nics)| {
            let rails: Vec<String> = nics.iter().map(|f| f.rail.to_string()).collect();
            let peers = nics.iter().map(|f| f.peers).max().unwrap_or(0);
            let value = nics
                .iter()
                .map(|f| f.busbw_bytes_per_s)
                .fold(f64::INFINITY, f64::min);
            Straggler {
                node: node.to_string(),
                what: format!(
                    "inter-node send_recv pairs through NIC{} {} (busbw, best of {peers} peer{})",
                    if rails.len() > 1 { "s" } else { "" },
                    rails.join(", "),
                    if peers > 1 { "s" } else { "" }
                ),
                value,
                fleet_median: median,
            }
        })
        .collect()
}

/// The per-NIC bandwidth a job on the nodes `kept` admits: each node's slowest NIC, then
/// `aggregate` over nodes (slowest: a synchronous step waits for its slowest member).
/// `None` when no kept node has a pair.
pub fn fleet_nic_busbw(
    figures: &[NicFigure],
    kept: impl Fn(&str) -> bool,
    aggregate: Aggregate,
) -> Option<NicFigure> {
    let mut slowest: BTreeMap<&str, &NicFigure> = BTreeMap::new();
    for f in figures.iter().filter(|f| kept(&f.node)) {
        let e = slowest.entry(f.node.as_str()).or_insert(f);
        if f.busbw_bytes_per_s < e.busbw_bytes_per_s {
            *e = f;
        }
    }
    let values: Vec<f64> = slowest.values().map(|f| f.busbw_bytes_per_s).collect();
    if values.is_empty() {
        return None;
    }
    let bw = aggregate.rate(&values);
    // The node whose NIC sets the figure (the nearest for percentiles between two nodes).
    let at = slowest.values().min_by(|a, b| {
        (a.busbw_bytes_per_s - bw)
            .abs()
            .total_cmp(&(b.busbw_bytes_per_s - bw).abs())
    })?;
    Some(NicFigure {
        busbw_bytes_per_s: bw,
        ..(*at).clone()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use record::{Backend, Clock, Dtype, Timing};

    /// A send/recv pair point from `a` to `b` on `rail` at `busbw` bytes/s, 64 MiB.
    pub(crate) fn pair(a: &str, b: &str, rail: u32, busbw: f64) -> Record {
        let bytes = 64u64 << 20;
        let timing = Timing::without_spread(bytes as f64 / busbw, Some(20), Clock::Model);
        Record::pair(Backend::Sim, (a, b), rail, bytes, Dtype::Fp32, timing)
    }

    /// Three nodes, two rails, every pair measured once; n2's NIC 1 runs at half the 45 GB/s
    /// the others reach (a DGX H100's 400 Gb/s NIC is 50 GB/s; 0.9 of it idle).
    pub(crate) fn three_nodes_n2_nic1_slow() -> Vec<Record> {
        let mut records = Vec::new();
        for (a, b) in [("n0", "n1"), ("n0", "n2"), ("n1", "n2")] {
            for rail in 0..2 {
                let slow = rail == 1 && (a == "n2" || b == "n2");
                records.push(pair(a, b, rail, if slow { 22.5e9 } else { 45e9 }));
            }
        }
        records
    }

    #[test]
    fn the_node_whose_best_pair_is_slow_is_named() {
        let figures = nic_figures(&three_nodes_n2_nic1_slow());
        assert_eq!(figures.len(), 6);
        // n0 and n1 reach 45 GB/s on rail 1 with each other; n2 reaches 22.5 with either.
        let n2_rail1 = figures.iter().find(|f| f.node == "n2" && f.rail == 1);
        assert_eq!(
            n2_rail1.map(|f| (f.busbw_bytes_per_s, f.peers)),
            Some((22.5e9, 2))
        );
        let slow = slow_nics(&figures, 0.10);
        assert_eq!(slow.len(), 1, "{slow:?}");
        assert_eq!(slow[0].node, "n2");
        assert_eq!(
            slow[0].what,
            "inter-node send_recv pairs through NIC 1 (busbw, best of 2 peers)"
        );
        // Median of five 45s and one 22.5 is 45: 50% short.
        assert!((slow[0].shortfall() - 0.5).abs() < 1e-12);
        let fleet = fleet_nic_busbw(&figures, |_| true, Aggregate::Slowest).unwrap();
        assert_eq!((fleet.node.as_str(), fleet.rail), ("n2", 1));
        assert_eq!(fleet.busbw_bytes_per_s, 22.5e9);
        let without = fleet_nic_busbw(&figures, |n| n != "n2", Aggregate::Slowest).unwrap();
        assert_eq!(without.busbw_bytes_per_s, 45e9);
    }

    #[test]
    fn two_nodes_name_both_ends_and_one_node_names_none() {
        let two = [pair("a", "b", 0, 45e9), pair("a", "b", 1, 20e9)];
        let slow = slow_nics(&nic_figures(&two), 0.10);
        assert_eq!(
            slow.iter().map(|s| s.node.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(slow[0].what.contains("best of 1 peer)"), "{}", slow[0].what);
        let fabric_wide = [pair("a", "b", 0, 20e9), pair("a", "b", 1, 20e9)];
        assert!(slow_nics(&nic_figures(&fabric_wide), 0.10).is_empty());
    }

    /// Trays t0 and t1 of one NVL72 rack exchange over NVLink at 700 GB/s; t0 and r1 (another
    /// rack) through their NICs at 45 GB/s. Only the second is a NIC figure: counting the
    /// first would make t0's NIC look 15 times as fast as it is.
    #[test]
    fn pairs_inside_one_nvlink_domain_are_not_nic_figures() {
        let mut in_rack = pair("t0", "t1", 0, 700e9);
        in_rack.detail.nvlink_domains = Some(1);
        let mut across = pair("t0", "r1", 0, 45e9);
        across.detail.nvlink_domains = Some(2);
        let figures = nic_figures(&[in_rack, across]);
        assert_eq!(
            figures
                .iter()
                .map(|f| (f.node.as_str(), f.busbw_bytes_per_s, f.peers))
                .collect::<Vec<_>>(),
            [("r1", 45e9, 1), ("t0", 45e9, 1)]
        );
    }
}
