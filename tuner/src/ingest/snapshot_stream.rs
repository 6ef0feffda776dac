//! Snapshots read as a stream (issue 28, item 2): a node at a time, its records checked and
//! moved into the measurements as soon as it is read, so that a snapshot takes the memory of
//! the records it holds and never that of its text too. What bounds it is the records held,
//! [`MAX_RECORDS`], not the file's size.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::file_kind::{bad, kind_of, FileKind};
use super::node_gpus::NodeGpus;
use super::snapshot::{FleetSection, Node, TimeRange, FORMAT_VERSION};
use super::{FleetSummary, Measurements};
use crate::error::TunerError;

/// Most records one snapshot may bring: about 9M, some 2.7 GB held (about 300 bytes a
/// record), the records of 10,000 nodes' raw export. A larger fleet is read reduced: `tuner
/// snapshot --compact`.
pub const MAX_RECORDS: usize = 9_000_000;

/// How much of a file's opening tells a snapshot from the other kinds.
const HEAD: usize = 4096;

/// The file at `path`, ready to be read as a snapshot, or `None` where its opening is none.
pub fn open(path: &Path) -> Result<Option<impl Read>, TunerError> {
    let io = |e: std::io::Error| TunerError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file = record::open_for_reading(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        // A device or a FIFO is read through the bounded reader, which stops at its limit.
        return Ok(None);
    }
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf().map_err(io)?;
    let head = String::from_utf8_lossy(&head[..head.len().min(HEAD)]);
    Ok((kind_of(&head) == FileKind::Snapshot).then_some(reader))
}

/// Reads one snapshot from `de` into `into`, naming it `origin` in notes and errors. A
/// snapshot of a newer version than this tuner's is named and skipped, not trusted.
pub fn read<'de, D>(de: D, origin: &str, into: &mut Measurements) -> Result<(), TunerError>
where
    D: Deserializer<'de, Error = serde_json::Error>,
{
    let before = into.records.len();
    let seed = SnapshotSeed { into, origin };
    let read = seed.deserialize(de).map_err(|e| {
        // The records of a file refused are not kept.
        bad(origin, e)
    });
    match read {
        Ok(Outcome::Skipped(version)) => {
            into.notes.push(format!(
                "{origin}: snapshot format version {version} is newer than this tuner reads \
                 ({FORMAT_VERSION}); skipped"
            ));
        }
        Ok(Outcome::Done {
            source,
            fleet,
            gpus,
        }) => {
            if fleet.is_some() && into.fleet.is_some() {
                into.records.truncate(before);
                return Err(bad(
                    origin,
                    "a second compact snapshot: one fleet is priced at a time",
                ));
            }
            // A node another source lists too is one node: its GPUs by the same rule as one
            // snapshot's listings of it (issue 31, item 2).
            if let Err(e) = into.add_gpus(gpus) {
                into.records.truncate(before);
                return Err(e);
            }
            into.sources
                .push(format!("{origin} (snapshot of {source})"));
            if let Some(section) = fleet {
                into.fleet = Some(FleetSummary { section, all: None });
            }
        }
        Err(e) => {
            into.records.truncate(before);
            return Err(e);
        }
    }
    Ok(())
}

enum Outcome {
    Skipped(u32),
    Done {
        source: String,
        fleet: Option<FleetSection>,
        /// The GPUs its nodes list.
        gpus: NodeGpus,
    },
}

struct SnapshotSeed<'a> {
    into: &'a mut Measurements,
    /// The file's name, as its GPUs' source.
    origin: &'a str,
}

