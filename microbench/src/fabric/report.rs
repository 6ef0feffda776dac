//! What the pairwise pass says: which node's NIC, or which pair, is slow.
//!
//! A rail's reference is the median busbw of that rail's pairs. A node is slow on rail i
//! (its NIC i) when every one of its pairs on rail i is below [`SLOW_RATIO`] of the median of
//! the rail's pairs that do not involve it: its own pairs would pull a plain median down
//! (with 3 nodes, 2 of the 3 pairs touch the faulty node). A pair is slow when it is below
//! [`SLOW_RATIO`] of its rail's median and neither end is a slow node on that rail: a cable
//! or switch port between the two. With 2 nodes there is one pair per rail and no reference:
//! naming a node needs 3 or more.

use record::{Kind, Record, Scope};
use std::fmt;

/// Below this share of its rail's median a pair counts as slow: healthy rails scatter by a
/// few percent, a down NIC or a downtrained link costs a half or more.
pub const SLOW_RATIO: f64 = 0.7;

/// One slow component.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// A node's NIC `rail`: all its pairs on that rail are slow.
    Nic {
        /// The node.
        node: String,
        /// The rail, and the NIC its GPU uses.
        rail: u32,
        /// Median busbw of the node's pairs on the rail, bytes per second.
        busbw: f64,
        /// Median busbw of the rail's pairs without the node, bytes per second.
        reference: f64,
        /// The nodes at the other end of its pairs.
        peers: Vec<String>,
    },
    /// One pair on one rail, neither end slow by itself.
    Pair {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// The rail.
        rail: u32,
        /// Its busbw, bytes per second.
        busbw: f64,
        /// The rail's median, bytes per second.
        reference: f64,
    },
    /// Too few nodes to tell a slow node from a slow pair.
    TooFewNodes(usize),
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gb = |b: f64| b / 1e9;
        match self {
            Finding::Nic {
                node,
                rail,
                busbw,
                reference,
                peers,
            } => {
                let pairs: Vec<String> = peers.iter().map(|p| format!("{node}-{p}")).collect();
                write!(
                    f,
                    "slow: node {node} NIC {rail} (rail {rail}): {:.1} GB/s vs fleet median {:.1} GB/s on pairs {}",
                    gb(*busbw),
                    gb(*reference),
                    pairs.join(", ")
                )
            }
            Finding::Pair {
                a,
                b,
                rail,
                busbw,
                reference,
            } => write!(
                f,
                "slow: pair {a}-{b} on rail {rail}: {:.1} GB/s vs rail median {:.1} GB/s (a cable or switch port between them)",
                gb(*busbw),
                gb(*reference)
            ),
            Finding::TooFewNodes(n) => write!(
                f,
                "pairwise: {n} node(s) give one pair per rail, nothing to compare it with; 3 or more nodes name a slow node"
            ),
        }
    }
}

/// Whether `record` is a point of the pairwise pass (it names the node at the other end).
pub fn is_pair(record: &Record) -> bool {
    record.kind == Kind::SendRecv
        && record.group.scope == Scope::InterNode
        && record.detail.peer_node.is_some()
}

/// The pairwise points as a table, one line per pair and rail, in the order they ran.
pub fn pair_table(records: &[Record]) -> String {
    let mut out = String::from(
        "# Pairwise send/recv, GPU i to GPU i through NIC i (GB = 1e9 B)\n\
         #  rail  pair                             size (B)   busbw (GB/s)\n",
    );
    for r in records.iter().filter(|r| is_pair(r)) {
        let pair = format!(
            "{}-{}",
            r.group.node.as_deref().unwrap_or("?"),
            r.detail.peer_node.as_deref().unwrap_or("?")
        );
        out.push_str(&format!(
            "  {:>5}  {pair:<30} {:>10}  {:>13.2}{}\n",
            r.group.gpus.first().map_or("?".to_string(), u32::to_string),
            r.bytes,
            r.busbw.unwrap_or(f64::NAN) / 1e9,
            if r.inside_one_nvlink_domain() {
                "  (one NVLink domain: over NVLink, no NIC)"
            } else {
                ""
            }
        ));
    }
    out
}

/// One pairwise point: its ends, rail and busbw.
struct Pair<'a> {
    a: &'a str,
    b: &'a str,
    rail: u32,
    busbw: f64,
}

impl Pair<'_> {
    fn touches(&self, node: &str) -> bool {
        self.a == node || self.b == node
    }

    fn other(&self, node: &str) -> String {
        if self.a == node { self.b } else { self.a }.to_string()
    }
}

