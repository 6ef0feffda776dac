//! One record per measured point (docs/design.md, "The measurement record"). Records of one
//! point that agree are duplicates, a file passed twice or a series returned twice (issue
//! 13). Records of one point that disagree, as the same series from two Prometheus servers
//! or a snapshot listing a node twice, are resolved by a rule that does not depend on the
//! order they came in, and named (issue 31, item 2): the newer by timestamp, and of equal
//! timestamps the slower, the conservative figure.

use std::cmp::Ordering;
use std::collections::HashMap;

use record::{AttentionShape, Backend, Dtype, Gemm, GemmLayout, Kind, Record, Scope};

/// Everything that says what a record measured, none of what it found or when. A record
/// without a timestamp (an imported log) is one run's, and its time is part of what it is, so
/// that two runs of nccl-tests both count.
#[derive(PartialEq, Eq, Hash)]
struct Point<'a> {
    kind: Kind,
    backend: Backend,
    node: Option<&'a str>,
    gpus: &'a [u32],
    scope: Scope,
    ranks: u32,
    bytes: u64,
    dtype: Dtype,
    in_place: bool,
    gemm: Option<Gemm>,
    layout: Option<GemmLayout>,
    peer_node: Option<&'a str>,
    ranks_per_node: Option<u32>,
    nodes: Option<&'a [String]>,
    nvlink_domains: Option<u32>,
    attention: Option<AttentionShape>,
    untimed_run: Option<u64>,
}

impl<'a> Point<'a> {
    fn of(r: &'a Record) -> Self {
        Point {
            kind: r.kind,
            backend: r.backend,
            node: r.group.node.as_deref(),
            gpus: &r.group.gpus,
            scope: r.group.scope,
            ranks: r.group.ranks,
            bytes: r.bytes,
            dtype: r.dtype,
            in_place: r.in_place,
            gemm: r.gemm,
            layout: r.detail.layout,
            peer_node: r.detail.peer_node.as_deref(),
            ranks_per_node: r.detail.ranks_per_node,
            nodes: r.detail.nodes.as_deref(),
            nvlink_domains: r.detail.nvlink_domains,
            attention: r.detail.attention,
            untimed_run: r.timestamp.is_none().then(|| r.timing.time_s.to_bits()),
        }
    }
}

/// The order in which one record of a point is kept over another: the newer, and of equal
/// timestamps the slower. It is total, so the record kept is the same in any input order.
fn precedence(a: &Record, b: &Record) -> Ordering {
    let when = |r: &Record| r.timestamp.unwrap_or(f64::NEG_INFINITY);
    when(a)
        .total_cmp(&when(b))
        .then(a.timing.time_s.total_cmp(&b.timing.time_s))
}

/// Keeps one record per point in `records`, in their first-seen order, and returns the notes
/// to print: how many duplicates went, and each point whose records disagreed.
pub(super) fn one_per_point(records: &mut Vec<Record>) -> Vec<String> {
    let mut index: HashMap<Point, usize> = HashMap::new();
    // Per point in first-seen order: the record kept and every record read.
    let mut points: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let slot = *index.entry(Point::of(r)).or_insert_with(|| {
            points.push((i, Vec::new()));
            points.len() - 1
        });
        let (kept, all) = &mut points[slot];
        all.push(i);
        if precedence(r, &records[*kept]).is_gt() {
            *kept = i;
        }
    }
    let mut duplicates = 0;
    let mut conflicts = Vec::new();
    for (kept, all) in &points {
        let kept = &records[*kept];
        let differ: Vec<&Record> = all
            .iter()
            .map(|&i| &records[i])
            .filter(|r| r.timing.time_s != kept.timing.time_s)
            .collect();
        duplicates += all.len() - 1 - differ.len();
        if !differ.is_empty() {
            conflicts.push(conflict_note(kept, &differ));
        }
    }
    let mut keep = vec![false; records.len()];
    for (kept, _) in &points {
        keep[*kept] = true;
    }
    let mut keep = keep.into_iter();
    records.retain(|_| keep.next().unwrap_or(false));
    let mut notes = Vec::new();
    if duplicates > 0 {
        notes.push(format!(
            "{duplicates} duplicate records dropped (one point read again with the same \
             value: a file passed twice or a series returned twice)"
        ));
    }
    notes.extend(record::summarize(&conflicts, |_| ()));
    notes
}

/// Names the point, every value read for it and the one kept, and why that one.
fn conflict_note(kept: &Record, others: &[&Record]) -> String {
    let value = |r: &Record| match r.timestamp {
        Some(t) => format!("{} s measured at {t}", r.timing.time_s),
        None => format!("{} s", r.timing.time_s),
    };
    let read: Vec<String> = others.iter().map(|r| value(r)).collect();
    let why = if others.iter().all(|r| r.timestamp < kept.timestamp) {
        "the newer"
    } else {
        "the slower of the newest"
    };
    format!(
        "conflicting measurements of {} on node {}: {} and {}; kept {}, {why}",
        series(kept),
        kept.group.node.as_deref().unwrap_or("unknown"),
        value(kept),
        read.join(" and "),
        value(kept),
    )
}

