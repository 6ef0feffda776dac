//! Any measurement file that `microbench import` and the tuner read as text: an nccl-tests log
//! or a CSV table ([`crate::tables`]), told apart by the first line that is not a comment.

use crate::nccl_tests::{self, ImportOptions};
use crate::{tables, Record};

/// What a file turned out to hold, with its records and what to tell the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The records read.
    pub records: Vec<Record>,
    /// What the reader assumed or skipped, each naming its line where it has one.
    pub notes: Vec<String>,
    /// The GPU model the file names, if it names one.
    pub gpu_model: Option<String>,
    /// What the file was, for reports ("nccl-tests log", "GEMM sweep (CSV)").
    pub what: &'static str,
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    /// An nccl-tests log the parser refused.
    #[error(transparent)]
    Log(#[from] nccl_tests::ParseError),
    /// A CSV table the reader refused.
    #[error(transparent)]
    Table(#[from] tables::TableError),
}

/// Reads `text`, named `file_name` (the last part of its path, which may state a table's rank
/// count and collective), as a CSV table when it opens with a header [`tables`] reads and as an
/// nccl-tests log otherwise.
pub fn import(text: &str, file_name: &str, opts: &ImportOptions) -> Result<Imported, ImportError> {
    if tables::is_table(text) {
        let parsed = tables::parse(text, file_name, opts)?;
        return Ok(Imported {
            records: parsed.records,
            notes: parsed.notes,
            gpu_model: parsed.gpu_model,
            what: parsed.kind.describe(),
        });
    }
    let parsed = nccl_tests::parse_with(text, opts)?;
    Ok(Imported {
        gpu_model: parsed
            .records
            .iter()
            .find_map(|r| r.detail.gpu_model.clone()),
        notes: parsed.warning_lines(),
        records: parsed.records,
        what: "nccl-tests log",
    })
}
