//! CSV tables of measurements as clusters and papers publish them, read into [`Record`]s:
//!
//! - nccl-tests-shaped collective tables ([`collective`]): `size, count, type, ..., time,
//!   algbw, busbw` with the out-of-place group of time and bandwidth columns first and the
//!   in-place group after it, as vTrain's all-reduce lookup tables
//!   (`AR_GPU8_1M_1024M_LUT`: `size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)`);
//!   the rank count and the collective come from `--ranks` / `--collective`, a column, or the
//!   file name;
//! - GEMM sweeps ([`gemm`]): `m, n, k, dtype`, optionally `layout` and `batch`, and a time or
//!   an achieved FLOP rate;
//! - attention-kernel timings ([`attention`]): `batch, seq, heads, head_dim`, optionally
//!   `causal`, `pass` and `dtype`, and a time or a FLOP rate in FlashAttention's convention.
//!
//! The header names the columns, and every time, size and rate column its unit
//! ([`header`]); a unit the reader cannot read refuses the file. The GPU is named by a `gpu`
//! column or a `# gpu: NAME` comment line. Every refusal names the line and the reason.

mod attention;
mod collective;
mod gemm;
mod header;

use crate::nccl_tests::ImportOptions;
use crate::Record;
use header::{Column, Name};

/// What kind of table a header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// An nccl-tests-shaped collective table.
    Collective,
    /// A GEMM sweep.
    Gemm,
    /// Attention-kernel timings.
    Attention,
}

impl TableKind {
    /// How reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            TableKind::Collective => "nccl-tests-shaped CSV table",
            TableKind::Gemm => "GEMM sweep (CSV)",
            TableKind::Attention => "attention timings (CSV)",
        }
    }
}

/// Records read from a table and what the reader had to assume or skip.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// What the table was.
    pub kind: TableKind,
    /// One record per row (two for a collective row with in-place columns).
    pub records: Vec<Record>,
    /// Assumptions taken and rows skipped, each naming its line where it has one.
    pub notes: Vec<String>,
    /// The GPU model the table names, if it names one.
    pub gpu_model: Option<String>,
}

/// Why a table was refused: its 1-based line and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct TableError {
    /// Line of the file.
    pub line: usize,
    /// What is wrong and what is allowed.
    pub reason: String,
}

fn refuse(line: usize, reason: impl Into<String>) -> TableError {
    TableError {
        line,
        reason: reason.into(),
    }
}

/// `r`, read from the row on `line`, if it lies within the physical ranges every reader holds
/// records to ([`Record::validate`]); a time of 1e-300 s reached the fits as NaN curves
/// (issue 31, item 4).
pub(crate) fn in_range(r: Record, line: usize) -> Result<Record, TableError> {
    r.validate()
        .map(|()| r)
        .map_err(|e| refuse(line, e.to_string()))
}

/// A data row: its line and its cells.
pub(crate) struct Row {
    pub line: usize,
    pub cells: Vec<String>,
}

/// The header and the rows of a table.
pub(crate) struct Table {
    pub columns: Vec<Column>,
    pub header_line: usize,
    pub rows: Vec<Row>,
}

impl Table {
    /// Index of the first column holding `name`.
    pub fn find(&self, name: Name) -> Option<usize> {
        self.columns.iter().position(|c| c.name == Some(name))
    }

    /// Every column holding `name`, in order.
    pub fn all(&self, name: Name) -> Vec<usize> {
        (0..self.columns.len())
            .filter(|&i| self.columns[i].name == Some(name))
            .collect()
    }

    /// The column of `name`, or a refusal saying which columns the table needs.
    pub fn need(&self, name: Name, what: &str) -> Result<usize, TableError> {
        self.find(name).ok_or_else(|| {
            refuse(
                self.header_line,
                format!("no {what} column (the header has {})", self.spelled()),
            )
        })
    }

