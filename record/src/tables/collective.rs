//! nccl-tests-shaped collective tables: a `size` column, then one group of `time`, `algbw`,
//! `busbw` (and `#wrong`) columns per placement, out-of-place first and in-place second, as
//! nccl-tests prints them and as vTrain stores its all-reduce lookup tables.

use super::header::Name;
use super::{in_range, refuse, Row, Table, TableError, MAX_DIM};
use crate::nccl_tests::ImportOptions;
use crate::{busbw_factor, Backend, Clock, Dtype, Group, Kind, Record, Scope, Timing};

/// Most ranks a table row may name: more than any NCCL job has run.
const MAX_RANKS: u64 = 1 << 20;

/// Where a fact about the table came from, for messages.
#[derive(Debug, Clone, PartialEq)]
enum From {
    Flag,
    Column,
    FileName,
    Bandwidth,
}

impl From {
    fn says(&self) -> &'static str {
        match self {
            From::Flag => "the flag",
            From::Column => "the column",
            From::FileName => "the file name",
            From::Bandwidth => "busbw / algbw",
        }
    }
}

/// The collective a file name states: `all_reduce`, `allgather`, or vTrain's `AR_` (all-reduce),
/// with `AG_`, `RS_`, `A2A_` read the same way.
fn kind_in_name(file_name: &str) -> Option<Kind> {
    let stem = file_name.split('.').next().unwrap_or(file_name);
    let folded: String = stem
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let spelled = [
        ("allreduce", Kind::AllReduce),
        ("allgather", Kind::AllGather),
        ("reducescatter", Kind::ReduceScatter),
        ("alltoall", Kind::AllToAll),
        ("sendrecv", Kind::SendRecv),
    ];
    if let Some((_, k)) = spelled.iter().find(|(s, _)| folded.contains(s)) {
        return Some(*k);
    }
    let tokens: Vec<String> = stem
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .collect();
    let short = [
        ("ar", Kind::AllReduce),
        ("ag", Kind::AllGather),
        ("rs", Kind::ReduceScatter),
        ("a2a", Kind::AllToAll),
        ("sr", Kind::SendRecv),
    ];
    let found: Vec<Kind> = tokens
        .iter()
        .filter_map(|t| short.iter().find(|(s, _)| s == t).map(|(_, k)| *k))
        .collect();
    (found.len() == 1).then(|| found[0])
}

/// The rank count a file name states: one token such as `GPU8`, `8gpus`, `ranks16`, `np4` or
/// `n8`; none, or two that disagree, state nothing.
fn ranks_in_name(file_name: &str) -> Option<u32> {
    let stem = file_name.split('.').next().unwrap_or(file_name);
    let counts: Vec<u32> = stem
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|token| {
            let t = token.to_ascii_lowercase();
            let digits_at = t.find(|c: char| c.is_ascii_digit())?;
            let (prefix, rest) = t.split_at(digits_at);
            let digits_end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let (digits, suffix) = rest.split_at(digits_end);
            let named = matches!(prefix, "gpu" | "gpus" | "ranks" | "rank" | "np" | "n" | "g")
                && suffix.is_empty()
                || prefix.is_empty() && matches!(suffix, "gpu" | "gpus" | "ranks" | "g");
            named.then(|| digits.parse().ok()).flatten()
        })
        .collect();
    match counts.as_slice() {
        [n] => Some(*n),
        [n, rest @ ..] if rest.iter().all(|m| m == n) => Some(*n),
        _ => None,
    }
}

/// The rank count whose busbw factor is `ratio` for `kind`, where the factor depends on it.
fn ranks_from_ratio(kind: Kind, ratio: f64) -> Option<u32> {
    let n = match kind {
        // 2(n-1)/n = r  =>  n = 2 / (2 - r)
        Kind::AllReduce if ratio < 1.999 => 2.0 / (2.0 - ratio),
        // (n-1)/n = r  =>  n = 1 / (1 - r)
        Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll if ratio < 0.999 => {
            1.0 / (1.0 - ratio)
        }
        _ => return None,
    };
    let rounded = n.round();
    ((n / rounded - 1.0).abs() < 0.03 && rounded >= 2.0).then_some(rounded as u32)
}

/// One placement's columns: time and, where printed, busbw and `#wrong`.
struct Placement {
    time: usize,
    busbw: Option<usize>,
    wrong: Option<usize>,
}

fn placements(table: &Table) -> Vec<Placement> {
    let times = table.all(Name::Time);
    times
        .iter()
        .enumerate()
        .map(|(g, &time)| {
            let end = times.get(g + 1).copied().unwrap_or(table.columns.len());
            let within = |name: Name| (time..end).find(|&i| table.columns[i].name == Some(name));
            Placement {
                time,
                busbw: within(Name::Busbw),
                wrong: within(Name::Wrong),
            }
        })
        .collect()
}

