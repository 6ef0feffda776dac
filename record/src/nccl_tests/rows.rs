//! The result rows of an nccl-tests table as printed: their column layout, each placement's
//! figures with the rounding they carry, and what nccl-tests marked wrong.

use super::convention;
use super::Warning;
use crate::Dtype;

/// Column layouts: `New` (nccl-tests 2.13 on) has `redop` and `root` after `type` and counts
/// wrong elements in `#wrong`; `Old` has no `root`, a `redop` only where the collective
/// reduces (and all-to-all), and prints `error`, the largest deviation from the expected
/// values, instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    Old,
    New,
}

/// What a placement's last column says about its result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Check {
    /// `N/A`: not checked (no `-c`, or in-place all-to-all).
    Unchecked,
    /// `#wrong`: whether any element was wrong.
    Counted { wrong: bool },
    /// `error`: the largest deviation, which nccl-tests judges against its tolerance for the
    /// type and rank count (see [`Check::exceeds`]).
    Deviation(f64),
}

impl Check {
    /// Whether an `error` column is past nccl-tests' own bound: `DeltaMaxValue(type) x
    /// (ranks - 1)` (src/common.cu before 2.13: half and bfloat16 1e-2, float 1e-5, double
    /// 1e-12, integers exact), since every rank's rounding adds to a reduction's.
    pub(super) fn exceeds(self, dtype: Dtype, ranks: u32) -> bool {
        let Check::Deviation(v) = self else {
            return false;
        };
        let per_rank = match dtype {
            Dtype::Fp16 | Dtype::Bf16 => 1e-2,
            Dtype::Fp32 | Dtype::Tf32 => 1e-5,
            Dtype::Fp64 => 1e-12,
            _ => 0.0,
        };
        v > per_rank * f64::from(ranks.saturating_sub(1))
    }
}

/// Columns per placement: time, algbw, busbw, #wrong.
pub(super) const GROUP: usize = 4;

/// One placement (out-of-place or in-place) of a row, as printed.
#[derive(Debug, Clone)]
pub(super) struct Half {
    pub(super) in_place: bool,
    pub(super) time_us: f64,
    /// Half a unit in the last printed digit of the time: the rounding it carries.
    pub(super) time_rounding_us: f64,
    pub(super) algbw_gbs: f64,
    pub(super) busbw_gbs: f64,
    /// Half a unit in the last printed digit of algbw and busbw (nccl-tests prints `%6.2f`).
    pub(super) bw_rounding_gbs: f64,
    /// What nccl-tests found of this placement's result.
    pub(super) check: Check,
}

#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) line: usize,
    pub(super) layout: Layout,
    pub(super) size: u64,
    pub(super) count: u64,
    pub(super) dtype: Dtype,
    /// `redop` and `root` of the new layout.
    pub(super) redop: Option<String>,
    pub(super) root: Option<i64>,
    pub(super) halves: Vec<Half>,
}

impl Row {
    /// Rows of one table share their columns' shape and grow in size; a row that does not
    /// starts the next table of a paste that lost the lines between them.
    pub(super) fn continues(&self, prev: &Row) -> bool {
        self.layout == prev.layout
            && self.dtype == prev.dtype
            && self.redop == prev.redop
            && self.root == prev.root
            && self.size > prev.size
    }
}

/// Takes out the placements nccl-tests counted wrong elements in; returns the rest and the
/// lines of the rows that lost a placement. An `error` column needs the rank count: the
/// caller judges it once the table's is known.
pub(super) fn drop_failed(rows: Vec<Row>) -> (Vec<Row>, Vec<usize>) {
    let mut lines = Vec::new();
    let kept = rows
        .into_iter()
        .filter_map(|mut row| {
            let before = row.halves.len();
            row.halves
                .retain(|h| h.check != Check::Counted { wrong: true });
            if row.halves.len() < before {
                lines.push(row.line);
            }
            (!row.halves.is_empty()).then_some(row)
        })
        .collect();
    (kept, lines)
}

