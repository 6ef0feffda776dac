//! Attention-kernel timings: one row per shape, `batch, seq, heads, head_dim`, optionally
//! `causal` (default true: training's decoder mask), `pass` (fwd, bwd, fwd_bwd; default fwd)
//! and `dtype` (default bf16), and a time per call or a FLOP rate in FlashAttention's
//! convention ([`crate::AttentionShape::flop`]).

use super::header::Name;
use super::{dtype, in_range, one_gpu, time_of, Row, Table, TableError, MAX_DIM};
use crate::nccl_tests::ImportOptions;
use crate::{AttentionPass, AttentionShape, Backend, Clock, Dtype, Record, Timing};

fn causal(row: &Row, table: &Table, i: usize) -> Result<bool, TableError> {
    let choices: [(&[&str], bool); 2] = [
        (&["true", "1", "yes", "causal"], true),
        (&["false", "0", "no", "full"], false),
    ];
    row.choice(table, i, &choices, "true or false")
}

fn pass(row: &Row, table: &Table, i: usize) -> Result<AttentionPass, TableError> {
    let choices: [(&[&str], AttentionPass); 3] = [
        (&["fwd", "forward"], AttentionPass::Fwd),
        (&["bwd", "backward"], AttentionPass::Bwd),
        (
            &["fwd_bwd", "fwd+bwd", "fwdbwd", "forward+backward"],
            AttentionPass::FwdBwd,
        ),
    ];
    row.choice(table, i, &choices, "fwd, bwd or fwd_bwd")
}

/// Records of an attention table, one per row.
pub(crate) fn records(
    table: &Table,
    opts: &ImportOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<Record>, TableError> {
    let batch = table.need(Name::Batch, "batch")?;
    let seq = table.need(Name::Seq, "seq")?;
    let heads = table.need(Name::Heads, "heads")?;
    let head_dim = table.need(Name::HeadDim, "head_dim")?;
    let (causal_col, pass_col, type_col) = (
        table.find(Name::Causal),
        table.find(Name::Pass),
        table.find(Name::Type),
    );
    if causal_col.is_none() {
        notes
            .push("no causal column: every row is read as causal, as decoder training runs".into());
    }
    if pass_col.is_none() {
        notes.push("no pass column: every row is read as a forward pass".into());
    }
    if type_col.is_none() {
        notes.push("no dtype column: every row is read as bf16".into());
    }
    if table.find(Name::Flops).is_some() {
        notes.push(
            "FLOP rates are read in FlashAttention's convention: 4 b s^2 h d a forward, halved \
             when causal, the backward 2.5x"
                .into(),
        );
    }
    let mut records = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let shape = AttentionShape {
            batch: row.count(table, batch, MAX_DIM)?,
            seq: row.count(table, seq, MAX_DIM)?,
            heads: row.count(table, heads, MAX_DIM)?,
            head_dim: row.count(table, head_dim, MAX_DIM)?,
            causal: causal_col.map_or(Ok(true), |i| causal(row, table, i))?,
            pass: pass_col.map_or(Ok(AttentionPass::Fwd), |i| pass(row, table, i))?,
        };
        let dtype = type_col.map_or(Ok(Dtype::Bf16), |i| dtype(row, table, i))?;
        let time = time_of(table, row, shape.flop(), notes)?;
        let timing = Timing::without_spread(time, None, Clock::Imported);
        let r = Record::attention(Backend::Cuda, one_gpu(opts), shape, dtype, timing);
        records.push(in_range(r, row.line)?);
    }
    Ok(records)
}
