//! Results of the last multi-node fabric run (issue 12), for the metrics to export.
//!
//! The agent does not run the fabric job: a launcher (Slurm, mpirun, a Kubernetes Indexed
//! Job) starts `microbench fabric` on many nodes, and each node's local rank 0 writes
//! `<state_dir>/fabric.jsonl`: the job-wide inter-node collectives and the pairwise send/recv
//! points where this node is one end. The sampler re-reads the file whenever its modification
//! time or length changes ([`Watcher`]). A file over [`MAX_BYTES`], unreadable or not JSON
//! lines is refused with a warning, and the results read before stay served: a scrape then
//! shows the last good run, whose time `meshfit_fabric_last_run_timestamp_seconds` gives.

use record::{Backend, InputError, Record, Scope};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The file's name inside the state directory.
pub const FILE_NAME: &str = "fabric.jsonl";

/// Largest file read: 32 MiB. A node's file holds its pairs with every other node, rail by
/// rail and size by size: 1,000 nodes x 8 rails x 7 sizes at about 500 bytes a record is
/// 28 MB. Anything larger is not a fabric run of this agent's node, and reading it would cost
/// the daemon its memory bound.
pub const MAX_BYTES: u64 = 32 << 20;

/// One rail to one peer node: the pairwise send/recv point at the largest size measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// The node at the other end.
    pub peer_node: String,
    /// The rail: GPU i and NIC i on both nodes.
    pub rail: u32,
    /// What produced the figure.
    pub backend: Backend,
    /// The largest per-rank buffer measured, bytes.
    pub bytes: u64,
    /// Bus bandwidth at that size (send/recv: equal to algbw), bytes per second.
    pub busbw_bytes_per_s: f64,
}

/// One rail of this node over all its peers: what bounds the export whatever the fleet size.
#[derive(Debug, Clone, PartialEq)]
pub struct Rail {
    /// The rail: GPU i and NIC i on both nodes.
    pub rail: u32,
    /// What produced the figures.
    pub backend: Backend,
    /// Peer nodes measured on this rail.
    pub peers: usize,
    /// Median over those peers of the pair bus bandwidth, bytes per second.
    pub median_busbw_bytes_per_s: f64,
}

/// What the last fabric run measured, as far as this node's metrics show it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fabric {
    /// Job-wide inter-node collectives (every rank, or one GPU per node).
    pub collectives: Vec<Record>,
    /// Per rail and backend, the pairs exported: the `slowest` slowest peers and the fastest
    /// one, sorted by peer, rail and backend. A slow NIC or cable shows among the slowest; the
    /// fastest is the node's own figure on the rail, which the tuner reads (a node's best
    /// pair), and which `slowest` slow peers elsewhere in the fleet would otherwise hide.
    pub pairs: Vec<Pair>,
    /// Every rail over all its peers, sorted by rail and backend.
    pub rails: Vec<Rail>,
    /// When the run measured, seconds since the Unix epoch: the newest record's timestamp,
    /// else the file's modification time (`microbench fabric` writes it when the run ends and
    /// leaves the records' own timestamps unset).
    pub last_run_timestamp: Option<f64>,
}

