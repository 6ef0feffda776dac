//! Printing records in the nccl-tests column layout (time in us, algbw and busbw in GB/s), so
//! that log parsers and habits built around nccl-tests keep working on microbench output.

use super::convention;
use crate::{Kind, Record, Scope};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Records that have no nccl-tests table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} records have no nccl-tests table; expected one of all_reduce, all_gather, reduce_scatter, all_to_all, send_recv")]
pub struct WriteError {
    /// The kind given.
    pub kind: Kind,
}

const HEADER: &str = "\
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
";

/// Prints collective records as nccl-tests tables, one per collective, rank group and type,
/// in order of first appearance, rows by size. Out-of-place and in-place records of the same
/// size share a row; a missing placement prints `N/A`. `#wrong` prints `N/A` because meshfit
/// times without checking results, as nccl-tests does with `-c 0`.
pub fn write(records: &[Record]) -> Result<String, WriteError> {
    if let Some(r) = records.iter().find(|r| !r.kind.is_collective()) {
        return Err(WriteError { kind: r.kind });
    }
    let mut tables: Vec<Vec<&Record>> = Vec::new();
    for r in records {
        match tables.iter_mut().find(|t| same_table(t[0], r)) {
            Some(t) => t.push(r),
            None => tables.push(vec![r]),
        }
    }
    let mut out = String::new();
    for table in tables {
        write_table(&mut out, &table);
    }
    Ok(out)
}

fn same_table(a: &Record, b: &Record) -> bool {
    a.kind == b.kind && a.backend == b.backend && a.group == b.group && a.dtype == b.dtype
}

fn write_table(out: &mut String, table: &[&Record]) {
    let first = table[0];
    let mut sizes: Vec<u64> = table.iter().map(|r| r.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let stem = convention::binary_stem(first.kind).unwrap_or("?");
    let iters = first
        .timing
        .iters
        .map_or("-".to_string(), |n| n.to_string());
    // The first lines are the ones nccl-tests prints, so `parse` reads the table back.
    let _ = writeln!(out, "# Collective test starting: {stem}_perf");
    // One process drives every GPU of a node; across nodes mpirun starts one per GPU.
    let inter = first.group.scope == Scope::InterNode;
    let _ = writeln!(
        out,
        "# nThread 1 nGpus {} minBytes {} maxBytes {} iters: {iters} validation: 0 backend: {} clock: {}",
        if inter { 1 } else { first.group.ranks },
        sizes[0],
        sizes[sizes.len() - 1],
        first.backend,
        first.timing.clock
    );
    if !first.group.gpus.is_empty() {
        let node = first.group.node.as_deref().unwrap_or("-");
        let _ = writeln!(out, "#\n# Using devices");
        // Across nodes, ranks fill the hosts in blocks of the distinct devices (a uniform
        // launch); the record names only rank 0's host, so the others get a `+k` suffix.
        let per_host = if inter {
            first.group.gpus.iter().collect::<BTreeSet<_>>().len()
        } else {
            first.group.gpus.len()
        };
        for (rank, gpu) in first.group.gpus.iter().enumerate() {
            let host = match rank / per_host {
                0 => node.to_string(),
                k => format!("{node}+{k}"),
            };
            let _ = writeln!(
                out,
                "#  Rank {rank:2} Group  0 Pid      - on {host:>10} device {gpu:2} [-] {}",
                first.backend
            );
        }
    }
    let _ = writeln!(out, "#");
    out.push_str(HEADER);
    let mut busbw_sum = 0.0;
    let mut busbw_n = 0u32;
    for size in sizes {
        let placed = |in_place| {
            table
                .iter()
                .find(|r| r.bytes == size && r.in_place == in_place)
        };
        let count = size
            / (first.dtype.size_bytes()
                * convention::counts_per_size(first.kind, first.group.ranks));
        let _ = write!(
            out,
            "{size:>12}  {count:>12}  {:>8}  {:>6}  {:>6}",
            convention::type_name(first.dtype),
            convention::redop(first.kind),
            -1
        );
        for in_place in [false, true] {
            match placed(in_place) {
                Some(r) => {
                    let _ = write!(
                        out,
                        "  {}  {}  {}  {:>5}",
                        convention::format_time_us(r.timing.time_s * 1e6),
                        gbs(r.algbw),
                        gbs(r.busbw),
                        "N/A"
                    );
                    if let Some(b) = r.busbw {
                        busbw_sum += b / 1e9;
                        busbw_n += 1;
                    }
                }
                None => {
                    let _ = write!(
                        out,
                        "  {:>7}  {:>6}  {:>6}  {:>5}",
                        "N/A", "N/A", "N/A", "N/A"
                    );
                }
            }
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "# Avg bus bandwidth    : {}",
        significant(busbw_sum / f64::from(busbw_n.max(1)))
    );
    let _ = writeln!(out, "#");
}

/// A bandwidth in GB/s as `%6.2f`, or `N/A` for a record that lacks it.
fn gbs(bytes_per_s: Option<f64>) -> String {
    bytes_per_s.map_or_else(|| format!("{:>6}", "N/A"), |v| format!("{:6.2}", v / 1e9))
}

/// Six significant digits, as C's `%g` prints nccl-tests' average.
fn significant(v: f64) -> String {
    let digits = if v.abs() >= 1.0 {
        v.abs().log10().floor() as i32 + 1
    } else {
        1
    };
    let decimals = usize::try_from((6 - digits).max(0)).unwrap_or(0);
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
