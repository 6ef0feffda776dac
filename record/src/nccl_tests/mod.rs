//! nccl-tests text in and out.
//!
//! [`parse`] reads the output of nccl-tests' `*_perf` binaries as people paste it (old and new
//! column layouts, MPI prefixes, code fences, cut-off rows and device lists, several tables
//! with or without their `*_perf` lines) into [`Record`]s, one per row and placement, and
//! checks the printed algbw and busbw against the size, time and the busbw factor.
//! [`write()`] prints records in the same column layout.
//!
//! A log is read for what it says (issue 13): the rank count comes first from the table's
//! own numbers (size / count, printed busbw / algbw; see [`Evidence`]), then the launch line,
//! `-g` and the device list, so a printed busbw is never recomputed from a guess; results
//! nccl-tests marked wrong and rows with non-finite numbers are dropped with a [`Warning`];
//! and when nothing is left the error says why ([`ParseError::NoValidRows`]). Read files
//! through [`crate::read_bounded`] with [`crate::MAX_LOG_BYTES`].

pub(crate) mod convention;
mod launch;
mod parse;
mod ranks;
mod rows;
mod write;

use crate::{Kind, Record, Scope};
use std::fmt;

pub use parse::MAX_LISTED_GPUS;
pub use ranks::{Evidence, Source, Span};
pub use write::{write, WriteError};

/// What the log cannot say and the user can.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The collective of each table that neither the text before it nor its columns tell;
    /// a table the log does tell keeps its own, with a warning if this differs.
    pub collective: Option<Kind>,
    /// The rank count, overriding what the log shows.
    pub ranks: Option<u32>,
    /// Whether the ranks share a node, overriding what the log shows.
    pub scope: Option<Scope>,
    /// The node's host name, when the log has no device list.
    pub node: Option<String>,
}

/// Records read from a log, and what was odd about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// One record per result row and placement (out-of-place, in-place), in file order.
    pub records: Vec<Record>,
    /// Rows skipped or cut short, and printed numbers that disagree with the convention;
    /// callers print them.
    pub warnings: Vec<Warning>,
}

impl Parsed {
    /// The warnings as lines for people, the first few of each kind spelled out and the rest
    /// counted: a runaway log's two million skipped rows must not print two million lines
    /// (issue 31, item 13).
    pub fn warning_lines(&self) -> Vec<String> {
        crate::summarize(&self.warnings, std::mem::discriminant)
    }
}

/// Something in a log that did not stop the import; each names its 1-based line.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// A result row cut off before its last column.
    Truncated {
        /// Line number.
        line: usize,
        /// The out-of-place columns were complete and kept; the in-place ones were not.
        kept_out_of_place: bool,
    },
    /// A line shaped like a result row that could not be read; skipped.
    Unreadable {
        /// Line number.
        line: usize,
        /// Which column was wrong and how.
        reason: String,
    },
    /// A row whose numbers lie outside the physical ranges every reader holds records to
    /// ([`Record::validate`]: a time of 1e-300 s, a size of 0 bytes); skipped.
    OutOfRange {
        /// Line number.
        line: usize,
        /// The field, its value and its range.
        invalid: crate::Invalid,
    },
    /// Results nccl-tests itself marked wrong (`#wrong` non-zero, or the old `error` column
    /// past the type's tolerance); dropped.
    Failed {
        /// First row of the table.
        table: usize,
        /// The rows that lost a placement.
        lines: Vec<usize>,
    },
    /// An `Out of bounds values : N FAILED` footer with no row saying which; the run's
    /// results were dropped.
    FailedRun {
        /// The footer's line.
        line: usize,
        /// Wrong values nccl-tests counted.
        wrong: u64,
        /// Records dropped.
        dropped: usize,
    },
    /// `--collective` differs from what the log shows for this table; the log's was kept.
    HintNotApplied {
        /// First row of the table.
        line: usize,
        /// The hint.
        hint: Kind,
        /// What the log shows.
        kind: Kind,
    },
    /// Sources of the rank count disagree; the count taken is the one the printed numbers
    /// allow, ahead of the lines around the table.
    RanksDisagree {
        /// First row of the table.
        line: usize,
        /// The rank count taken.
        ranks: u32,
        /// What each source said.
        evidence: Vec<Evidence>,
    },
    /// The `size` column disagrees with `count` x type size for this collective.
    SizeMismatch {
        /// Line number.
        line: usize,
        /// The printed size in bytes.
        size: u64,
        /// count x type size x the collective's count multiplier, in bytes (recorded).
        bytes: u64,
    },
    /// The printed algbw is not size / time.
    AlgbwMismatch {
        /// Line number.
        line: usize,
        /// Printed, GB/s.
        printed: f64,
        /// bytes / time, GB/s (recorded).
        computed: f64,
    },
    /// The printed busbw is not algbw x factor for the rank count used.
    BusbwMismatch {
        /// Line number.
        line: usize,
        /// Printed, GB/s.
        printed: f64,
        /// algbw x factor, GB/s (recorded).
        expected: f64,
        /// The busbw factor applied.
        factor: f64,
    },
}

