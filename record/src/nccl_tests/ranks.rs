//! What a table's own numbers say about its collective and rank count (issue 13).
//!
//! nccl-tests prints busbw = algbw x factor(kind, n), so the printed ratio fixes n for
//! all-reduce (2(n-1)/n) and for all-gather, reduce-scatter and all-to-all ((n-1)/n); each
//! printed figure carries half a unit of rounding, so a row gives an interval of n and the
//! rows of a table intersect theirs. The columns tell collectives apart: `redop` is `none`
//! only for all-gather and all-to-all, `root` is -1 for every unrooted collective, and
//! size / (count x type size) is n for all-gather, reduce-scatter and all-to-all and 1 for
//! all-reduce and send/recv.

use super::rows::{ratio_span, Layout, Row};
use crate::Kind;
use std::fmt;

/// An inclusive range of rank counts; `hi` is `u32::MAX` when unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Fewest ranks.
    pub lo: u32,
    /// Most ranks.
    pub hi: u32,
}

impl Span {
    const ANY: Span = Span {
        lo: 1,
        hi: u32::MAX,
    };

    /// Whether `n` ranks lie in the span.
    pub(super) fn contains(self, n: u32) -> bool {
        self.lo <= n && n <= self.hi
    }

    fn exact(n: u32) -> Span {
        Span { lo: n, hi: n }
    }

    fn meet(self, other: Span) -> Option<Span> {
        let s = Span {
            lo: self.lo.max(other.lo),
            hi: self.hi.min(other.hi),
        };
        (s.lo <= s.hi).then_some(s)
    }
}

/// Where a rank count comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// size / (count x type size) of all-gather, reduce-scatter and all-to-all rows.
    Count,
    /// The printed busbw / algbw.
    Ratio,
    /// An `mpirun`/`srun` line: processes (or nodes x per node) x `-g` x `-t`.
    Launch,
    /// One process driving `-g` x `-t` GPUs, with no launcher.
    OneProcess,
    /// The `Rank N ... device` lines, which an excerpt may cut short.
    Devices,
}

impl Source {
    /// Lines around the table, rather than its own numbers.
    pub(super) fn is_context(self) -> bool {
        matches!(self, Source::Launch | Source::OneProcess | Source::Devices)
    }
}

/// One source's say on the rank count.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Where it comes from.
    pub source: Source,
    /// The rank counts it allows.
    pub span: Span,
    /// For [`Source::Ratio`], the printed busbw / algbw of the row with the largest algbw.
    pub ratio: Option<f64>,
}