/// Reads a data row. Returns the row (if any half survived) and a truncation warning.
pub(super) fn read_row(
    line: usize,
    tokens: &[&str],
) -> Result<(Option<Row>, Option<Warning>), String> {
    let size = tokens[0]
        .parse::<u64>()
        .map_err(|e| format!("size `{}`: {e}", tokens[0]))?;
    let count = tokens[1]
        .parse::<u64>()
        .map_err(|e| format!("count `{}`: {e}", tokens[1]))?;
    let dtype = convention::dtype(tokens[2])
        .ok_or_else(|| format!("type `{}` is not an nccl-tests type", tokens[2]))?;
    // `time` fourth: old, without a redop. After a redop, `error` eighth (printed `%5.0le`,
    // where the new layout prints busbw `%6.2f`) or `time` fifth, not an integer root: old.
    let deviation = |t: &&str| t.contains('e') && t.parse::<f64>().is_ok();
    let layout = match tokens.get(3) {
        Some(t) if t.parse::<f64>().is_ok() => Layout::Old,
        Some(_)
            if tokens.get(7).is_some_and(deviation)
                || tokens
                    .get(4)
                    .is_some_and(|t| t.parse::<i64>().is_err() && t.parse::<f64>().is_ok()) =>
        {
            Layout::Old
        }
        Some(_) => Layout::New,
        None => {
            return Ok((
                None,
                Some(Warning::Truncated {
                    line,
                    kept_out_of_place: false,
                }),
            ))
        }
    };
    let has_redop = tokens[3].parse::<f64>().is_err();
    let (redop, root) = match layout {
        Layout::Old if has_redop => (Some(tokens[3].to_string()), None),
        Layout::Old => (None, None),
        Layout::New => {
            let root = match tokens.get(4) {
                Some(t) => Some(
                    t.parse::<i64>()
                        .map_err(|_| format!("root `{t}` is not an integer"))?,
                ),
                None => None,
            };
            (Some(tokens[3].to_string()), root)
        }
    };
    // Columns before the out-of-place group.
    let prefix = 3 + usize::from(redop.is_some()) + usize::from(root.is_some());
    if tokens.len() > prefix + 2 * GROUP {
        return Err(format!(
            "{} columns, more than nccl-tests prints ({})",
            tokens.len(),
            prefix + 2 * GROUP
        ));
    }
    let mut halves = Vec::new();
    let mut cut = false;
    for (n, in_place) in [false, true].into_iter().enumerate() {
        let start = prefix + n * GROUP;
        match tokens.get(start..start + GROUP) {
            // microbench prints `N/A` for a placement it did not time.
            Some(cols) if cols[..3].iter().all(|c| *c == "N/A") => {}
            Some(cols) => halves.push(read_half(cols, in_place, layout)?),
            None => cut = true,
        }
    }
    let truncated = cut.then_some(Warning::Truncated {
        line,
        kept_out_of_place: !halves.is_empty(),
    });
    let row = (!halves.is_empty()).then_some(Row {
        line,
        layout,
        size,
        count,
        dtype,
        redop,
        root,
        halves,
    });
    Ok((row, truncated))
}

/// Reads time, algbw, busbw and #wrong. A time or bandwidth that is not a finite number
/// (nccl-tests prints `inf` when a timer reads 0) makes the row unreadable rather than a
/// record with no time (issue 13).
fn read_half(cols: &[&str], in_place: bool, layout: Layout) -> Result<Half, String> {
    let placement = if in_place { "in-place" } else { "out-of-place" };
    let num = |name: &str, t: &str| match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{placement} {name} `{t}`: expected a finite number of 0 or more"
        )),
    };
    let rounding = |t: &str| {
        let decimals = t.split_once('.').map_or(0, |(_, frac)| frac.len());
        0.5 * 10f64.powi(-i32::try_from(decimals).unwrap_or(0))
    };
    let time_us = num("time", cols[0])?;
    if time_us == 0.0 {
        return Err(format!(
            "{placement} time `{}`: expected a time above 0 us",
            cols[0]
        ));
    }
    Ok(Half {
        in_place,
        time_us,
        time_rounding_us: rounding(cols[0]),
        algbw_gbs: num("algbw", cols[1])?,
        busbw_gbs: num("busbw", cols[2])?,
        bw_rounding_gbs: rounding(cols[1]).max(rounding(cols[2])),
        check: check(cols[3], layout)
            .ok_or_else(|| format!("{placement} #wrong `{}` is not a number", cols[3]))?,
    })
}

/// Reads nccl-tests' last column of a placement.
fn check(col: &str, layout: Layout) -> Option<Check> {
    if col == "N/A" {
        return Some(Check::Unchecked);
    }
    let v = col.parse::<f64>().ok().filter(|v| !v.is_nan())?;
    Some(match layout {
        Layout::New => Check::Counted { wrong: v != 0.0 },
        Layout::Old => Check::Deviation(v),
    })
}

/// The printed busbw/algbw of a half as an interval: the printed figures carry half a unit
/// of rounding each.
pub(super) fn ratio_span(half: &Half) -> Option<(f64, f64)> {
    let e = half.bw_rounding_gbs;
    let (a, b) = (half.algbw_gbs, half.busbw_gbs);
    if a - e <= 0.0 {
        return None;
    }
    Some((((b - e) / (a + e)).max(0.0), (b + e) / (a - e)))
}