/// The point a record measured, in words: `all_reduce nccl 1048576 B bf16 8 ranks
/// intra_node gpus 0,1`.
fn series(r: &Record) -> String {
    let mut words = vec![r.kind.to_string(), r.backend.to_string()];
    if let Some(g) = r.gemm {
        words.push(format!("{}x{}x{}", g.m, g.n, g.k));
    } else if let Some(a) = r.detail.attention {
        words.push(format!(
            "batch {} seq {} heads {} head_dim {} {}{}",
            a.batch,
            a.seq,
            a.heads,
            a.head_dim,
            a.pass,
            if a.causal { " causal" } else { "" }
        ));
    } else {
        words.push(format!("{} B", r.bytes));
    }
    words.push(r.dtype.to_string());
    words.push(format!("{} ranks {}", r.group.ranks, r.group.scope));
    if let Some(l) = r.detail.layout {
        words.push(l.to_string());
    }
    if !r.group.gpus.is_empty() {
        let gpus: Vec<String> = r.group.gpus.iter().map(ToString::to_string).collect();
        words.push(format!("gpus {}", gpus.join(",")));
    }
    if let Some(p) = &r.detail.peer_node {
        words.push(format!("to {p}"));
    }
    if let Some(n) = r.detail.ranks_per_node {
        words.push(format!("{n} per node"));
    }
    if let Some(d) = r.detail.nvlink_domains {
        words.push(format!("over {d} NVLink domains"));
    }
    if r.in_place {
        words.push("in place".into());
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{Clock, Group, Timing};

    fn all_reduce(time_s: f64, timestamp: f64) -> Record {
        let mut r = Record::transfer(
            Kind::AllReduce,
            Backend::Nccl,
            Group {
                node: Some("n1".into()),
                gpus: vec![0, 1],
                scope: Scope::IntraNode,
                ranks: 2,
            },
            1 << 20,
            Dtype::Bf16,
            Timing::without_spread(time_s, Some(20), Clock::CudaEvent),
        );
        r.timestamp = Some(timestamp);
        r
    }

    /// Both orders of `a` and `b`: the records kept and the notes.
    fn both_orders(a: Record, b: Record) -> [(Vec<Record>, Vec<String>); 2] {
        [vec![a.clone(), b.clone()], vec![b, a]].map(|mut records| {
            let notes = one_per_point(&mut records);
            (records, notes)
        })
    }

    /// Issue 31, item 2: one series from two Prometheus servers, the second 10x slower, at
    /// one timestamp. Either order keeps the slower and names the node, the series, both
    /// values and the one kept.
    #[test]
    fn r31_2_conflicting_records_keep_the_slower_in_either_order() {
        let [first, second] = both_orders(all_reduce(1e-4, 1000.0), all_reduce(1e-3, 1000.0));
        assert_eq!(first, second);
        let (records, notes) = first;
        assert_eq!(records, [all_reduce(1e-3, 1000.0)]);
        assert_eq!(
            notes,
            [
                "conflicting measurements of all_reduce nccl 1048576 B bf16 2 ranks intra_node \
              gpus 0,1 on node n1: 0.001 s measured at 1000 and 0.0001 s measured at 1000; \
              kept 0.001 s measured at 1000, the slower of the newest"
            ]
        );
    }

    #[test]
    fn r31_2_of_conflicting_records_the_newer_is_kept_in_either_order() {
        let [first, second] = both_orders(all_reduce(1e-3, 1000.0), all_reduce(1e-4, 2000.0));
        assert_eq!(first, second);
        let (records, notes) = first;
        assert_eq!(records, [all_reduce(1e-4, 2000.0)]);
        assert!(
            notes[0].ends_with("kept 0.0001 s measured at 2000, the newer"),
            "{notes:?}"
        );
    }

    #[test]
    fn records_that_agree_are_counted_not_named() {
        let [(records, notes), _] = both_orders(all_reduce(1e-4, 1000.0), all_reduce(1e-4, 1000.0));
        assert_eq!(records.len(), 1);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("1 duplicate records dropped"),
            "{notes:?}"
        );
    }

    #[test]
    fn other_points_are_not_conflicts() {
        let mut other_gpus = all_reduce(1e-3, 1000.0);
        other_gpus.group.gpus = vec![2, 3];
        let mut per_node = all_reduce(1e-3, 1000.0);
        per_node.detail.ranks_per_node = Some(1);
        // One fabric shape run inside a rack and across racks: two points, not a conflict.
        let mut in_rack = all_reduce(1e-3, 1000.0);
        in_rack.detail.nvlink_domains = Some(1);
        let mut records = vec![all_reduce(1e-4, 1000.0), other_gpus, per_node, in_rack];
        assert!(one_per_point(&mut records).is_empty());
        assert_eq!(records.len(), 4);
    }
}
