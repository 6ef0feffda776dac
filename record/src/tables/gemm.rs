//! GEMM sweeps: one row per shape, `m, n, k, dtype`, optionally `layout` (tn, nn, nt) and
//! `batch` (GEMMs per timed call, as a batched GEMM times them), and a time per call or an
//! achieved FLOP rate.

use super::header::Name;
use super::{dtype, in_range, one_gpu, refuse, time_of, Table, TableError, MAX_DIM};
use crate::nccl_tests::ImportOptions;
use crate::{Backend, Clock, Gemm, GemmLayout, Record, Timing};

/// A transpose flag as BLAS letters: T (or 1, true) or N (0, false).
fn flag(row: &super::Row, table: &Table, i: usize) -> Result<char, TableError> {
    let choices: [(&[&str], char); 2] = [
        (&["t", "1", "true", "yes"], 't'),
        (&["n", "0", "false", "no"], 'n'),
    ];
    row.choice(table, i, &choices, "T or N")
}

/// Records of a GEMM sweep, one per row.
pub(crate) fn records(
    table: &Table,
    opts: &ImportOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<Record>, TableError> {
    let (m, n, k) = (
        table.need(Name::M, "m")?,
        table.need(Name::N, "n")?,
        table.need(Name::K, "k")?,
    );
    let type_col = table.need(Name::Type, "dtype")?;
    let layout_col = table.find(Name::Layout);
    let trans = table.find(Name::TransA).zip(table.find(Name::TransB));
    let batch_col = table.find(Name::Batch);
    if layout_col.is_none() && trans.is_none() {
        notes.push("no layout column: every shape is read as measured in all three layouts".into());
    }
    let mut records = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let shape = Gemm {
            m: row.count(table, m, MAX_DIM)?,
            n: row.count(table, n, MAX_DIM)?,
            k: row.count(table, k, MAX_DIM)?,
        };
        let batch = match batch_col {
            Some(b) => row.count(table, b, MAX_DIM)?,
            None => 1,
        };
        let layout =
            match (layout_col, trans) {
                (Some(l), _) => Some(row.cell(l).to_lowercase().parse::<GemmLayout>().map_err(
                    |e| refuse(row.line, format!("{e} (column `{}`)", table.columns[l].raw)),
                )?),
                (None, Some((a, b))) => {
                    let spelled = format!("{}{}", flag(row, table, a)?, flag(row, table, b)?);
                    Some(spelled.parse::<GemmLayout>().map_err(|e| {
                        refuse(row.line, format!("{e}: training runs tn, nn and nt"))
                    })?)
                }
                (None, None) => None,
            };
        let dtype = dtype(row, table, type_col)?;
        let call = time_of(table, row, shape.flop() * batch as f64, notes)?;
        let timing = Timing::without_spread(call / batch as f64, None, Clock::Imported);
        let mut r = Record::gemm(Backend::Cuda, one_gpu(opts), shape, dtype, timing);
        r.detail.layout = layout;
        records.push(in_range(r, row.line)?);
    }
    Ok(records)
}