/// How many line numbers a warning spells out; the rest are counted.
const SHOWN_LINES: usize = 5;

fn lines_list(lines: &[usize]) -> String {
    let shown: Vec<String> = lines
        .iter()
        .take(SHOWN_LINES)
        .map(ToString::to_string)
        .collect();
    let more = lines.len().saturating_sub(SHOWN_LINES);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

fn joined<T: ToString>(items: &[T], sep: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Truncated { line, kept_out_of_place: true } => {
                write!(f, "line {line}: row cut short; kept its out-of-place columns, skipped in-place")
            }
            Warning::Truncated { line, kept_out_of_place: false } => {
                write!(f, "line {line}: row cut short before its timings; skipped")
            }
            Warning::Unreadable { line, reason } => write!(f, "line {line}: unreadable result row ({reason}); skipped"),
            Warning::OutOfRange { line, invalid } => write!(f, "line {line}: {invalid}; skipped"),
            Warning::Failed { table, lines } => write!(
                f,
                "table at line {table}: nccl-tests marked {} row(s) wrong (#wrong or error column) on line(s) {}; dropped those results",
                lines.len(),
                lines_list(lines)
            ),
            Warning::FailedRun { line, wrong, dropped } => write!(
                f,
                "line {line}: nccl-tests reports {wrong} out-of-bounds values (FAILED) and no row says which; dropped the run's {dropped} results"
            ),
            Warning::HintNotApplied { line, hint, kind } => write!(
                f,
                "table at line {line}: the log shows {kind}; --collective {hint} applies only to tables that do not say"
            ),
            Warning::RanksDisagree { line, ranks, evidence } => write!(
                f,
                "table at line {line}: took {ranks} ranks, but the sources disagree: {}",
                joined(evidence, "; ")
            ),
            Warning::SizeMismatch { line, size, bytes } => write!(
                f,
                "line {line}: size {size} B disagrees with count x type size ({bytes} B); recorded {bytes} B"
            ),
            Warning::AlgbwMismatch { line, printed, computed } => write!(
                f,
                "line {line}: printed algbw {printed} GB/s, but size / time is {computed:.3} GB/s; recorded the latter"
            ),
            Warning::BusbwMismatch { line, printed, expected, factor } => write!(
                f,
                "line {line}: printed busbw {printed} GB/s, but algbw x {factor:.4} is {expected:.3} GB/s \
                 (wrong rank count? pass --ranks); recorded the latter"
            ),
        }
    }
}

/// Why one table of a log could not be imported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    /// Nothing names the collective and the columns fit several (or none).
    #[error(
        "table at line {line}: the log does not name its collective (no `*_perf` binary or name such as \
         `all_reduce` before it), and its columns fit {}; pass --collective",
        fits_text(.fits)
    )]
    UnknownCollective {
        /// First row of the table.
        line: usize,
        /// The collectives its columns and printed ratio allow.
        fits: Vec<Kind>,
    },
    /// Several collectives named before the table, and its columns do not tell which.
    #[error("table at line {line}: the log names several collectives ({}) and its columns do not tell which; pass --collective", .names.join(", "))]
    AmbiguousCollective {
        /// First row of the table.
        line: usize,
        /// The collectives named.
        names: Vec<String>,
    },
    /// The log names a collective whose columns the table does not have.
    #[error(
        "table at line {line}: the log names {}, but the columns (redop, root, size / count) fit {}; \
         pass --collective if the name belongs to another table",
        joined(.named, " and "),
        fits_text(.fits)
    )]
    ColumnsContradict {
        /// The collectives named.
        named: Vec<Kind>,
        /// First row of the table.
        line: usize,
        /// The collectives the columns fit.
        fits: Vec<Kind>,
    },
    /// `--collective` names a collective the table's columns rule out.
    #[error("table at line {line}: --collective {hint} does not fit its columns, which fit {}", fits_text(.fits))]
    HintDoesNotFit {
        /// First row of the table.
        line: usize,
        /// The hint.
        hint: Kind,
        /// The collectives the columns fit.
        fits: Vec<Kind>,
    },
    /// An nccl-tests binary meshfit does not record.
    #[error("table at line {line}: {name} is not one meshfit records; expected one of {}", .supported.join(", "))]
    UnsupportedCollective {
        /// First row of the table.
        line: usize,
        /// The binary named.
        name: String,
        /// The binaries meshfit reads.
        supported: Vec<String>,
    },
    /// Nothing fixes the rank count.
    #[error(
        "table at line {line}: cannot tell the rank count of this {kind} ({}); pass --ranks",
        if .evidence.is_empty() {
            "no launch line, device list or one-process `-g`, and busbw/algbw does not fix it".to_string()
        } else {
            joined(.evidence, "; ")
        }
    )]
    UnknownRanks {
        /// First row of the table.
        line: usize,
        /// The collective.
        kind: Kind,
        /// What each source said.
        evidence: Vec<Evidence>,
    },
    /// Nothing says whether the ranks share a node.
    #[error("table at line {line}: cannot tell whether the ranks share a node; pass --scope intra_node or inter_node")]
    UnknownScope {
        /// First row of the table.
        line: usize,
    },
}