    /// The value of column `i`, which every row must hold alike (`what` names it: one table,
    /// one GPU model or one collective).
    pub fn same_in_every_row(&self, i: usize, what: &str) -> Result<&str, TableError> {
        let first = self.rows[0].cell(i);
        match self.rows.iter().find(|r| r.cell(i) != first) {
            Some(row) => Err(refuse(
                row.line,
                format!(
                    "`{}` where line {} says `{first}`: one table, one {what}",
                    row.cell(i),
                    self.rows[0].line
                ),
            )),
            None => Ok(first),
        }
    }

    /// The header as written, for messages.
    pub fn spelled(&self) -> String {
        self.columns
            .iter()
            .map(|c| c.raw.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The columns no reader uses, for a note.
    pub fn unknown(&self) -> Vec<&str> {
        self.columns
            .iter()
            .filter(|c| c.name.is_none() && !c.raw.is_empty())
            .map(|c| c.raw.as_str())
            .collect()
    }
}

impl Row {
    /// The cell at `i`, trimmed; empty where the row is short.
    pub fn cell(&self, i: usize) -> &str {
        self.cells.get(i).map_or("", |s| s.trim())
    }

    /// A finite number above zero at column `i` of `table`.
    pub fn positive(&self, table: &Table, i: usize) -> Result<f64, TableError> {
        let text = self.cell(i);
        match text.replace('_', "").parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(refuse(
                self.line,
                format!(
                    "column `{}` is `{text}`: expected a finite number above 0",
                    table.columns[i].raw
                ),
            )),
        }
    }

    /// The cell at `i` as one of `choices` (its spellings, lowercase, and its value), named
    /// `expected` in the refusal.
    pub fn choice<T: Copy>(
        &self,
        table: &Table,
        i: usize,
        choices: &[(&[&str], T)],
        expected: &str,
    ) -> Result<T, TableError> {
        let text = self.cell(i).to_lowercase();
        choices
            .iter()
            .find(|(spellings, _)| spellings.contains(&text.as_str()))
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                refuse(
                    self.line,
                    format!(
                        "column `{}` is `{text}`: expected {expected}",
                        table.columns[i].raw
                    ),
                )
            })
    }

    /// A whole number of at least 1 at column `i` of `table`, within `max`.
    pub fn count(&self, table: &Table, i: usize, max: u64) -> Result<u64, TableError> {
        let text = self.cell(i);
        match text.parse::<u64>() {
            Ok(v) if (1..=max).contains(&v) => Ok(v),
            _ => Err(refuse(
                self.line,
                format!(
                    "column `{}` is `{text}`: expected a whole number from 1 to {max}",
                    table.columns[i].raw
                ),
            )),
        }
    }
}

/// The largest GEMM dimension, attention shape entry or buffer a row may name: no GPU holds
/// a larger operand (2^40 elements is 2 TiB in 16 bits), and products of three of them stay
/// finite in f64 (2^120 against its 2^1024).
pub(crate) const MAX_DIM: u64 = 1 << 40;

/// Whether `text` opens with a CSV header this module reads: its first line that is neither
/// blank nor a `#` comment has at least two commas and names a table kind.
pub fn is_table(text: &str) -> bool {
    first_line(text).is_some_and(|(_, line)| {
        line.matches(',').count() >= 2
            && split_header(line)
                .map(|cols| kind_of(&cols).is_some())
                .unwrap_or(false)
    })
}

/// The kind of table `text`'s header describes, if it is one.
pub fn kind(text: &str) -> Option<TableKind> {
    let (_, line) = first_line(text)?;
    split_header(line).ok().as_deref().and_then(kind_of)
}

