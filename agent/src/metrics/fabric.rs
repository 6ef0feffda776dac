//! The last multi-node fabric run (issue 12): each rail's send/recv bandwidth to every peer
//! node, and when the run was. The run's job-wide collectives are in the collective families
//! of [`super::calibration`] with `scope="inter_node"`.
//!
//! Per rail, the pairs of [`crate::fabric::Fabric::pairs`] (the `fabric_slowest_peers`
//! slowest peers and the fastest, at the largest size measured), the median over every peer
//! and how many peers it is over: at most rails x (k + 3) series whatever the fleet size
//! (issue 28: one series per peer made 8M series at 1,000 nodes).

use super::topology::{node_model, with_model};
use super::{Collector, Out, Type};
use crate::cache::Snapshot;
use record::Family;

/// Each rail's median over all peers.
pub const RAIL_MEDIAN: &str = "meshfit_fabric_rail_median_busbw_bytes_per_second";
/// How many peers that median is over.
pub const RAIL_PEERS: &str = "meshfit_fabric_rail_peers";

/// Fabric families.
pub struct Fabric;

impl Collector for Fabric {
    fn name(&self) -> &'static str {
        "fabric"
    }

    fn collect(&self, s: &Snapshot, out: &mut Out) -> Result<(), String> {
        let f = &s.fabric;
        if let Some(at) = f.last_run_timestamp {
            out.family(
                Family::FabricLastRun.as_str(),
                Type::Gauge,
                "When the last multi-node fabric run measured, seconds since the Unix epoch: the newest record's time in <state_dir>/fabric.jsonl, else the time the run wrote that file.",
            )
            .sample(&[], at);
        }
        // The node's GPU model on the series the rules reduce per model, so that they need not
        // join each node's pairs to it (issue 28); none until discovery has named it.
        let model = s.discovery.found().map(|t| node_model(t));
        let mut pairs = out.family(
            Family::FabricPairBusbw.as_str(),
            Type::Gauge,
            "Send/recv bandwidth in bytes per second between this node and peer_node over rail gpu (GPU and NIC of that index on both nodes) at the largest size measured, with the node's GPU model once discovery has named it, cached from the last fabric run: per rail the fabric_slowest_peers slowest peers and the fastest one.",
        );
        for p in &f.pairs {
            let rail = p.rail.to_string();
            pairs.sample(
                &with_model(
                    model,
                    &[
                        ("peer_node", &p.peer_node),
                        ("gpu", &rail),
                        ("backend", p.backend.as_str()),
                    ],
                ),
                p.busbw_bytes_per_s,
            );
        }
        let mut medians = out.family(
            RAIL_MEDIAN,
            Type::Gauge,
            "Median over every peer node of the send/recv bandwidth in bytes per second over rail gpu at the largest size measured, with the node's GPU model once discovery has named it, cached from the last fabric run.",
        );
        for r in &f.rails {
            let rail = r.rail.to_string();
            medians.sample(
                &with_model(model, &[("gpu", &rail), ("backend", r.backend.as_str())]),
                r.median_busbw_bytes_per_s,
            );
        }
        let mut peers = out.family(
            RAIL_PEERS,
            Type::Gauge,
            "Peer nodes the last fabric run measured this node against over rail gpu.",
        );
        for r in &f.rails {
            let rail = r.rail.to_string();
            peers.sample(
                &[("gpu", &rail), ("backend", r.backend.as_str())],
                r.peers as f64,
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::{Cache, Discovery};
    use crate::fabric::tests::{job_wide, pair};
    use crate::metrics::text;
    use crate::metrics::topology::tests::found;
    use record::{Kind, Record};
    use std::sync::Arc;

    /// Node `node`'s fabric results from `records`, with the GPUs of sim `profile` discovered
    /// where one is given: the notes the reading wrote, and the exported lines that start with
    /// one of `prefixes`.
    fn exported(
        records: Vec<Record>,
        node: &str,
        profile: Option<&str>,
        prefixes: &[&str],
    ) -> (Vec<String>, Vec<String>) {
        let (fabric, notes) = crate::fabric::Fabric::from_records(records, node, 4);
        let cache = Cache::new(
            node.into(),
            record::Backend::Sim,
            crate::state::Calibration::default(),
        );
        cache.update(|s| s.fabric = Arc::new(fabric));
        if let Some(p) = profile {
            cache.update(|s| s.discovery = Discovery::Found(Arc::new(found(p))));
        }
        let text = text(&cache.snapshot());
        let lines = text
            .lines()
            .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
            .map(String::from)
            .collect();
        (notes, lines)
    }

    /// Node n1 of a 3-node run whose NIC 1 is slow: its pairs and the job-wide all-reduce,
    /// next to the intra-node collectives of its own calibration.
    #[test]
    fn pairs_and_job_wide_collectives_are_exported() {
        let records = vec![
            pair("n0", "n1", 0, 1 << 26, 45e9),
            pair("n1", "n2", 1, 1 << 26, 22.5e9),
            job_wide(Kind::AllReduce, 6, 2, 1 << 20, 1e-4),
            job_wide(Kind::AllReduce, 3, 1, 1 << 20, 2e-4),
        ];
        let (notes, lines) = exported(
            records,
            "n1",
            None,
            &[
                "meshfit_fabric_",
                "meshfit_collective_time",
                "meshfit_scrape_collector_success{collector=\"fabric\"",
            ],
        );
        assert!(notes.is_empty(), "{notes:?}");
        let (success, lines) = lines.split_last().unwrap();
        assert_eq!(
            lines,
            [
                "meshfit_collective_time_seconds{collective=\"all_reduce\",scope=\"inter_node\",ranks=\"3\",ranks_per_node=\"1\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"n1\"} 0.0002",
                "meshfit_collective_time_seconds{collective=\"all_reduce\",scope=\"inter_node\",ranks=\"6\",ranks_per_node=\"2\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"n1\"} 0.0001",
                "meshfit_fabric_last_run_timestamp_seconds{hostname=\"n1\",backend=\"sim\"} 1001",
                "meshfit_fabric_pair_busbw_bytes_per_second{peer_node=\"n0\",gpu=\"0\",backend=\"sim\",hostname=\"n1\"} 45000000000",
                "meshfit_fabric_pair_busbw_bytes_per_second{peer_node=\"n2\",gpu=\"1\",backend=\"sim\",hostname=\"n1\"} 22500000000",
                "meshfit_fabric_rail_median_busbw_bytes_per_second{gpu=\"0\",backend=\"sim\",hostname=\"n1\"} 45000000000",
                "meshfit_fabric_rail_median_busbw_bytes_per_second{gpu=\"1\",backend=\"sim\",hostname=\"n1\"} 22500000000",
                "meshfit_fabric_rail_peers{gpu=\"0\",backend=\"sim\",hostname=\"n1\"} 1",
                "meshfit_fabric_rail_peers{gpu=\"1\",backend=\"sim\",hostname=\"n1\"} 1",
            ]
        );
        assert_eq!(
            success,
            "meshfit_scrape_collector_success{collector=\"fabric\",hostname=\"n1\",backend=\"sim\"} 1"
        );
    }

    /// Tray t0 of an NVL72 rack in a run over two racks: its all-reduce over 8 trays of the
    /// rack says `nvlink_domains="1"`, the one over both racks `"2"`; its pair with tray t1
    /// of its own rack ran over NVLink and is no NIC pair, the one with r1 in the other
    /// rack is.
    #[test]
    fn collectives_say_their_nvlink_domains_and_pairs_inside_one_are_not_nics() {
        let in_domain = |mut r: record::Record, d: u32| {
            r.detail.nvlink_domains = Some(d);
            r
        };
        let records = vec![
            in_domain(pair("t0", "t1", 0, 1 << 26, 700e9), 1),
            in_domain(pair("t0", "r1", 0, 1 << 26, 45e9), 2),
            in_domain(job_wide(Kind::AllReduce, 8, 1, 1 << 20, 1e-4), 1),
            in_domain(job_wide(Kind::AllReduce, 16, 1, 1 << 20, 3e-4), 2),
        ];
        let (notes, lines) = exported(
            records,
            "t0",
            None,
            &["meshfit_fabric_pair", "meshfit_collective_time"],
        );
        assert_eq!(
            notes,
            ["1 pair records ran inside one NVLink domain (nvlink_domains 1: over NVLink, through no NIC); not exported as NIC pairs"]
        );
        assert_eq!(
            lines,
            [
                "meshfit_collective_time_seconds{collective=\"all_reduce\",scope=\"inter_node\",ranks=\"8\",ranks_per_node=\"1\",nvlink_domains=\"1\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"t0\"} 0.0001",
                "meshfit_collective_time_seconds{collective=\"all_reduce\",scope=\"inter_node\",ranks=\"16\",ranks_per_node=\"1\",nvlink_domains=\"2\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"t0\"} 0.0003",
                "meshfit_fabric_pair_busbw_bytes_per_second{peer_node=\"r1\",gpu=\"0\",backend=\"sim\",hostname=\"t0\"} 45000000000",
            ]
        );
    }

    /// Once discovery has named the node's GPUs, the series the rules reduce per model carry
    /// it: the pairs, the rail medians and the job-wide collectives.
    #[test]
    fn r28_3_a_discovered_node_labels_its_fabric_series_with_its_model() {
        let records = vec![
            pair("n0", "n1", 0, 1 << 26, 45e9),
            job_wide(Kind::AllReduce, 6, 2, 1 << 20, 1e-4),
        ];
        let (_, lines) = exported(
            records,
            "n1",
            Some("dgx-h100"),
            &[
                "meshfit_fabric_pair",
                "meshfit_fabric_rail_median",
                "meshfit_collective_time",
            ],
        );
        assert_eq!(
            lines,
            [
                "meshfit_collective_time_seconds{model_name=\"NVIDIA H100 80GB HBM3\",collective=\"all_reduce\",scope=\"inter_node\",ranks=\"6\",ranks_per_node=\"2\",size_bytes=\"1048576\",backend=\"sim\",hostname=\"n1\"} 0.0001",
                "meshfit_fabric_pair_busbw_bytes_per_second{model_name=\"NVIDIA H100 80GB HBM3\",peer_node=\"n0\",gpu=\"0\",backend=\"sim\",hostname=\"n1\"} 45000000000",
                "meshfit_fabric_rail_median_busbw_bytes_per_second{model_name=\"NVIDIA H100 80GB HBM3\",gpu=\"0\",backend=\"sim\",hostname=\"n1\"} 45000000000",
            ]
        );
    }
}