fn fits_text(fits: &[Kind]) -> String {
    if fits.is_empty() {
        "no collective meshfit records (a root >= 0 is broadcast or reduce)".to_string()
    } else {
        joined(fits, " or ")
    }
}

/// Why a log could not be imported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// No result rows at all.
    #[error("no nccl-tests result rows found (expected lines like `  1048576  262144  float  sum  -1  ...`)")]
    NoTable,
    /// Result rows, every one of them rejected.
    #[error(
        "none of the {rows} result rows can be imported: {}{}",
        .reasons.join("; "),
        if *.rejected > .reasons.len() { format!("; and {} more", .rejected - .reasons.len()) } else { String::new() }
    )]
    NoValidRows {
        /// Result rows seen.
        rows: usize,
        /// Rejections (rows, or groups of rows) in all.
        rejected: usize,
        /// The first few reasons.
        reasons: Vec<String>,
    },
    /// Tables whose collective, rank count or scope the log does not tell; each is named.
    #[error("{}", joined(.0, "; "))]
    Tables(Vec<TableError>),
    /// `--ranks 0`.
    #[error("--ranks 0: expected at least 1")]
    ZeroRanks,
}

/// Reads an nccl-tests log, taking the collective, ranks and scope from the log itself.
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    parse_with(text, &ImportOptions::default())
}