fn first_line(text: &str) -> Option<(usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .find(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// The header's columns, read for their names only: a unit the reader cannot read still
/// makes the file a table, which [`parse`] then refuses by line and reason.
fn split_header(line: &str) -> Result<Vec<Column>, String> {
    line.split(',')
        .map(|cell| {
            header::column(cell)
                .or_else(|_| header::column(cell.split(['(', '[']).next().unwrap_or(cell)))
        })
        .collect()
}

fn kind_of(columns: &[Column]) -> Option<TableKind> {
    let has = |n: Name| columns.iter().any(|c| c.name == Some(n));
    if has(Name::M) && has(Name::N) && has(Name::K) {
        Some(TableKind::Gemm)
    } else if has(Name::HeadDim) && has(Name::Seq) {
        Some(TableKind::Attention)
    } else if has(Name::Size) && has(Name::Time) {
        Some(TableKind::Collective)
    } else {
        None
    }
}

/// The GPU a `# gpu: NAME` (or `# gpu = NAME`) comment line names.
fn gpu_comment(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix('#')?.trim();
        let (key, value) = rest.split_once([':', '='])?;
        (key.trim().eq_ignore_ascii_case("gpu") && !value.trim().is_empty())
            .then(|| value.trim().to_string())
    })
}

fn read_table(text: &str) -> Result<Table, TableError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut header: Option<(usize, Vec<Column>)> = None;
    let mut rows = Vec::new();
    for result in reader.records() {
        let record = result.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            refuse(line, format!("not CSV: {e}"))
        })?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        if record.iter().all(str::is_empty) {
            continue;
        }
        if header.is_none() {
            let columns = record
                .iter()
                .map(header::column)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|reason| refuse(line, reason))?;
            header = Some((line, columns));
            continue;
        }
        rows.push(Row {
            line,
            cells: record.iter().map(str::to_string).collect(),
        });
    }
    let (header_line, columns) = header.ok_or_else(|| refuse(1, "no header line"))?;
    Ok(Table {
        columns,
        header_line,
        rows,
    })
}

/// Reads a CSV table; `file_name` (the last part of its path) may state the rank count and
/// the collective of a collective table, as vTrain's `AR_GPU8_1M_1024M_LUT` does.
pub fn parse(text: &str, file_name: &str, opts: &ImportOptions) -> Result<Parsed, TableError> {
    let table = read_table(text)?;
    let kind = kind_of(&table.columns).ok_or_else(|| {
        refuse(
            table.header_line,
            format!(
                "the header ({}) names no table this reader knows: a collective table needs \
                 size and time columns (nccl-tests' names), a GEMM sweep m, n, k and dtype, \
                 attention timings batch, seq, heads and head_dim, each with a time or a FLOP \
                 rate",
                table.spelled()
            ),
        )
    })?;
    if table.rows.is_empty() {
        return Err(refuse(table.header_line, "a header and no rows"));
    }
    refuse_repeated_columns(&table, kind)?;
    let mut gpu_model = gpu_comment(text);
    if let Some(i) = table.find(Name::Gpu) {
        let first = table.same_in_every_row(i, "GPU model")?.to_string();
        match &gpu_model {
            Some(g) if *g != first && !first.is_empty() => {
                return Err(refuse(
                    table.rows[0].line,
                    format!("GPU `{first}` where the file's `# gpu:` line says `{g}`"),
                ))
            }
            _ if !first.is_empty() => gpu_model = Some(first),
            _ => {}
        }
    }
    let mut notes = Vec::new();
    let unknown = table.unknown();
    if !unknown.is_empty() {
        notes.push(format!("columns not read: {}", unknown.join(", ")));
    }
    let mut records = match kind {
        TableKind::Collective => collective::records(&table, file_name, opts, &mut notes)?,
        TableKind::Gemm => gemm::records(&table, opts, &mut notes)?,
        TableKind::Attention => attention::records(&table, opts, &mut notes)?,
    };
    for r in &mut records {
        r.detail.gpu_model.clone_from(&gpu_model);
    }
    Ok(Parsed {
        kind,
        records,
        notes,
        gpu_model,
    })
}