impl Fabric {
    /// Sorts `records` into job-wide collectives and this node's pairs, of which it keeps per
    /// rail the `slowest` slowest peers and the fastest (and each rail's median over all).
    /// Returns what was left out and why, one line per reason, for the log.
    pub fn from_records(records: Vec<Record>, node: &str, slowest: usize) -> (Fabric, Vec<String>) {
        let mut fabric = Fabric::default();
        let mut pairs: BTreeMap<(String, u32, Backend), Pair> = BTreeMap::new();
        let (mut not_inter, mut other_ends, mut malformed) = (0usize, Vec::new(), 0usize);
        let mut over_nvlink = 0usize;
        for r in records {
            if let Some(t) = r.timestamp {
                fabric.last_run_timestamp = Some(fabric.last_run_timestamp.map_or(t, |l| l.max(t)));
            }
            if r.group.scope != Scope::InterNode || !r.kind.is_collective() {
                not_inter += 1;
                continue;
            }
            let Some(peer_end) = r.detail.peer_node.as_deref() else {
                fabric.collectives.push(r);
                continue;
            };
            if r.in_place {
                continue;
            }
            // Trays of one NVL72 rack exchange over NVLink: the pair says nothing of a NIC.
            if r.inside_one_nvlink_domain() {
                over_nvlink += 1;
                continue;
            }
            let (Some(this_end), [rail], Some(busbw)) = (
                r.group.node.as_deref(),
                r.group.gpus.as_slice(),
                r.busbw.or(r.algbw),
            ) else {
                malformed += 1;
                continue;
            };
            // The file holds each pair once, from either end; the label names the other one.
            let peer = if this_end == node {
                peer_end
            } else if peer_end == node {
                this_end
            } else {
                let ends = format!("{this_end}-{peer_end}");
                if !other_ends.contains(&ends) {
                    other_ends.push(ends);
                }
                continue;
            };
            let key = (peer.to_string(), *rail, r.backend);
            let pair = Pair {
                peer_node: key.0.clone(),
                rail: *rail,
                backend: r.backend,
                bytes: r.bytes,
                busbw_bytes_per_s: busbw,
            };
            match pairs.get(&key) {
                Some(kept) if kept.bytes >= pair.bytes => {}
                _ => {
                    pairs.insert(key, pair);
                }
            }
        }
        (fabric.pairs, fabric.rails) = bound(pairs.into_values(), slowest);
        let mut notes = Vec::new();
        if not_inter > 0 {
            notes.push(format!(
                "{not_inter} records are not inter-node collectives (scope inter_node, a collective kind); not exported"
            ));
        }
        if !other_ends.is_empty() {
            notes.push(format!(
                "pairs {} do not have this node `{node}` at either end (is node_name the name the fabric job used?); not exported",
                other_ends.join(", ")
            ));
        }
        if malformed > 0 {
            notes.push(format!(
                "{malformed} pair records lack a node, one rail in `gpus` or a bandwidth; not exported"
            ));
        }
        if over_nvlink > 0 {
            notes.push(format!(
                "{over_nvlink} pair records ran inside one NVLink domain (nvlink_domains 1: over NVLink, through no NIC); not exported as NIC pairs"
            ));
        }
        (fabric, notes)
    }
}

/// Per rail and backend: the median over every peer, and the pairs kept (the `slowest`
/// slowest and the fastest), sorted by peer, rail and backend.
fn bound(pairs: impl Iterator<Item = Pair>, slowest: usize) -> (Vec<Pair>, Vec<Rail>) {
    let mut by_rail: BTreeMap<(u32, Backend), Vec<Pair>> = BTreeMap::new();
    for p in pairs {
        by_rail.entry((p.rail, p.backend)).or_default().push(p);
    }
    let (mut kept, mut rails) = (Vec::new(), Vec::new());
    for ((rail, backend), mut ps) in by_rail {
        ps.sort_by(|a, b| {
            a.busbw_bytes_per_s
                .total_cmp(&b.busbw_bytes_per_s)
                .then_with(|| a.peer_node.cmp(&b.peer_node))
        });
        let n = ps.len();
        let median = if n % 2 == 1 {
            ps[n / 2].busbw_bytes_per_s
        } else {
            (ps[n / 2 - 1].busbw_bytes_per_s + ps[n / 2].busbw_bytes_per_s) / 2.0
        };
        rails.push(Rail {
            rail,
            backend,
            peers: n,
            median_busbw_bytes_per_s: median,
        });
        // The fastest is kept apart unless it is among the slowest anyway.
        let fastest = if n > slowest { ps.pop() } else { None };
        ps.truncate(slowest);
        kept.extend(ps.into_iter().chain(fastest));
    }
    kept.sort_by(|a, b| (&a.peer_node, a.rail, a.backend).cmp(&(&b.peer_node, b.rail, b.backend)));
    (kept, rails)
}

/// Why a file was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Could not be read, or is larger than [`MAX_BYTES`].
    #[error(transparent)]
    Unreadable(InputError),
    /// Not measurement records as JSON lines.
    #[error("{path}: {source}")]
    NotRecords {
        /// The file.
        path: PathBuf,
        /// The line and what is wrong with it.
        source: record::JsonLinesError,
    },
}

/// What a poll found.
#[derive(Debug)]
pub enum Change {
    /// A new file was read.
    Read {
        /// Its results.
        fabric: Fabric,
        /// What was left out, for the log.
        notes: Vec<String>,
    },
    /// The file is gone: there are no fabric results to serve.
    Removed,
    /// The file changed but could not be taken; the results read before stay.
    Refused(Refused),
}

/// Watches `<state_dir>/fabric.jsonl` by modification time and length.
#[derive(Debug, Clone)]
pub struct Watcher {
    path: PathBuf,
    /// Pairs kept per rail besides the fastest (`fabric_slowest_peers`).
    slowest: usize,
    /// Modification time and length last seen; `None` before the first poll or while absent.
    seen: Option<(SystemTime, u64)>,
    /// The file could not even be looked at last time (reported once, not at every poll).
    stat_failed: bool,
}