/// Reads an nccl-tests log; what `opts` sets overrides what the log shows.
pub fn parse_with(text: &str, opts: &ImportOptions) -> Result<Parsed, ParseError> {
    parse::parse(text, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, Clock, Dtype, Group, Timing};

    /// Two runs from one mpirun, as Open MPI tags them, pasted inside a code fence.
    const TWO_RUNS: &str = "\
```
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 50 agg iters: 1 validation: 1 graph: 0
[1,0]<stdout>:#  Rank  0 Group  0 Pid  11 on nodeA device  0 [0x1b] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  1 Group  0 Pid  12 on nodeA device  1 [0x2b] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  2 Group  0 Pid  13 on nodeB device  0 [0x1b] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  3 Group  0 Pid  14 on nodeB device  1 [0x2b] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
[1,0]<stdout>:        1024           256     float     sum      -1    20.00    0.05    0.08      0    20.00    0.05    0.08      0
[1,0]<stdout>:NCCL INFO comm 0x5555 rank 0 nranks 4 - Init COMPLETE
[1,0]<stdout>:     1048576        262144     float     sum      -1    100.0   10.49   15.73      0    100.0   10.49   15.73      0
[1,0]<stdout>:     2097152        524288     float     sum      -1    200.0   10.49   15.73      0
[1,0]<stdout>:# Avg bus bandwidth    : 12.0
mpirun -np 4 ./build/all_gather_perf -b 1M -e 1M
[1,0]<stdout>:     1048576         65536  bfloat16    none      -1    50.00   20.97   18.35      0    50.00   20.97   18.35      0
```
";

    #[test]
    fn mpi_prefixes_fences_and_several_tables() {
        // Nothing names the first table, but its columns do: redop `sum` and size = count x 4
        // leave all-reduce and send/recv, and busbw/algbw = 15.73 / 10.49 = 1.5 = 2 x 3/4 is
        // a 4-rank all-reduce. Neither table says whether its ranks share a node.
        let err = parse(TWO_RUNS).unwrap_err().to_string();
        assert!(
            err.starts_with("table at line 14: cannot tell whether the ranks share a node"),
            "{err}"
        );
        let parsed = parse_with(
            TWO_RUNS,
            &ImportOptions {
                scope: Some(Scope::InterNode),
                ..Default::default()
            },
        )
        .unwrap();
        let kinds: Vec<(Kind, u64, bool)> = parsed
            .records
            .iter()
            .map(|r| (r.kind, r.bytes, r.in_place))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Kind::AllReduce, 1024, false),
                (Kind::AllReduce, 1024, true),
                (Kind::AllReduce, 1_048_576, false),
                (Kind::AllReduce, 1_048_576, true),
                (Kind::AllReduce, 2_097_152, false),
                (Kind::AllGather, 1_048_576, false),
                (Kind::AllGather, 1_048_576, true),
            ]
        );
        let ar = &parsed.records[0].group;
        assert_eq!(
            (ar.ranks, ar.scope, ar.gpus.clone()),
            (4, Scope::InterNode, vec![0, 1, 0, 1])
        );
        assert_eq!(parsed.records[0].timing.iters, Some(50));
        // The second run has no device list, and its launch line says 4 ranks; its rows say 8
        // twice (size / count, and busbw/algbw = 0.875 = 7/8), so 8 it is, with a warning.
        let ag = &parsed.records[5];
        assert_eq!((ag.group.ranks, ag.dtype), (8, Dtype::Bf16));
        assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
        assert_eq!(
            parsed.warnings[0],
            Warning::Truncated {
                line: 11,
                kept_out_of_place: true
            }
        );
        assert_eq!(
            parsed.warnings[1].to_string(),
            "table at line 14: took 8 ranks, but the sources disagree: size / (count x type size) \
             says 8; the printed busbw/algbw (0.875) says 8; the launch line says 4"
        );
    }

    /// Issue 11: a job killed mid-sweep leaves a log that stops part-way through a row, with
    /// no final newline (rows from the real log of nccl-tests issue #214). Cut at every byte of
    /// the last row: the complete rows are always kept; the cut row's out-of-place columns are
    /// kept once all four are there (its #wrong `0` cannot be the start of a longer count),
    /// and a warning names line 9 whenever anything of the row was lost.
    #[test]
    fn a_log_cut_mid_row_keeps_the_complete_rows_and_names_the_cut_line() {
        let head = "\
# nThread 1 nGpus 1 minBytes 256 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid 1478709 on      gpu23 device  0 [0x31] NVIDIA A40
#  Rank  1 Group  0 Pid 1171742 on      gpu24 device  0 [0x31] NVIDIA A40
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
         256            64     float     sum      -1    34.24    0.01    0.01      0    33.65    0.01    0.01    N/A
         512           128     float     sum      -1    34.24    0.01    0.01      0    34.15    0.01    0.01    N/A
";
        let last = "        1024           256     float     sum      -1    34.24    0.03    0.03      0    31.11    0.03    0.03    N/A";
        let out_of_place_end = last[..last.find("31.11").unwrap()].trim_end().len();
        let opts = ImportOptions {
            collective: Some(Kind::SendRecv),
            ..Default::default()
        };
        let size = |text: &str| {
            let parsed = parse_with(text, &opts).unwrap();
            let rows: Vec<(u64, bool)> = parsed
                .records
                .iter()
                .map(|r| (r.bytes, r.in_place))
                .collect();
            (rows, parsed.warnings)
        };
        let complete = [(256, false), (256, true), (512, false), (512, true)];
        for end in 1..=last.len() {
            let cut = &last[..end];
            if cut.trim().is_empty() {
                continue;
            }
            let (rows, warnings) = size(&format!("{head}{cut}"));
            assert_eq!(rows[..4], complete, "cut {cut:?}");
            let kept_out_of_place = end >= out_of_place_end;
            let whole = end == last.len();
            let expected_rows = match (whole, kept_out_of_place) {
                (true, _) => vec![(1024, false), (1024, true)],
                (false, true) => vec![(1024, false)],
                (false, false) => vec![],
            };
            assert_eq!(rows[4..], expected_rows[..], "cut {cut:?}");
            let expected_warnings = if whole {
                vec![]
            } else {
                vec![Warning::Truncated {
                    line: 9,
                    kept_out_of_place,
                }]
            };
            assert_eq!(warnings, expected_warnings, "cut {cut:?}");
        }
        // The same row with its newline is complete, and one cut by a newline mid-row (not
        // the end of the log) is read as before: kept up to its last whole placement.
        assert_eq!(size(&format!("{head}{last}\n")).0.len(), 6);
    }

    /// Two runs concatenated: NCCL's version line opens the second, and each table keeps its
    /// own run's collective, ranks and version.
    #[test]
    fn each_run_keeps_its_own_context() {
        let text = "\\
host:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1
all_reduce_perf -g 2
  1048576  262144  float  sum  -1  100.0  10.49  10.49  0  100.0  10.49  10.49  0
host:2:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
all_gather_perf -g 4
  1048576   65536  float  none  -1  100.0  10.49   7.86  0  100.0  10.49   7.86  0
";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.warnings, vec![]);
        let runs: Vec<(Kind, u32, Option<&str>)> = parsed
            .records
            .iter()
            .map(|r| (r.kind, r.group.ranks, r.versions.nccl.as_deref()))
            .collect();
        assert_eq!(
            runs,
            vec![
                (Kind::AllReduce, 2, Some("2.18.1")),
                (Kind::AllReduce, 2, Some("2.18.1")),
                (Kind::AllGather, 4, Some("2.21.5")),
                (Kind::AllGather, 4, Some("2.21.5")),
            ]
        );
        let zero = ImportOptions {
            ranks: Some(0),
            ..Default::default()
        };
        assert_eq!(parse_with(text, &zero).unwrap_err(), ParseError::ZeroRanks);
    }

    #[test]
    fn wrong_busbw_is_reported_with_its_line() {
        let text = "all_reduce_perf -g 8\n  1048576  262144  float  sum  -1  100.0  10.49  10.49  0  100.0  10.49  18.35  0\n";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        let w = parsed.warnings[0].to_string();
        assert!(
            w.starts_with("line 2: printed busbw 10.49 GB/s, but algbw x 1.7500 is 18.350"),
            "{w}"
        );
    }

    #[test]
    fn unreadable_rows_and_other_binaries_are_named() {
        let text = "sendrecv_perf -g 2\n  1024  256  complex  sum  -1  1.0  1.0  1.0  0  1.0  1.0  1.0  0\n  1024  256  float  sum  -1  5.00  0.20  0.20  0  5.00  0.20  0.20  0\n";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.records.len(), 2);
        assert_eq!(
            parsed.warnings[0].to_string(),
            "line 2: unreadable result row (type `complex` is not an nccl-tests type); skipped"
        );
        let err = parse("broadcast_perf -g 2\n  1024  256  float  none  0  5.00  0.20  0.20  0  5.00  0.20  0.20  0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "broadcast_perf is not one meshfit records; expected one of all_reduce_perf"
            ),
            "{err}"
        );
        assert_eq!(parse("nothing here\n").unwrap_err(), ParseError::NoTable);
    }

    /// Issue 31, item 4: a time of 1e-300 s or a size of 0 (a count of 0 elements) reached the
    /// fits as NaN curves.
    /// Each such placement is skipped by line, field, value and range, as the JSON readers
    /// refuse it; a log left with none says so.
    #[test]
    fn r31_4_rows_outside_the_physical_ranges_are_skipped_by_field_value_and_range() {
        let text = "sendrecv_perf -g 2\n  \
            512  0  float  sum  -1  5.00  0.10  0.10  0  5.00  0.10  0.10  0\n  \
            1024  256  float  sum  -1  5.00  0.20  0.20  0  5.00  0.20  0.20  0\n  \
            2048  512  float  sum  -1  1e-300  0.41  0.41  0  10.00  0.20  0.20  0\n  \
            4096  1024  float  sum  -1  20.00  0.20  0.20  0  1e300  0.00  0.00  0\n";
        let parsed = parse(text).unwrap();
        let kept: Vec<(u64, bool)> = parsed
            .records
            .iter()
            .map(|r| (r.bytes, r.in_place))
            .collect();
        assert_eq!(
            kept,
            vec![(1024, false), (1024, true), (2048, true), (4096, false)]
        );
        let lines = parsed.warning_lines();
        for expected in [
            "line 2: bytes 0: expected at least 1 byte; skipped",
            "line 4: time_s 1e-306: expected a time from 1e-7 s to 1e4 s; skipped",
            "line 5: time_s 1e294: expected a time from 1e-7 s to 1e4 s; skipped",
        ] {
            assert!(lines.iter().any(|l| l == expected), "{expected}: {lines:?}");
        }
        let err = parse("sendrecv_perf -g 2\n  1024  256  float  sum  -1  1e-300  0.20  0.20  0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2: time_s 1e-306: expected a time from 1e-7 s to 1e4 s"),
            "{err}"
        );
    }

    #[test]
    fn written_tables_read_back() {
        let group = Group {
            node: Some("sim-node".into()),
            gpus: vec![0, 1, 2, 3],
            scope: Scope::IntraNode,
            ranks: 4,
        };
        // Two GPUs on each of two hosts: the device list must carry the second host.
        let across = Group {
            gpus: vec![0, 1, 0, 1],
            scope: Scope::InterNode,
            ..group.clone()
        };
        let mut records = Vec::new();
        let points = [(8u64, 9.5e-6), (1 << 20, 2.1e-5), (1 << 30, 3.3e-3)];
        for (group, (bytes, time_s)) in [&group, &across]
            .into_iter()
            .flat_map(|g| points.into_iter().map(move |p| (g, p)))
        {
            for in_place in [false, true] {
                let timing = Timing::without_spread(time_s, Some(20), Clock::Model);
                let mut r = Record::transfer(
                    Kind::AllToAll,
                    Backend::Sim,
                    group.clone(),
                    bytes,
                    Dtype::Bf16,
                    timing,
                );
                r.in_place = in_place;
                records.push(r);
            }
        }
        let text = write(&records).unwrap();
        assert!(text.contains(
            "     1048576        131072  bfloat16    none      -1    21.00   49.93   37.45    N/A    21.00   49.93   37.45    N/A"
        ), "{text}");
        assert!(text.contains("on sim-node+1 device  1"), "{text}");
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.warnings, vec![], "{text}");
        assert_eq!(parsed.records.len(), records.len());
        for (back, orig) in parsed.records.iter().zip(&records) {
            assert_eq!(
                (
                    back.kind,
                    back.backend,
                    &back.group,
                    back.bytes,
                    back.in_place
                ),
                (
                    orig.kind,
                    orig.backend,
                    &orig.group,
                    orig.bytes,
                    orig.in_place
                )
            );
            assert_eq!(back.timing.clock, Clock::Model);
            assert!((back.timing.time_s - orig.timing.time_s).abs() / orig.timing.time_s < 1e-3);
        }
    }

    #[test]
    fn only_collectives_have_tables() {
        let group = Group {
            node: None,
            gpus: vec![0],
            scope: Scope::IntraNode,
            ranks: 1,
        };
        let timing = Timing::without_spread(1.0, None, Clock::Host);
        let r = Record::transfer(Kind::H2d, Backend::Cuda, group, 1, Dtype::Uint8, timing);
        assert_eq!(
            write(&[r]).unwrap_err().to_string().split(';').next(),
            Some("h2d records have no nccl-tests table")
        );
    }

    /// An all-reduce log of `rows` rows whose printed algbw (1 GB/s) is not size / time.
    fn algbw_off_log(rows: u64) -> String {
        let mut log = String::from(
            "./build/all_reduce_perf -b 1M -e 64M -g 2\n\
             #  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n\
             #  (B)  (elements)  (us)  (GB/s)  (GB/s)  (us)  (GB/s)  (GB/s)\n",
        );
        for i in 1..=rows {
            let size = i << 20;
            log += &format!(
                "{size} {} float sum -1 100.0 1.00 1.00 0 100.0 1.00 1.00 0\n",
                size / 4
            );
        }
        log
    }

    /// Issue 31, item 13: a log of many rows that disagree with the convention prints the
    /// first five of that kind, then counts the rest.
    #[test]
    fn repeated_warnings_are_counted_past_five() {
        // Each placement of each of the 12 rows warns of its algbw and of its busbw: 24 of
        // each kind, 5 shown.
        let parsed = parse(&algbw_off_log(12)).unwrap();
        assert_eq!(parsed.warnings.len(), 48);
        let lines = parsed.warning_lines();
        assert_eq!(lines.len(), 12, "{lines:?}");
        assert_eq!(
            lines[0],
            "line 4: printed algbw 1 GB/s, but size / time is 10.486 GB/s; recorded the latter"
        );
        assert!(lines[8].starts_with("line 6: printed algbw"), "{lines:?}");
        assert!(lines[10].starts_with("line 6: printed busbw"), "{lines:?}");
        for i in [9, 11] {
            assert_eq!(lines[i], "... and 19 more like it", "{lines:?}");
        }
    }
}