impl<'de> DeserializeSeed<'de> for SnapshotSeed<'_> {
    type Value = Outcome;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Outcome, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SnapshotSeed<'_> {
    type Value = Outcome;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a snapshot object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Outcome, A::Error> {
        let (mut version, mut source, mut fleet) = (None::<u32>, None, None);
        let mut seen_nodes = false;
        let mut gpus = NodeGpus::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format_version" => {
                    let v: u32 = map
                        .next_value()
                        .map_err(|_| de::Error::custom("format_version is not a number"))?;
                    // Versions count from 1: a 0 was never written (issue 31).
                    if v == 0 {
                        return Err(de::Error::custom(format!(
                            "format_version 0: expected 1 to {FORMAT_VERSION}"
                        )));
                    }
                    if v > FORMAT_VERSION {
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        return Ok(Outcome::Skipped(v));
                    }
                    version = Some(v);
                }
                "nodes" if version.is_none() => {
                    return Err(de::Error::custom(
                        "`nodes` before `format_version`: this tuner writes the version first",
                    ))
                }
                "nodes" => {
                    map.next_value_seed(NodesSeed {
                        into: &mut *self.into,
                        origin: self.origin,
                        gpus: &mut gpus,
                    })?;
                    seen_nodes = true;
                }
                "source" => source = Some(map.next_value::<String>()?),
                "fleet" => fleet = map.next_value::<Option<FleetSection>>()?,
                "created" => {
                    map.next_value::<f64>()?;
                }
                "time_range" => {
                    map.next_value::<TimeRange>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if version.is_none() {
            return Err(de::Error::missing_field("format_version"));
        }
        if !seen_nodes {
            return Err(de::Error::missing_field("nodes"));
        }
        Ok(Outcome::Done {
            source: source.ok_or_else(|| de::Error::missing_field("source"))?,
            fleet,
            gpus,
        })
    }
}

struct NodesSeed<'a> {
    into: &'a mut Measurements,
    origin: &'a str,
    /// Each node's GPUs by index, over every listing of the node: a node listed twice
    /// (issue 31, item 2) must not take the model of whichever listing came last.
    gpus: &'a mut NodeGpus,
}