impl Evidence {
    pub(super) fn exact(source: Source, n: u32) -> Evidence {
        Evidence {
            source,
            span: Span::exact(n),
            ratio: None,
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Span { lo, hi } = self.span;
        match self.source {
            Source::Count => write!(f, "size / (count x type size) says {lo}"),
            Source::Launch => write!(f, "the launch line says {lo}"),
            Source::OneProcess => write!(f, "one process with -g/-t says {lo}"),
            Source::Devices => write!(f, "the device list shows {lo} (an excerpt may cut it)"),
            Source::Ratio => {
                write!(f, "the printed busbw/algbw")?;
                if let Some(r) = self.ratio {
                    write!(f, " ({r:.3})")?;
                }
                match (lo == hi, hi == u32::MAX) {
                    (true, _) => write!(f, " says {lo}"),
                    (false, true) => write!(f, " fits {lo} or more"),
                    (false, false) => write!(f, " fits {lo} to {hi}"),
                }
            }
        }
    }
}

/// The unique size / (count x type size) over the rows of the new layout, or of the old one
/// too where `old_too`, if any.
fn count_ratio(rows: &[Row], old_too: bool) -> Option<u64> {
    let mut ratio = None;
    for r in rows {
        let unit = r.count.checked_mul(r.dtype.size_bytes())?;
        if (r.layout != Layout::New && !old_too) || unit == 0 || r.size % unit != 0 {
            return None;
        }
        let m = r.size / unit;
        if ratio.is_some_and(|prev| prev != m) {
            return None;
        }
        ratio = Some(m);
    }
    ratio.filter(|m| *m >= 1)
}

/// The rank counts whose busbw factor for `kind` every printed row fits: `None` when the
/// rows say nothing (send/recv's factor is 1 for every n; bandwidths too small to read), or
/// `Some(None)` when no n fits all of them.
fn ratio_ranks(kind: Kind, rows: &[Row]) -> Option<Option<Span>> {
    // Old nccl-tests printed busbw in the algbw column of all-gather and reduce-scatter.
    let legacy = matches!(kind, Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll)
        && rows.iter().any(|r| r.layout == Layout::Old);
    if legacy {
        return None;
    }
    // factor(n) = top x (n-1)/n, so n = top / (top - factor).
    let top = match kind {
        Kind::AllReduce => 2.0,
        Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll => 1.0,
        Kind::SendRecv => {
            let fits = rows
                .iter()
                .flat_map(|r| &r.halves)
                .filter_map(ratio_span)
                .all(|(lo, hi)| lo <= 1.0 && 1.0 <= hi);
            return (!fits).then_some(None);
        }
        _ => return None,
    };
    let invert = |f: f64| top / (top - f);
    let mut span = Span::ANY;
    let mut informative = false;
    for (lo, hi) in rows.iter().flat_map(|r| &r.halves).filter_map(ratio_span) {
        if lo >= top {
            return Some(None);
        }
        let n_lo = if lo <= 0.0 { 1.0 } else { invert(lo) };
        let n_hi = if hi >= top {
            f64::from(u32::MAX)
        } else {
            invert(hi)
        };
        let row = Span {
            lo: (n_lo - 1e-9).ceil().clamp(1.0, f64::from(u32::MAX)) as u32,
            hi: (n_hi + 1e-9).floor().clamp(0.0, f64::from(u32::MAX)) as u32,
        };
        informative |= row != Span::ANY;
        match span.meet(row) {
            Some(s) => span = s,
            None => return Some(None),
        }
    }
    informative.then_some(Some(span))
}

/// The collectives whose column shape the rows have: `redop`, `root`, and size / count.
/// Tables of the old layout print neither `redop` nor `root`, and their size is not always
/// the per-rank buffer, so every collective fits them.
pub(super) fn structural_kinds(rows: &[Row]) -> Vec<Kind> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    if first.layout == Layout::Old {
        return Kind::COLLECTIVES.to_vec();
    }
    if first.root.is_some_and(|r| r >= 0) {
        // Broadcast and reduce name a root; meshfit records neither.
        return Vec::new();
    }
    let m = count_ratio(rows, false);
    Kind::COLLECTIVES
        .iter()
        .copied()
        .filter(|k| {
            let gathers = matches!(k, Kind::AllGather | Kind::AllToAll);
            let op_fits = match first.redop.as_deref() {
                Some("none") => gathers,
                Some(_) => !gathers,
                None => true,
            };
            let per_rank = matches!(k, Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll);
            op_fits && (per_rank || m.is_none_or(|m| m == 1))
        })
        .collect()
}

/// The collectives the columns and the printed busbw/algbw both allow, for a table that
/// names none.
pub(super) fn column_kinds(rows: &[Row]) -> Vec<Kind> {
    let m = count_ratio(rows, false).and_then(|m| u32::try_from(m).ok());
    structural_kinds(rows)
        .into_iter()
        .filter(|k| {
            let per_rank = matches!(k, Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll);
            match ratio_ranks(*k, rows) {
                None => true,
                Some(None) => false,
                Some(Some(span)) => !per_rank || m.is_none_or(|m| span.lo <= m && m <= span.hi),
            }
        })
        .collect()
}

/// The table's own say on n for `kind`, pushed onto `evidence`; returns the rank counts
/// that the count column and the ratio both allow (the count alone when they disagree,
/// since it is exact).
pub(super) fn table_evidence(
    kind: Kind,
    rows: &[Row],
    evidence: &mut Vec<Evidence>,
) -> Option<Span> {
    let per_rank = matches!(kind, Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll);
    // nccl-tests has printed an all-to-all's size as ranks x count x type size since it
    // gained one (2020), in the old layout too.
    let count = count_ratio(rows, kind == Kind::AllToAll)
        .filter(|_| per_rank)
        .and_then(|m| u32::try_from(m).ok())
        .map(Span::exact);
    if let Some(span) = count {
        evidence.push(Evidence {
            source: Source::Count,
            span,
            ratio: None,
        });
    }
    let ratio = ratio_ranks(kind, rows)
        .flatten()
        .filter(|s| *s != Span::ANY);
    if let Some(span) = ratio {
        let shown = rows
            .iter()
            .flat_map(|r| &r.halves)
            .max_by(|a, b| a.algbw_gbs.total_cmp(&b.algbw_gbs))
            .filter(|h| h.algbw_gbs > 0.0)
            .map(|h| h.busbw_gbs / h.algbw_gbs);
        evidence.push(Evidence {
            source: Source::Ratio,
            span,
            ratio: shown,
        });
    }
    match (count, ratio) {
        (Some(c), Some(r)) => Some(c.meet(r).unwrap_or(c)),
        (c, r) => c.or(r),
    }
}
