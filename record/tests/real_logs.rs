//! The nccl-tests parser over every real log in data/nccl-tests (issue 3; a copy of shared/data).
//!
//! The parser checks each row's printed algbw and busbw against size / time and the busbw
//! factor and warns on any disagreement; these tests assert that the real logs raise no such
//! warning, so the factors and rank counts are right, and pin the numbers each log holds.

use record::nccl_tests::{parse, parse_with, ImportOptions, Warning};
use record::{Backend, Clock, Kind, Record, Scope};
use std::path::PathBuf;

const LOGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/nccl-tests");

struct Expected {
    file_prefix: &'static str,
    opts: ImportOptions,
    kind: Kind,
    ranks: u32,
    scope: Scope,
    gpus: Vec<u32>,
    records: usize,
    /// bytes, time in us, algbw and busbw in GB/s of the first out-of-place row.
    first: (u64, f64, f64, f64),
    warnings: Vec<Warning>,
}

fn expectations() -> Vec<Expected> {
    vec![
        Expected {
            file_prefix: "nccl-tests-194_",
            opts: ImportOptions::default(),
            kind: Kind::AllReduce,
            ranks: 2,
            scope: Scope::IntraNode,
            gpus: vec![0, 1],
            records: 5,
            first: (1_073_741_824, 9306.7, 115.37, 115.37),
            warnings: vec![Warning::Truncated {
                line: 17,
                kept_out_of_place: true,
            }],
        },
        Expected {
            file_prefix: "nccl-tests-214_",
            opts: ImportOptions::default(),
            kind: Kind::SendRecv,
            ranks: 2,
            scope: Scope::InterNode,
            gpus: vec![0, 0],
            records: 10,
            first: (256, 34.24, 0.01, 0.01),
            warnings: vec![],
        },
        Expected {
            file_prefix: "nccl-tests-44_",
            // The excerpt lost its command line and device list.
            opts: ImportOptions {
                collective: Some(Kind::AllReduce),
                scope: Some(Scope::IntraNode),
                ..ImportOptions::default()
            },
            kind: Kind::AllReduce,
            ranks: 2,
            scope: Scope::IntraNode,
            gpus: vec![],
            records: 26,
            // Old nccl-tests printed size = count x 4 x ranks for all-reduce; the buffer is 16 KiB.
            first: (16_384, 13.39, 1.22, 1.22),
            warnings: vec![],
        },
        Expected {
            file_prefix: "nccl-tests-176_",
            // Six rows of a 128-GPU run, without the command or device list; every row's
            // `error` of 1e-06 is a float sum's rounding, not a wrong result.
            opts: ImportOptions {
                collective: Some(Kind::AllReduce),
                ranks: Some(128),
                scope: Some(Scope::InterNode),
                ..ImportOptions::default()
            },
            kind: Kind::AllReduce,
            ranks: 128,
            scope: Scope::InterNode,
            gpus: vec![],
            records: 12,
            first: (4096, 93.73, 0.04, 0.09),
            warnings: vec![],
        },
        Expected {
            file_prefix: "nccl-258_",
            // Deviations of 1e-07 and 3e-08 on 4 ranks, within nccl-tests' tolerance.
            opts: ImportOptions::default(),
            kind: Kind::AllReduce,
            ranks: 4,
            scope: Scope::IntraNode,
            gpus: vec![0, 1, 2, 3],
            records: 8,
            first: (8, 158.3, 0.0, 0.0),
            warnings: vec![],
        },
    ]
}

fn logs() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(LOGS)
        .unwrap_or_else(|e| panic!("reading {LOGS}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

fn name_of(path: &std::path::Path) -> String {
    path.file_name().unwrap().to_string_lossy().to_string()
}

fn expected_for(path: &std::path::Path) -> Expected {
    let name = name_of(path);
    expectations()
        .into_iter()
        .find(|e| name.starts_with(e.file_prefix))
        .unwrap_or_else(|| panic!("{name}: new log without expectations; add it to this test"))
}

fn assert_close(actual: f64, expected: f64, tolerance: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{what}: {actual} != {expected} (+- {tolerance})"
    );
}

/// Issue 37's V100 log is the nccl-tests bug its poster reported: its one row prints
/// `error 1e+00` in both placements and the footer `Out of bounds values : 2 FAILED`.
const FAILED_LOG: &str = "nccl-tests-37_";

#[test]
fn every_real_log_parses_with_consistent_numbers() {
    let files = logs();
    assert_eq!(files.len(), 6, "data/nccl-tests changed: {files:?}");
    for path in files.iter().filter(|p| !name_of(p).starts_with(FAILED_LOG)) {
        let text = std::fs::read_to_string(path).unwrap();
        let want = expected_for(path);
        let name = path.display();
        let parsed = parse_with(&text, &want.opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed.warnings, want.warnings, "{name}");
        assert_eq!(parsed.records.len(), want.records, "{name}");
        for r in &parsed.records {
            assert_eq!(
                (r.kind, r.group.ranks, r.group.scope),
                (want.kind, want.ranks, want.scope),
                "{name}"
            );
            assert_eq!(r.group.gpus, want.gpus, "{name}");
            assert_eq!(r.backend, Backend::Nccl);
            assert_eq!(r.timing.clock, Clock::NcclTests);
            // The physical ranges (issue 31, item 10) take every real measurement.
            r.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            let factor = record::busbw_factor(r.kind, r.group.ranks).unwrap();
            assert_close(
                r.busbw.unwrap(),
                r.algbw.unwrap() * factor,
                1e-6,
                "busbw = algbw x factor",
            );
        }
        let first = &parsed.records[0];
        let (bytes, time_us, algbw, busbw) = want.first;
        assert!(!first.in_place);
        assert_eq!(first.bytes, bytes, "{name}");
        assert_close(first.timing.time_s, time_us * 1e-6, 1e-12, "time");
        assert_close(first.algbw.unwrap() / 1e9, algbw, 0.005, "algbw");
        assert_close(first.busbw.unwrap() / 1e9, busbw, 0.005, "busbw");
    }
}

#[test]
fn logs_keep_their_context() {
    let text = std::fs::read_to_string(
        logs()
            .into_iter()
            .find(|p| name_of(p).starts_with("nccl-tests-214_"))
            .unwrap(),
    )
    .unwrap();
    let parsed = parse(&text).unwrap();
    let r: &Record = &parsed.records[1];
    assert_eq!(r.group.node.as_deref(), Some("gpu23"));
    assert_eq!(r.timing.iters, Some(20));
    assert!(r.in_place);
}

#[test]
fn a_log_without_its_command_line_asks_for_the_collective() {
    let path = logs()
        .into_iter()
        .find(|p| name_of(p).starts_with("nccl-tests-44_"))
        .unwrap();
    // Old layout: no redop or root column, and busbw = algbw fits a 2-rank all-reduce as
    // well as a send/recv of any size, so the columns cannot tell.
    let err = parse(&std::fs::read_to_string(path).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("table at line 3: the log does not name its collective"),
        "{err}"
    );
    assert!(err.ends_with("pass --collective"), "{err}");
}

/// Issue 13: rows nccl-tests marked failed do not import; when they are all there is, the
/// error says so.
#[test]
fn r13_the_failed_v100_log_is_refused_with_its_reason() {
    let path = logs()
        .into_iter()
        .find(|p| name_of(p).starts_with(FAILED_LOG))
        .unwrap();
    let err = parse(&std::fs::read_to_string(path).unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "none of the 1 result rows can be imported: table at line 6: nccl-tests marked 1 row(s) \
         wrong (#wrong or error column) on line(s) 6; dropped those results"
    );
}
