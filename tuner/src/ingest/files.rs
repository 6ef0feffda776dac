//! Measurement files: snapshots, microbench JSON lines and nccl-tests logs, told apart by their
//! content.

use record::{nccl_tests, read_json_lines, Record};

use super::snapshot::{Snapshot, Versioned, FORMAT_VERSION};
use super::Measurements;
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
}

/// Tells a file's kind from its first non-blank character and shape.
pub fn kind_of(text: &str) -> FileKind {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        let one_document = serde_json::from_str::<serde_json::Value>(trimmed)
            .is_ok_and(|v| v.get("format_version").is_some());
        if one_document {
            return FileKind::Snapshot;
        }
        return FileKind::JsonLines;
    }
    FileKind::NcclTests
}

/// Reads one file's text into `into`, naming it `origin` in notes and errors. A snapshot of an
/// unknown version is named and skipped, not trusted.
pub fn read(text: &str, origin: &str, into: &mut Measurements) -> Result<(), TunerError> {
    match kind_of(text) {
        FileKind::Snapshot => {
            let v: Versioned = serde_json::from_str(text).map_err(|e| bad(origin, e))?;
            if v.format_version > FORMAT_VERSION {
                into.notes.push(format!("{origin}: snapshot format version {} is newer than this tuner reads ({FORMAT_VERSION}); skipped", v.format_version));
                return Ok(());
            }
            let snap: Snapshot = serde_json::from_str(text).map_err(|e| bad(origin, e))?;
            for node in snap.nodes {
                for gpu in &node.gpus {
                    into.gpu_models.insert(node.name.clone(), gpu.model.clone());
                }
                into.records.extend(node.records.into_iter().map(|mut r| {
                    r.group.node.get_or_insert_with(|| node.name.clone());
                    r
                }));
            }
            into.sources
                .push(format!("{origin} (snapshot of {})", snap.source));
        }
        FileKind::JsonLines => {
            let recs = read_json_lines(text).map_err(|e| bad(origin, e))?;
            into.sources
                .push(format!("{origin} ({} records)", recs.len()));
            into.records.extend(recs);
        }
        FileKind::NcclTests => {
            let parsed = nccl_tests::parse(text).map_err(|e| bad(origin, e))?;
            for w in &parsed.warnings {
                into.notes.push(format!("{origin}: {w}"));
            }
            into.sources.push(format!(
                "{origin} (nccl-tests log, {} records)",
                parsed.records.len()
            ));
            into.records.extend(parsed.records);
        }
    }
    Ok(())
}

fn bad(origin: &str, e: impl std::fmt::Display) -> TunerError {
    TunerError::BadInput {
        field: origin.to_string(),
        value: "its contents".to_string(),
        allowed: format!("a snapshot, microbench JSON lines or an nccl-tests log ({e})"),
    }
}

/// Records of one kind of file, for tests.
pub fn records_of(text: &str) -> Result<Vec<Record>, TunerError> {
    let mut m = Measurements::default();
    read(text, "text", &mut m)?;
    Ok(m.records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_kinds_apart() {
        assert_eq!(
            kind_of("{\"format_version\": 1, \"nodes\": []}"),
            FileKind::Snapshot
        );
        assert_eq!(
            kind_of("{\"kind\":\"gemm\"}\n{\"kind\":\"gemm\"}\n"),
            FileKind::JsonLines
        );
        assert_eq!(kind_of("# nThread 1 nGpus 8\n"), FileKind::NcclTests);
    }

    #[test]
    fn newer_snapshot_is_named_and_skipped() {
        let mut m = Measurements::default();
        read(
            "{\"format_version\": 99, \"nodes\": []}",
            "future.json",
            &mut m,
        )
        .unwrap();
        assert!(m.records.is_empty());
        assert!(
            m.notes[0].contains("future.json") && m.notes[0].contains("99"),
            "{:?}",
            m.notes
        );
    }
}