impl Watcher {
    /// A watcher of the file in `state_dir` that keeps per rail the `slowest` slowest pairs
    /// and the fastest.
    pub fn new(state_dir: &Path, slowest: usize) -> Watcher {
        Watcher {
            path: state_dir.join(FILE_NAME),
            slowest,
            seen: None,
            stat_failed: false,
        }
    }

    /// Reads the file when it appeared or changed since the last poll; `None` when nothing
    /// changed. `node` is this agent's node name, the end of the pairs it exports.
    pub fn poll(&mut self, node: &str) -> Option<Change> {
        let meta = fs::metadata(&self.path);
        let failed_before = std::mem::replace(&mut self.stat_failed, false);
        let meta = match meta {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.seen.take().map(|_| Change::Removed);
            }
            Err(source) => {
                self.stat_failed = true;
                return (!failed_before).then(|| {
                    Change::Refused(Refused::Unreadable(InputError::Io {
                        path: self.path.clone(),
                        source,
                    }))
                });
            }
        };
        // A file system without modification times still shows a rewrite by its length.
        let stamp = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        if self.seen == Some(stamp) {
            return None;
        }
        // Remembered before reading, so a refused file is reported once, not at every poll.
        self.seen = Some(stamp);
        let text = match crate::input::read_text(&self.path, MAX_BYTES) {
            Ok(text) => text,
            Err(e) => return Some(Change::Refused(Refused::Unreadable(e))),
        };
        match record::read_json_lines(&text) {
            Ok(records) => {
                let (mut fabric, notes) = Fabric::from_records(records, node, self.slowest);
                let written = meta.modified().ok().and_then(|m| {
                    m.duration_since(SystemTime::UNIX_EPOCH)
                        .ok()
                        .map(|d| d.as_secs_f64())
                });
                fabric.last_run_timestamp = fabric.last_run_timestamp.or(written);
                Some(Change::Read { fabric, notes })
            }
            Err(source) => Some(Change::Refused(Refused::NotRecords {
                path: self.path.clone(),
                source,
            })),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use record::{Clock, Dtype, Group, Kind, Timing};

    /// A pairwise send/recv point between `a` and `b` on `rail`, at `busbw` bytes/s.
    pub(crate) fn pair(a: &str, b: &str, rail: u32, bytes: u64, busbw: f64) -> Record {
        let timing = Timing::without_spread(bytes as f64 / busbw, Some(20), Clock::Model);
        let mut r = Record::pair(Backend::Sim, (a, b), rail, bytes, Dtype::Fp32, timing);
        r.timestamp = Some(1000.0 + f64::from(rail));
        r
    }

    /// A job-wide inter-node collective over `ranks` ranks, `per_node` on each node.
    pub(crate) fn job_wide(kind: Kind, ranks: u32, per_node: u32, bytes: u64, t: f64) -> Record {
        let mut r = Record::transfer(
            kind,
            Backend::Sim,
            Group {
                node: Some("n0".into()),
                gpus: (0..ranks).map(|i| i % per_node).collect(),
                scope: Scope::InterNode,
                ranks,
            },
            bytes,
            Dtype::Fp32,
            Timing::without_spread(t, Some(20), Clock::Model),
        );
        r.timestamp = Some(900.0);
        r.detail.ranks_per_node = Some(per_node);
        r
    }

    fn lines(records: &[Record]) -> String {
        records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn pairs_name_the_other_end_at_the_largest_size() {
        let mut records = vec![
            pair("n0", "n1", 0, 1 << 20, 10e9),
            pair("n0", "n1", 0, 1 << 26, 45e9),
            pair("n2", "n1", 1, 1 << 26, 20e9),
            pair("n0", "n2", 1, 1 << 26, 45e9),
            job_wide(Kind::AllReduce, 4, 2, 1 << 20, 1e-4),
        ];
        let mut nameless = pair("n0", "n1", 0, 1 << 26, 45e9);
        nameless.group.node = None;
        records.push(nameless);
        let (f, notes) = Fabric::from_records(records, "n1", 4);
        assert_eq!(
            f.pairs
                .iter()
                .map(|p| (p.peer_node.as_str(), p.rail, p.bytes, p.busbw_bytes_per_s))
                .collect::<Vec<_>>(),
            vec![("n0", 0, 1 << 26, 45e9), ("n2", 1, 1 << 26, 20e9)]
        );
        assert_eq!(f.collectives.len(), 1);
        assert_eq!(f.last_run_timestamp, Some(1001.0));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("n0-n2") && notes[0].contains("`n1`"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with("1 pair records lack a node"),
            "{notes:?}"
        );
    }

    /// Issue 28, item 4: a node of a large fabric run exported a pair series per peer and
    /// rail. Per rail it now keeps the `slowest` slowest peers and the fastest, and the
    /// median over every peer.
    #[test]
    fn r28_4_pairs_are_bounded_per_rail_to_the_slowest_the_fastest_and_the_median() {
        let peers = 9;
        let mut records = Vec::new();
        for rail in 0..2 {
            for j in 0..peers {
                // Peer p3 is slow on rail 1 only; otherwise rail 0 runs at 40 + j GB/s.
                let bw = if rail == 1 && j == 3 {
                    10e9
                } else {
                    (40.0 + j as f64) * 1e9
                };
                records.push(pair("n0", &format!("p{j}"), rail, 1 << 26, bw));
            }
        }
        let (f, notes) = Fabric::from_records(records.clone(), "n0", 2);
        assert!(notes.is_empty(), "{notes:?}");
        let kept: Vec<(u32, &str)> = f
            .pairs
            .iter()
            .map(|p| (p.rail, p.peer_node.as_str()))
            .collect();
        let mut want = vec![
            (0, "p0"),
            (0, "p1"),
            (0, "p8"),
            (1, "p0"),
            (1, "p3"),
            (1, "p8"),
        ];
        want.sort_by_key(|&(rail, peer)| (peer, rail));
        assert_eq!(kept, want);
        assert_eq!(
            f.rails,
            [
                Rail {
                    rail: 0,
                    backend: Backend::Sim,
                    peers: 9,
                    median_busbw_bytes_per_s: 44e9
                },
                // Rail 1 without p3's 43 GB/s and with its 10: the middle of nine is 44 GB/s.
                Rail {
                    rail: 1,
                    backend: Backend::Sim,
                    peers: 9,
                    median_busbw_bytes_per_s: 44e9
                },
            ]
        );
        // Fewer peers than kept: each once, the fastest not twice; an even count's median is
        // the mean of the middle two.
        let (few, _) = Fabric::from_records(records[..2].to_vec(), "n0", 4);
        assert_eq!(few.pairs.len(), 2);
        assert_eq!(few.rails[0].median_busbw_bytes_per_s, 40.5e9);
        // None kept but the fastest.
        let (none, _) = Fabric::from_records(records, "n0", 0);
        assert_eq!(
            none.pairs
                .iter()
                .map(|p| p.peer_node.as_str())
                .collect::<Vec<_>>(),
            ["p8", "p8"]
        );
    }

    /// Issue 31, item 7: a FIFO at the results file hung the sampler's poll for ever. It is
    /// refused at once, and reported once.
    #[test]
    fn r31_a_fifo_results_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        crate::input::tests::mkfifo(&dir.path().join(FILE_NAME));
        let mut w = Watcher::new(dir.path(), 4);
        let (change, mut w) = crate::input::tests::within_5s(move || (w.poll("n1"), w));
        match change {
            Some(Change::Refused(e)) => assert!(e.to_string().contains("a FIFO"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(w.poll("n1").is_none());
    }

    #[test]
    fn watcher_reads_on_change_refuses_bad_files_and_sees_removal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut w = Watcher::new(dir.path(), 4);
        assert!(w.poll("n1").is_none(), "no file, nothing to say");
        let mut untimed = pair("n0", "n1", 0, 1 << 26, 45e9);
        untimed.timestamp = None;
        fs::write(&path, lines(&[untimed])).unwrap();
        let written = fs::metadata(&path).unwrap().modified().unwrap();
        let written = written.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        match w.poll("n1") {
            Some(Change::Read { fabric, notes }) => {
                assert_eq!(fabric.pairs.len(), 1);
                assert!(notes.is_empty(), "{notes:?}");
                // Records without a time: the run is as old as the file.
                assert_eq!(fabric.last_run_timestamp, Some(written.as_secs_f64()));
            }
            other => panic!("{other:?}"),
        }
        assert!(w.poll("n1").is_none(), "unchanged");
        fs::write(&path, "{\"kind\": \"all_reduce\"\n").unwrap();
        match w.poll("n1") {
            Some(Change::Refused(e @ Refused::NotRecords { .. })) => {
                assert!(e.to_string().contains("line 1"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert!(w.poll("n1").is_none(), "a refused file is reported once");
        let big = fs::File::create(&path).unwrap();
        big.set_len(MAX_BYTES + 1).unwrap();
        match w.poll("n1") {
            Some(Change::Refused(e @ Refused::Unreadable(InputError::TooLarge { .. }))) => {
                assert!(
                    e.to_string()
                        .contains("33554433 bytes, more than 33554432 bytes (32 MiB)"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(w.poll("n1").is_none());
        fs::remove_file(&path).unwrap();
        assert!(matches!(w.poll("n1"), Some(Change::Removed)));
        assert!(w.poll("n1").is_none());
    }
}
