//! What a measurement file is, told from its opening, and the error for one that is none of
//! the kinds the tuner reads.

use record::tables;

use crate::error::TunerError;

/// What a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A snapshot document.
    Snapshot,
    /// microbench `--json` records.
    JsonLines,
    /// An nccl-tests log.
    NcclTests,
    /// A CSV table ([`record::tables`]).
    Table,
}

/// Tells a file's kind from its opening: a snapshot names its `format_version` first (this
/// tuner writes it so), JSON lines open with a record, anything else is a log. Only the first
/// bytes are looked at: snapshots of a large fleet run to hundreds of megabytes.
pub fn kind_of(text: &str) -> FileKind {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        return if tables::is_table(text) {
            FileKind::Table
        } else {
            FileKind::NcclTests
        };
    }
    let head: String = trimmed.chars().take(256).collect();
    if head.contains("\"format_version\"") {
        FileKind::Snapshot
    } else {
        FileKind::JsonLines
    }
}

/// A file whose contents are none of the kinds read, or broken: `origin` and why.
pub(super) fn bad(origin: &str, e: impl std::fmt::Display) -> TunerError {
    TunerError::BadInput {
        field: origin.to_string(),
        value: "its contents".to_string(),
        allowed: format!(
            "a snapshot, microbench JSON lines, an nccl-tests log or a CSV table ({e})"
        ),
    }
}