impl<'de> DeserializeSeed<'de> for NodesSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for NodesSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of nodes")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(node) = seq.next_element::<Node>()? {
            // As JSON lines: a record no measurement can have (ranks 0, a time of 0 or less)
            // refuses the file, named by node and record (issue 13).
            if let Some((i, e)) = node
                .records
                .iter()
                .enumerate()
                .find_map(|(i, r)| r.validate().err().map(|e| (i, e)))
            {
                return Err(de::Error::custom(format!(
                    "node {} record {}: {e}",
                    node.name,
                    i + 1
                )));
            }
            if self.into.records.len() + node.records.len() > MAX_RECORDS {
                return Err(de::Error::custom(format!(
                    "more than {MAX_RECORDS} records (at node {}), the most the tuner holds \
                     from one snapshot; write a compact one with `tuner snapshot --compact`",
                    node.name
                )));
            }
            for gpu in &node.gpus {
                // Which GPU the node's records ran on cannot be told: refused, in words that
                // do not depend on which listing came first.
                self.gpus
                    .list(&node.name, gpu.index, &gpu.model, self.origin)
                    .map_err(|c| {
                        de::Error::custom(format!(
                            "{c}: the node is listed twice and the listings disagree on what \
                             it is"
                        ))
                    })?;
            }
            let name = node.name;
            self.into
                .records
                .extend(node.records.into_iter().map(|mut r| {
                    r.group.node.get_or_insert_with(|| name.clone());
                    r
                }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::files;

    const COMPACT: &str = r#"{"format_version": 2, "created": 0, "source": "prometheus p",
        "time_range": {"start": 0, "end": 0},
        "nodes": [{"name": "fleet/H", "gpus": [{"index": 0, "model": "H"}], "records": [
          {"kind":"all_reduce","backend":"nccl","gpus":[],"scope":"intra_node","ranks":8,
           "bytes":1048576,"dtype":"bf16","time_s":0.001,"time_min_s":null,"time_max_s":null,
           "iters":null,"clock":"cuda_event","algbw":null,"busbw":null,"flops":null,
           "timestamp":null}]}],
        "fleet": {"nodes": {"H": 1000}, "aggregate": "slowest", "excluded": [],
          "stragglers": [{"node": "n7", "what": "HBM bandwidth", "value": 2.0,
                          "fleet_median": 3.0}]}}"#;

    #[test]
    fn a_compact_snapshot_brings_its_fleet_and_one_fleet_at_a_time() {
        let mut m = Measurements::default();
        files::read(COMPACT, "c.json", &mut m).unwrap();
        assert_eq!(m.records.len(), 1);
        assert_eq!(m.records[0].group.node.as_deref(), Some("fleet/H"));
        assert_eq!(m.gpu_models["fleet/H"], "H");
        let fleet = m.fleet.as_ref().unwrap();
        assert_eq!(fleet.section.nodes["H"], 1000);
        assert_eq!(fleet.section.stragglers[0].node, "n7");
        assert!(fleet.all.is_none());
        let err = files::read(COMPACT, "again.json", &mut m)
            .unwrap_err()
            .to_string();
        assert!(err.contains("one fleet is priced at a time"), "{err}");
        // The refused file's records are not kept.
        assert_eq!(m.records.len(), 1);
    }

    /// A compact snapshot's inter-node record keeps the NVLink domains its ranks spanned,
    /// so the fleet it prices tells a rack's NVLink from the network between racks.
    #[test]
    fn a_compact_snapshot_keeps_the_nvlink_domains() {
        let inter = COMPACT.replace(
            r#""scope":"intra_node","ranks":8,"#,
            r#""scope":"inter_node","ranks":8,"ranks_per_node":1,"nvlink_domains":1,"#,
        );
        assert_ne!(inter, COMPACT);
        let mut m = Measurements::default();
        files::read(&inter, "c.json", &mut m).unwrap();
        let r = &m.records[0];
        assert_eq!(
            (r.group.scope, r.detail.nvlink_domains),
            (record::Scope::InterNode, Some(1))
        );
    }

    #[test]
    fn the_version_comes_before_the_nodes() {
        let late = r#"{"nodes": [], "format_version": 1, "source": "s"}"#;
        let mut de = serde_json::Deserializer::from_str(late);
        let err = read(&mut de, "late.json", &mut Measurements::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nodes` before `format_version`"), "{err}");
    }

    /// One node of a version 1 snapshot: its GPUs and one all-reduce of `time_s` measured at
    /// `timestamp`.
    fn listing(name: &str, gpus: &[(u32, &str)], time_s: f64, timestamp: f64) -> String {
        let gpus: Vec<String> = gpus
            .iter()
            .map(|(i, m)| format!(r#"{{"index": {i}, "model": "{m}"}}"#))
            .collect();
        format!(
            r#"{{"name": "{name}", "gpus": [{}], "records": [
              {{"kind":"all_reduce","backend":"nccl","gpus":[0,1],"scope":"intra_node",
               "ranks":2,"bytes":1048576,"dtype":"bf16","time_s":{time_s},"iters":20,
               "clock":"cuda_event","timestamp":{timestamp}}}]}}"#,
            gpus.join(", ")
        )
    }

    /// Records (as JSON, sorted), GPU models by node and notes.
    type ReadBack = (Vec<String>, Vec<(String, String)>, Vec<String>);

    /// A version 1 snapshot of `nodes`.
    fn snapshot(nodes: &[&String]) -> String {
        format!(
            r#"{{"format_version": 1, "created": 0, "source": "s",
                "time_range": {{"start": 0, "end": 0}}, "nodes": [{}]}}"#,
            nodes
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// What a snapshot of `nodes` comes to once read and screened, as the commands read it:
    /// its records (sorted), the GPU models by node and the notes; or the refusal.
    fn outcome(nodes: &[&String]) -> Result<ReadBack, String> {
        outcome_of(&[("twice.json", snapshot(nodes))])
    }

    /// What `files` (name and text) come to once read in that order and screened, as
    /// [`outcome`].
    fn outcome_of(files: &[(&str, String)]) -> Result<ReadBack, String> {
        let mut m = Measurements::default();
        for (name, text) in files {
            files::read(text, name, &mut m).map_err(|e| e.to_string())?;
        }
        m.screen(1.8e9, None);
        let mut records: Vec<String> = m
            .records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        records.sort();
        Ok((records, m.gpu_models.into_iter().collect(), m.notes))
    }

    /// Issue 31, item 2: a snapshot that lists one node twice. An identical second listing is
    /// the first; records of one point that differ keep the newer; GPUs of one index named
    /// as two models refuse the file; a node whose listings name different GPUs takes the
    /// lowest index's model. Each outcome is the same in either order (the model was the
    /// last listing's).
    #[test]
    fn r31_2_a_node_listed_twice_reads_the_same_in_either_order() {
        let h100 = "NVIDIA H100 80GB HBM3";
        let a100 = "NVIDIA A100-SXM4-80GB";
        let once = listing("n1", &[(0, h100), (1, h100)], 1e-3, 1.7e9);
        let single = outcome(&[&once]).unwrap();
        let (records, models, notes) = outcome(&[&once, &once]).unwrap();
        assert_eq!((&records, &models), (&single.0, &single.1));
        assert_eq!(records.len(), 1);
        assert_eq!(models, [("n1".to_string(), h100.to_string())]);
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("1 duplicate records dropped")),
            "{notes:?}"
        );

        let older = listing("n1", &[(0, h100), (1, h100)], 1e-3, 1.7e9);
        let newer = listing("n1", &[(0, h100), (1, h100)], 2e-3, 1.7e9 + 60.0);
        let first = outcome(&[&older, &newer]).unwrap();
        assert_eq!(first, outcome(&[&newer, &older]).unwrap());
        assert!(first.0[0].contains(r#""time_s":0.002"#), "{:?}", first.0);
        assert!(
            first
                .2
                .iter()
                .any(|n| n.starts_with("conflicting measurements of all_reduce")
                    && n.contains("on node n1")
                    && n.ends_with("kept 0.002 s measured at 1700000060, the newer")),
            "{:?}",
            first.2
        );

        let h = listing("n1", &[(0, h100), (1, h100)], 1e-3, 1.7e9);
        let a = listing("n1", &[(0, h100), (1, a100)], 1e-3, 1.7e9);
        let err = outcome(&[&h, &a]).unwrap_err();
        assert_eq!(err, outcome(&[&a, &h]).unwrap_err());
        assert!(
            err.contains(&format!(
                "node n1 GPU 1 is listed as two models, {a100:?} and {h100:?}"
            )),
            "{err}"
        );

        let low = listing("n1", &[(0, a100)], 1e-3, 1.7e9);
        let high = listing("n1", &[(1, h100)], 1e-3, 1.7e9);
        let mixed = outcome(&[&high, &low]).unwrap();
        assert_eq!(mixed, outcome(&[&low, &high]).unwrap());
        assert_eq!(mixed.1, [("n1".to_string(), a100.to_string())]);
        assert!(
            mixed.2.iter().any(|n| n.starts_with(&format!(
                "node n1's GPUs name more than one model (0: {a100}, 1: {h100})"
            ))),
            "{:?}",
            mixed.2
        );
    }

    /// Issue 31, item 2, across files: two snapshots that list one node were read as the
    /// model of whichever came last. Listed alike, the node is one node in either order;
    /// one GPU listed as two models is refused naming the node, the GPU, both models and
    /// both files, in the same words in either order; GPUs of different indices that name
    /// different models take the lowest index's, with the note, in either order.
    #[test]
    fn r31_2_a_node_two_snapshots_list_reads_the_same_in_either_order() {
        let h100 = "NVIDIA H100 80GB HBM3";
        let a100 = "NVIDIA A100-SXM4-80GB";
        let both = |a: &String, b: &String| {
            let (a, b) = (("a.json", snapshot(&[a])), ("b.json", snapshot(&[b])));
            let first = outcome_of(&[a.clone(), b.clone()]);
            let reversed = outcome_of(&[b, a]);
            assert_eq!(first, reversed);
            first
        };
        let h = listing("n1", &[(0, h100), (1, h100)], 1e-3, 1.7e9);
        let alike = both(&h, &h).unwrap();
        assert_eq!(alike.1, [("n1".to_string(), h100.to_string())]);
        assert_eq!(alike.0.len(), 1);

        let a = listing("n1", &[(0, h100), (1, a100)], 1e-3, 1.7e9);
        let err = both(&h, &a).unwrap_err();
        assert!(
            err.contains(&format!(
                "node n1 GPU 1 is listed as two models, {a100:?} and {h100:?}, by b.json and \
                 a.json respectively"
            )),
            "{err}"
        );

        let low = listing("n1", &[(0, a100)], 1e-3, 1.7e9);
        let high = listing("n1", &[(1, h100)], 2e-3, 1.7e9 + 60.0);
        let mixed = both(&low, &high).unwrap();
        assert_eq!(mixed.1, [("n1".to_string(), a100.to_string())]);
        assert!(
            mixed.2.iter().any(|n| n.starts_with(&format!(
                "node n1's GPUs name more than one model (0: {a100}, 1: {h100})"
            ))),
            "{:?}",
            mixed.2
        );
    }
}