/// The slow NICs and pairs among `records`' pairwise points (kind `send_recv`, scope
/// `inter_node`, with a peer node), at their largest size. A pair inside one NVLink domain
/// (trays of one NVL72 rack) ran over NVLink and is no reference for a NIC.
pub fn findings(records: &[Record]) -> Vec<Finding> {
    let pairwise: Vec<&Record> = records
        .iter()
        .filter(|r| is_pair(r) && !r.inside_one_nvlink_domain())
        .collect();
    let Some(largest) = pairwise.iter().map(|r| r.bytes).max() else {
        return Vec::new();
    };
    let pairs: Vec<Pair> = pairwise
        .iter()
        .filter(|r| r.bytes == largest)
        .filter_map(|r| {
            Some(Pair {
                a: r.group.node.as_deref()?,
                b: r.detail.peer_node.as_deref()?,
                rail: *r.group.gpus.first()?,
                busbw: r.busbw?,
            })
        })
        .collect();
    let mut nodes: Vec<&str> = pairs.iter().flat_map(|p| [p.a, p.b]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.len() < 3 {
        return vec![Finding::TooFewNodes(nodes.len())];
    }
    let mut rails: Vec<u32> = pairs.iter().map(|p| p.rail).collect();
    rails.sort_unstable();
    rails.dedup();
    let mut out = Vec::new();
    for &rail in &rails {
        let on_rail: Vec<&Pair> = pairs.iter().filter(|p| p.rail == rail).collect();
        let mut slow_nodes = Vec::new();
        for &node in &nodes {
            let own: Vec<f64> = on_rail
                .iter()
                .filter(|p| p.touches(node))
                .map(|p| p.busbw)
                .collect();
            let others: Vec<f64> = on_rail
                .iter()
                .filter(|p| !p.touches(node))
                .map(|p| p.busbw)
                .collect();
            let (Some(reference), Some(busbw)) = (median(&others), median(&own)) else {
                continue;
            };
            if own.iter().all(|&b| b < SLOW_RATIO * reference) {
                let mut peers: Vec<String> = on_rail
                    .iter()
                    .filter(|p| p.touches(node))
                    .map(|p| p.other(node))
                    .collect();
                peers.sort_unstable();
                slow_nodes.push(node);
                out.push(Finding::Nic {
                    node: node.to_string(),
                    rail,
                    busbw,
                    reference,
                    peers,
                });
            }
        }
        let all: Vec<f64> = on_rail.iter().map(|p| p.busbw).collect();
        let Some(reference) = median(&all) else {
            continue;
        };
        for p in &on_rail {
            let explained = slow_nodes.iter().any(|n| p.touches(n));
            if !explained && p.busbw < SLOW_RATIO * reference {
                out.push(Finding::Pair {
                    a: p.a.to_string(),
                    b: p.b.to_string(),
                    rail,
                    busbw: p.busbw,
                    reference,
                });
            }
        }
    }
    out
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{Backend, Clock, Dtype, Timing};

    fn pair(a: &str, b: &str, rail: u32, gb_per_s: f64) -> Record {
        let bytes = 1u64 << 30;
        let timing = Timing::without_spread(bytes as f64 / (gb_per_s * 1e9), None, Clock::Model);
        Record::pair(Backend::Sim, (a, b), rail, bytes, Dtype::Bf16, timing)
    }

    /// Four nodes on two rails at 45 GB/s; n1's NIC 1 at half; one cable n0-n2 on rail 0 at
    /// a third.
    #[test]
    fn names_the_node_and_nic_and_a_lone_slow_pair() {
        let mut records = Vec::new();
        let nodes = ["n0", "n1", "n2", "n3"];
        for (i, a) in nodes.iter().enumerate() {
            for b in &nodes[i + 1..] {
                for rail in 0..2 {
                    let gb = match (*a, *b, rail) {
                        ("n1", _, 1) | (_, "n1", 1) => 22.5,
                        ("n0", "n2", 0) => 15.0,
                        _ => 45.0,
                    };
                    records.push(pair(a, b, rail, gb));
                }
            }
        }
        let found: Vec<String> = findings(&records).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            vec![
                "slow: pair n0-n2 on rail 0: 15.0 GB/s vs rail median 45.0 GB/s (a cable or switch port between them)",
                "slow: node n1 NIC 1 (rail 1): 22.5 GB/s vs fleet median 45.0 GB/s on pairs n1-n0, n1-n2, n1-n3",
            ]
        );
    }

    /// Trays a0, a1, a2 of rack a and b0 of rack b on one rail: the in-rack pairs ran over
    /// NVLink at 810 GB/s, the cross-rack ones through the NICs at 45. Set beside the NVLink
    /// pairs, b0's NIC would look slow (45 against 810); without them every NIC agrees. The
    /// table says which pairs crossed no NIC.
    #[test]
    fn pairs_inside_one_nvlink_domain_judge_no_nic() {
        let mut records = Vec::new();
        for (a, b) in [("a0", "a1"), ("a0", "a2"), ("a1", "a2")] {
            let mut p = pair(a, b, 0, 810.0);
            p.detail.nvlink_domains = Some(1);
            records.push(p);
        }
        for a in ["a0", "a1", "a2"] {
            let mut p = pair(a, "b0", 0, 45.0);
            p.detail.nvlink_domains = Some(2);
            records.push(p);
        }
        assert!(findings(&records).is_empty(), "{:?}", findings(&records));
        let table = pair_table(&records);
        assert!(
            table.contains("  a0-a1                          1073741824         810.00  (one NVLink domain: over NVLink, no NIC)\n"),
            "{table}"
        );
        assert!(
            table.contains("  a0-b0                          1073741824          45.00\n"),
            "{table}"
        );
    }

    #[test]
    fn two_nodes_cannot_name_a_node() {
        let records = vec![pair("n0", "n1", 0, 10.0)];
        assert_eq!(findings(&records), vec![Finding::TooFewNodes(2)]);
        assert!(findings(&[]).is_empty());
    }
}