fn kind_of_table(
    table: &Table,
    file_name: &str,
    opts: &ImportOptions,
) -> Result<(Kind, From), TableError> {
    if let Some(k) = opts.collective {
        return Ok((k, From::Flag));
    }
    if let Some(i) = table.find(Name::Collective) {
        let first = table.same_in_every_row(i, "collective")?;
        let k = crate::nccl_tests::convention::collective_name(first).ok_or_else(|| {
            refuse(
                table.rows[0].line,
                format!("collective `{first}`: expected all_reduce, all_gather, reduce_scatter, all_to_all or send_recv"),
            )
        })?;
        return Ok((k, From::Column));
    }
    kind_in_name(file_name)
        .map(|k| (k, From::FileName))
        .ok_or_else(|| {
            refuse(
                table.header_line,
                format!(
                    "the collective is not stated: no collective column, and the file name \
                     `{file_name}` names none (all_reduce, AR_, ...): pass --collective"
                ),
            )
        })
}

/// Each placement's time unit: its column's, or nccl-tests' microseconds for a bare `time`
/// column of a table shaped like its output.
fn time_units(
    table: &Table,
    groups: &[Placement],
    nccl_shaped: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<f64>, TableError> {
    let mut time_units = Vec::with_capacity(groups.len());
    for g in groups {
        let column = &table.columns[g.time];
        time_units.push(match column.unit {
            Some(u) => u.factor,
            None if nccl_shaped => {
                notes.push(format!(
                    "column `{}` names no unit: read as nccl-tests prints it, in microseconds",
                    column.raw
                ));
                1e-6
            }
            None => {
                return Err(refuse(
                    table.header_line,
                    format!(
                        "column `{}` names no unit: write it as time(s), time(ms), time(us) or time(ns)",
                        column.raw
                    ),
                ))
            }
        });
    }
    Ok(time_units)
}

/// A row's buffer type: nccl-tests' names or ours; float, nccl-tests' default, without a
/// type column.
fn row_dtype(table: &Table, row: &Row, type_col: Option<usize>) -> Result<Dtype, TableError> {
    Ok(match type_col {
        Some(i) => crate::nccl_tests::convention::dtype(row.cell(i))
            .or_else(|| super::dtype(row, table, i).ok())
            .ok_or_else(|| {
                refuse(
                    row.line,
                    format!(
                        "type `{}`: expected an nccl-tests type (float, half, bfloat16, ...)",
                        row.cell(i)
                    ),
                )
            })?,
        None => Dtype::Fp32,
    })
}

/// A row's rank count and where it came from: `--ranks`, the ranks column, the file name, or
/// the ratio of the first placement's printed busbw to its algbw over `bytes` (`time_unit`
/// its time's).
fn row_ranks(
    (table, row, bytes): (&Table, &Row, f64),
    (ranks_col, named_ranks): (Option<usize>, &Option<(u32, From)>),
    kind: Kind,
    (g, time_unit): (&Placement, f64),
    file_name: &str,
) -> Result<(u32, From), TableError> {
    let busbw_unit = |i: usize| table.columns[i].unit.map_or(1e9, |u| u.factor);
    Ok(match (ranks_col, named_ranks) {
        (_, Some((n, from))) if *from == From::Flag => (*n, From::Flag),
        (Some(i), _) => (row.count(table, i, MAX_RANKS)? as u32, From::Column),
        (None, Some((n, from))) => (*n, from.clone()),
        (None, None) => {
            let derived = g.busbw.and_then(|b| {
                let time = row.positive(table, g.time).ok()? * time_unit;
                let busbw = row.positive(table, b).ok()? * busbw_unit(b);
                ranks_from_ratio(kind, busbw / (bytes / time))
            });
            match derived {
                Some(n) => (n, From::Bandwidth),
                None => {
                    return Err(refuse(
                        row.line,
                        format!(
                            "the rank count is not stated: no ranks column, the file name \
                             `{file_name}` names none (GPU8, 8gpus, ranks8), and busbw / \
                             algbw does not give it for {kind}: pass --ranks"
                        ),
                    ))
                }
            }
        }
    })
}

/// A row's scope: `--scope`, else inside a node up to 8 ranks; past that the table must say.
fn row_scope(row: &Row, ranks: u32, scope: Option<Scope>) -> Result<Scope, TableError> {
    match scope {
        Some(s) => Ok(s),
        None if ranks <= 8 => Ok(Scope::IntraNode),
        None => Err(refuse(
            row.line,
            format!("{ranks} ranks and no --scope: say whether they share a node (--scope intra_node or inter_node)"),
        )),
    }
}

/// The note for placements nccl-tests marked wrong, by line.
fn dropped_note(dropped: &[usize]) -> Option<String> {
    (!dropped.is_empty()).then(|| {
        format!(
            "{} placements dropped where #wrong is not 0 (lines {})",
            dropped.len(),
            dropped
                .iter()
                .take(5)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Records of a collective table.
pub(crate) fn records(
    table: &Table,
    file_name: &str,
    opts: &ImportOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<Record>, TableError> {
    let size = table.need(Name::Size, "size")?;
    let size_unit = table.columns[size].unit.map_or(1.0, |u| u.factor);
    let (kind, kind_from) = kind_of_table(table, file_name, opts)?;
    let groups = placements(table);
    // nccl-tests prints its times in microseconds; a table shaped like its output with a bare
    // `time` column keeps that unit, and says so.
    let nccl_shaped = table.find(Name::Count).is_some() || table.find(Name::Type).is_some();
    let time_units = time_units(table, &groups, nccl_shaped, notes)?;
    let busbw_unit = |i: usize| table.columns[i].unit.map_or(1e9, |u| u.factor);
    let type_col = table.find(Name::Type);
    if type_col.is_none() {
        notes.push("no type column: the buffers are taken as float, nccl-tests' default".into());
    }
    let ranks_col = table.find(Name::Ranks);
    let named_ranks = opts
        .ranks
        .map(|n| (n, From::Flag))
        .or_else(|| ranks_in_name(file_name).map(|n| (n, From::FileName)));

    let mut records = Vec::new();
    let mut dropped = Vec::new();
    for row in &table.rows {
        let bytes = (row.positive(table, size)? * size_unit).round();
        if bytes > MAX_DIM as f64 {
            return Err(refuse(
                row.line,
                format!("size {bytes} bytes: expected at most 2^40 (1 TiB)"),
            ));
        }
        let dtype = row_dtype(table, row, type_col)?;
        let stated = (ranks_col, &named_ranks);
        let (ranks, ranks_from) = row_ranks(
            (table, row, bytes),
            stated,
            kind,
            (&groups[0], time_units[0]),
            file_name,
        )?;
        let scope = row_scope(row, ranks, opts.scope)?;
        let factor = busbw_factor(kind, ranks).unwrap_or(1.0);
        for (g, placement) in groups.iter().enumerate().take(2) {
            if row.cell(placement.time).is_empty() {
                continue;
            }
            let time = row.positive(table, placement.time)? * time_units[g];
            if let Some(w) = placement.wrong {
                let wrong = row.cell(w);
                if wrong.parse::<f64>().is_ok_and(|v| v != 0.0) && wrong != "N/A" {
                    dropped.push(row.line);
                    continue;
                }
            }
            if let Some(b) = placement.busbw {
                let printed = row.positive(table, b)? * busbw_unit(b);
                let expected = bytes / time * factor;
                if (printed / expected - 1.0).abs() > 0.05 {
                    return Err(refuse(
                        row.line,
                        format!(
                            "busbw {:.2} GB/s printed, {:.2} from size / time x {factor:.3} for {ranks} ranks ({}): the rank count or a unit is wrong",
                            printed / 1e9,
                            expected / 1e9,
                            ranks_from.says()
                        ),
                    ));
                }
            }
            let group = Group {
                node: opts.node.clone(),
                gpus: Vec::new(),
                scope,
                ranks,
            };
            let timing = Timing::without_spread(time, None, Clock::NcclTests);
            let mut r = Record::transfer(kind, Backend::Nccl, group, bytes as u64, dtype, timing);
            r.in_place = g == 1;
            records.push(in_range(r, row.line)?);
        }
    }
    if groups.len() > 2 {
        notes.push(format!(
            "{} groups of time columns: the first two are read as out-of-place and in-place, the rest not",
            groups.len()
        ));
    }
    notes.extend(dropped_note(&dropped));
    if kind_from == From::FileName {
        notes.push(format!("{kind} read from the file name `{file_name}`"));
    }
    if let Some((n, From::FileName)) = named_ranks {
        notes.push(format!("{n} ranks read from the file name `{file_name}`"));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_state_the_collective_and_the_ranks() {
        assert_eq!(kind_in_name("AR_GPU8_1M_1024M_LUT"), Some(Kind::AllReduce));
        assert_eq!(ranks_in_name("AR_GPU8_1M_1024M_LUT"), Some(8));
        assert_eq!(
            kind_in_name("all_gather_perf_16gpus.csv"),
            Some(Kind::AllGather)
        );
        assert_eq!(ranks_in_name("all_gather_perf_16gpus.csv"), Some(16));
        assert_eq!(ranks_in_name("sweep_np4.csv"), Some(4));
        assert_eq!(kind_in_name("sweep.csv"), None);
        assert_eq!(ranks_in_name("sweep_1M_1024M.csv"), None);
        // Two counts that disagree state nothing.
        assert_eq!(ranks_in_name("AR_GPU8_n4"), None);
    }

    #[test]
    fn the_bandwidth_ratio_gives_the_rank_count() {
        assert_eq!(ranks_from_ratio(Kind::AllReduce, 1.75), Some(8));
        assert_eq!(ranks_from_ratio(Kind::AllReduce, 1.0), Some(2));
        assert_eq!(ranks_from_ratio(Kind::AllGather, 0.75), Some(4));
        assert_eq!(ranks_from_ratio(Kind::SendRecv, 1.0), None);
        assert_eq!(ranks_from_ratio(Kind::AllReduce, 1.7), None);
    }
}
