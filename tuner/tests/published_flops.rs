//! The FLOP formulas against the figures the papers derived from them
//! (data/published-runs.yaml, `observed.tflops_per_gpu`).

use tuner::model::{korthikanti_eq7_flops, narayanan_eq3_flops};
use tuner::validate::parse_runs;

fn runs() -> tuner::validate::RunsFile {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/published-runs.yaml");
    let text = std::fs::read_to_string(path).expect("data/published-runs.yaml in the repository");
    parse_runs(&text, path).expect("runs file parses")
}

/// TFLOP/s per GPU that a FLOP count implies for a run.
fn implied(run: &tuner::validate::Run, flops: fn(f64, f64, f64, f64, f64) -> f64) -> f64 {
    let m = &run.model;
    let f = flops(
        f64::from(run.layout.global_batch_size),
        f64::from(m.seq_len),
        f64::from(m.layers),
        f64::from(m.hidden),
        f64::from(m.vocab),
    );
    f / run.observed.iteration_time_s / f64::from(run.cluster.gpus) / 1e12
}

/// Every run whose `tflops_kind` matches `kind` reproduces its published TFLOP/s per GPU with
/// `flops` within 1.5% (the tables round TFLOP/s to integers and times to 2-4 digits).
fn reproduces(kind: &str, flops: fn(f64, f64, f64, f64, f64) -> f64) -> usize {
    let file = runs();
    let matching = file.runs.iter().filter(|r| {
        r.observed
            .tflops_kind
            .as_deref()
            .is_some_and(|k| k.contains(kind))
    });
    let mut checked = 0;
    for run in matching {
        let published = run.observed.tflops_per_gpu.unwrap();
        let got = implied(run, flops);
        assert!(
            (got / published - 1.0).abs() < 0.015,
            "{}: {kind} gives {got:.1}, paper {published}",
            run.id
        );
        checked += 1;
    }
    checked
}

#[test]
fn narayanan_eq3_reproduces_table1_tflops() {
    assert_eq!(reproduces("Eq. 3", narayanan_eq3_flops), 10);
}

#[test]
fn korthikanti_eq7_reproduces_table_tflops() {
    assert_eq!(reproduces("Eq. 7", korthikanti_eq7_flops), 8);
}
