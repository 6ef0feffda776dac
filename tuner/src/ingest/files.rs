//! Measurement files: snapshots, microbench JSON lines, nccl-tests logs and CSV tables
//! (nccl-tests-shaped lookup tables, GEMM sweeps, attention timings), told apart by their
//! content; a directory stands for the files in it.

use std::path::Path;

use record::{nccl_tests, read_json_lines, tables, Record};

pub use super::file_kind::{kind_of, FileKind};

use super::file_kind::bad;
use super::snapshot_stream;
use super::Measurements;
use crate::error::TunerError;

/// Reads one file's text into `into`, naming it `origin` in notes and errors. A snapshot of an
/// unknown version is named and skipped, not trusted.
pub fn read(text: &str, origin: &str, into: &mut Measurements) -> Result<(), TunerError> {
    match kind_of(text) {
        FileKind::Snapshot => {
            let mut de = serde_json::Deserializer::from_str(text);
            snapshot_stream::read(&mut de, origin, into)?;
        }
        FileKind::JsonLines => {
            let recs = read_json_lines(text).map_err(|e| bad(origin, e))?;
            into.sources
                .push(format!("{origin} ({} records)", recs.len()));
            into.records.extend(recs);
        }
        FileKind::NcclTests => {
            crate::input::within(text, origin, crate::input::LOG)?;
            let parsed = nccl_tests::parse(text).map_err(|e| bad(origin, e))?;
            for w in parsed.warning_lines() {
                into.notes.push(format!("{origin}: {w}"));
            }
            into.sources.push(format!(
                "{origin} (nccl-tests log, {} records)",
                parsed.records.len()
            ));
            into.records.extend(parsed.records);
        }
        FileKind::Table => {
            crate::input::within(text, origin, crate::input::LOG)?;
            let name = Path::new(origin)
                .file_name()
                .map_or(origin.to_string(), |n| n.to_string_lossy().into_owned());
            let parsed = tables::parse(text, &name, &nccl_tests::ImportOptions::default())
                .map_err(|e| {
                    let kind = tables::kind(text).unwrap_or(tables::TableKind::Collective);
                    let hint = if kind == tables::TableKind::Collective {
                        " (where the file name does not state the rank count or the \
                         collective, `microbench import FILE --ranks N --collective C --json` \
                         writes records that state them)"
                    } else {
                        ""
                    };
                    TunerError::BadInput {
                        field: origin.to_string(),
                        value: format!("{e}"),
                        allowed: format!("a {} the tuner reads{hint}", kind.describe()),
                    }
                })?;
            for n in &parsed.notes {
                into.notes.push(format!("{origin}: {n}"));
            }
            into.sources.push(format!(
                "{origin} ({}, {} records{})",
                parsed.kind.describe(),
                parsed.records.len(),
                parsed
                    .gpu_model
                    .as_ref()
                    .map_or(String::new(), |g| format!(", {g}"))
            ));
            into.records.extend(parsed.records);
        }
    }
    Ok(())
}

/// Reads the file at `path`, or every regular file in the directory at `path` (in name order,
/// leaving out names that start with `.`), each through the measurements file bound.
pub fn read_path(path: &Path, into: &mut Measurements) -> Result<(), TunerError> {
    if path.is_dir() {
        let io = |e: std::io::Error| TunerError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(TunerError::Io {
                path: path.display().to_string(),
                message: "a directory with no measurement files in it".into(),
            });
        }
        for file in files {
            read_one(&file, into)?;
        }
        return Ok(());
    }
    read_one(path, into)
}

fn read_one(path: &Path, into: &mut Measurements) -> Result<(), TunerError> {
    let origin = path.display().to_string();
    if let Some(reader) = snapshot_stream::open(path)? {
        // A snapshot is parsed as it is read: what it holds, not the file's size, bounds it.
        return snapshot_stream::read(
            &mut serde_json::Deserializer::from_reader(reader),
            &origin,
            into,
        );
    }
    let text = crate::input::read_text(path, crate::input::MEASUREMENTS)?;
    read(&text, &origin, into)
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
    fn a_snapshot_record_on_zero_ranks_refuses_the_file_by_name() {
        let record = "{\"kind\":\"all_reduce\",\"backend\":\"nccl\",\"node\":\"n1\",\"gpus\":[0,1],\"scope\":\"intra_node\",\"ranks\":0,\"bytes\":1048576,\"dtype\":\"bf16\",\"time_s\":0.001,\"time_min_s\":null,\"time_max_s\":null,\"iters\":20,\"clock\":\"cuda_event\",\"algbw\":null,\"busbw\":null,\"flops\":null,\"timestamp\":null}";
        let snap = format!(
            "{{\"format_version\": 1, \"created\": 0, \"source\": \"t\", \"time_range\": {{\"start\": 0, \"end\": 0}}, \"nodes\": [{{\"name\": \"n1\", \"gpus\": [], \"records\": [{record}]}}]}}"
        );
        let err = read(&snap, "snap.json", &mut Measurements::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("snap.json")
                && err.contains("node n1 record 1: ranks 0: expected 1 to 1048576 ranks"),
            "{err}"
        );
    }

    #[test]
    fn r31_a_snapshot_of_format_version_0_is_refused() {
        let snap = "{\"format_version\": 0, \"created\": 0, \"source\": \"t\", \"time_range\": {\"start\": 0, \"end\": 0}, \"nodes\": []}";
        let err = read(snap, "snap.json", &mut Measurements::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("format_version 0: expected 1 to 2"), "{err}");
    }

    /// Issue 31, item 13: a 234 MB log took 4.1 GB and printed two million notes. A log is
    /// held to the bound microbench import reads it through, and its notes are summarized.
    #[test]
    fn r31_13_a_log_past_the_log_bound_is_refused_by_name() {
        let huge = format!("# nThread 1 nGpus 2\n{}", " ".repeat(64 << 20));
        let err = read(&huge, "huge.log", &mut Measurements::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "reading huge.log: larger than 64 MiB, the most the tuner reads of an nccl-tests \
             log or CSV table (as microbench import)"
        );
    }

    #[test]
    fn r31_13_repeated_log_warnings_are_counted() {
        // 20 rows whose printed algbw and busbw (1 GB/s) are not size / time: 40 warnings of
        // each kind, both placements of each row.
        let rows: String = (1..=20u64)
            .map(|i| {
                format!(
                    "{} {} float sum -1 100.0 1.00 1.00 0 100.0 1.00 1.00 0\n",
                    i << 20,
                    i << 18
                )
            })
            .collect();
        let log = format!(
            "./build/all_reduce_perf -g 2\n# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n{rows}"
        );
        let mut m = Measurements::default();
        read(&log, "off.log", &mut m).unwrap();
        assert_eq!(m.records.len(), 40);
        assert_eq!(m.notes.len(), 12, "{:?}", m.notes);
        assert_eq!(m.notes[9], "off.log: ... and 35 more like it");
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