/// Two columns that read as one quantity leave it unclear which to take (`m,m`,
/// `median_us,mean_us`): refused, but for the repeated time and bandwidth groups of a
/// collective table, one per placement.
fn refuse_repeated_columns(table: &Table, kind: TableKind) -> Result<(), TableError> {
    let grouped = |n: Name| {
        kind == TableKind::Collective
            && matches!(n, Name::Time | Name::Algbw | Name::Busbw | Name::Wrong)
    };
    for (i, c) in table.columns.iter().enumerate() {
        let Some(name) = c.name.filter(|n| *n != Name::Ignored && !grouped(*n)) else {
            continue;
        };
        if let Some(j) = (i + 1..table.columns.len()).find(|&j| table.columns[j].name == Some(name))
        {
            return Err(refuse(
                table.header_line,
                format!(
                    "columns `{}` and `{}` both read as the same quantity: keep one",
                    c.raw, table.columns[j].raw
                ),
            ));
        }
    }
    Ok(())
}

/// The time of one call in seconds, from a time column or a FLOP-rate column and the call's
/// FLOPs; where both are given, the time is kept and a rate more than 5% away is noted.
pub(crate) fn time_of(
    table: &Table,
    row: &Row,
    flop: f64,
    notes: &mut Vec<String>,
) -> Result<f64, TableError> {
    let time_col = table.find(Name::Time);
    let flops_col = table.find(Name::Flops);
    let unit = |i: usize, what: &str| {
        table.columns[i].unit.map(|u| u.factor).ok_or_else(|| {
            refuse(
                table.header_line,
                format!(
                    "column `{}` names no unit: write it as {what}",
                    table.columns[i].raw
                ),
            )
        })
    };
    match (time_col, flops_col) {
        (Some(t), f) => {
            let time =
                row.positive(table, t)? * unit(t, "time(s), time(ms), time(us) or time(ns)")?;
            if let Some(f) = f {
                let rate = row.positive(table, f)? * unit(f, "TFLOP/s or GFLOP/s")?;
                let implied = flop / time;
                if (rate / implied - 1.0).abs() > 0.05 {
                    notes.push(format!(
                        "line {}: {:.1} TFLOP/s printed, {:.1} from the time and the shape; the time is kept",
                        row.line,
                        rate / 1e12,
                        implied / 1e12
                    ));
                }
            }
            Ok(time)
        }
        (None, Some(f)) => {
            let rate = row.positive(table, f)? * unit(f, "TFLOP/s or GFLOP/s")?;
            Ok(flop / rate)
        }
        (None, None) => Err(refuse(
            table.header_line,
            format!(
                "no time or FLOP-rate column (the header has {})",
                table.spelled()
            ),
        )),
    }
}

/// A dtype cell, in record, nccl-tests or PyTorch spellings.
pub(crate) fn dtype(row: &Row, table: &Table, i: usize) -> Result<crate::Dtype, TableError> {
    use crate::Dtype;
    let text = row.cell(i).to_lowercase();
    let known = match text.trim_start_matches("torch.") {
        "bf16" | "bfloat16" => Some(Dtype::Bf16),
        "fp16" | "half" | "float16" | "f16" => Some(Dtype::Fp16),
        "fp32" | "float" | "float32" | "f32" => Some(Dtype::Fp32),
        "tf32" => Some(Dtype::Tf32),
        "fp64" | "double" | "float64" => Some(Dtype::Fp64),
        "fp8" | "e4m3" | "fp8_e4m3" | "f8e4m3" | "float8_e4m3fn" => Some(Dtype::Fp8E4m3),
        "e5m2" | "fp8_e5m2" | "f8e5m2" | "float8_e5m2" => Some(Dtype::Fp8E5m2),
        other => other.parse::<Dtype>().ok(),
    };
    known.ok_or_else(|| {
        refuse(
            row.line,
            format!(
                "column `{}` is `{}`: expected a type such as bf16, fp16, fp32, tf32 or fp8_e4m3",
                table.columns[i].raw,
                row.cell(i)
            ),
        )
    })
}

/// The group of a one-GPU kernel (GEMM, attention): on `opts.node` where given.
pub(crate) fn one_gpu(opts: &ImportOptions) -> crate::Group {
    crate::Group {
        node: opts.node.clone(),
        gpus: Vec::new(),
        scope: crate::Scope::IntraNode,
        ranks: 1,
    }
}

#[cfg(test)]
mod tests;
