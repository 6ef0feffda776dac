//! Pricing from measurements at the sizes a cluster brings: `validate` of 1,000 runs with a
//! 1,000-record measurement file (each run priced nominal and from the file), and `calibrate`
//! on 100 jobs (the fit, each knob's curvature and 100 leave-one-job-out refits).

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

use record::{
    nccl_tests::ImportOptions, Backend, Clock, Dtype, Gemm, GemmLayout, Group, Record, Scope,
    Timing,
};
use tuner::calibrate;
use tuner::catalog::NOMINAL;
use tuner::validate::{self, measured::Serving, RunsFile};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data");

/// vTrain's 720 runs, repeated under new ids up to `n`.
fn runs(n: usize) -> RunsFile {
    let text = std::fs::read_to_string(format!("{DATA}/vtrain-runs.yaml")).unwrap();
    let mut file = validate::parse_runs(&text, "vtrain-runs.yaml").unwrap();
    let mut copy = 0;
    while file.runs.len() < n {
        let more = validate::parse_runs(&text, "vtrain-runs.yaml")
            .unwrap()
            .runs;
        for mut r in more.into_iter().take(n - file.runs.len()) {
            r.id = format!("{}-copy{copy}", r.id);
            file.runs.push(r);
        }
        copy += 1;
    }
    file.runs.truncate(n);
    file
}

/// 1,000 records of an A100 node: a 512-shape forward GEMM grid (m, n, k in 256 to 32,768)
/// and 488 all-reduce points of vTrain's 2-, 4- and 8-GPU lookup tables.
fn measurements(dir: &std::path::Path) -> PathBuf {
    let model = "NVIDIA A100-SXM4-80GB".to_string();
    let mut records = Vec::new();
    let dims = [256u64, 512, 1024, 2048, 4096, 8192, 16384, 32768];
    for m in dims {
        for n in dims {
            for k in dims {
                let shape = Gemm { m, n, k };
                let group = Group {
                    node: Some("a100-0".into()),
                    gpus: vec![0],
                    scope: Scope::IntraNode,
                    ranks: 1,
                };
                let t = shape.flop() / 250e12 + 5e-6;
                let timing = Timing::without_spread(t, None, Clock::Imported);
                let mut r = Record::gemm(Backend::Cuda, group, shape, Dtype::Bf16, timing);
                r.detail.layout = Some(GemmLayout::Tn);
                records.push(r);
            }
        }
    }
    'tables: for ranks in [2, 4, 8] {
        let name = format!("AR_GPU{ranks}_1M_1024M_LUT");
        let text = std::fs::read_to_string(format!("{DATA}/vtrain-luts/a100/{name}")).unwrap();
        let parsed = record::tables::parse(&text, &name, &ImportOptions::default()).unwrap();
        for r in parsed
            .records
            .into_iter()
            .filter(|r| !r.in_place)
            .step_by(6)
        {
            if records.len() == 1000 {
                break 'tables;
            }
            records.push(r);
        }
    }
    assert_eq!(records.len(), 1000);
    let mut text = String::new();
    for mut r in records {
        r.detail.gpu_model = Some(model.clone());
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
    }
    let path = dir.join("a100-node.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let file = measurements(dir.path());
    let files = [runs(1000)];
    let mut group = c.benchmark_group("measured");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("validate 1000 runs, 1000-record measurements", |b| {
        b.iter(|| {
            let mut serving = Serving::load(&files, std::slice::from_ref(&file), None).unwrap();
            let v = validate::validate_measured(&files, &NOMINAL, &mut serving);
            assert_eq!(v.measured.unwrap().runs, 1000);
        })
    });
    let jobs_file = [runs(100)];
    group.bench_function("calibrate 100 jobs", |b| {
        b.iter(|| {
            let (jobs, skipped) = calibrate::jobs(&jobs_file, &NOMINAL, None);
            calibrate::calibrate(&jobs, skipped, &NOMINAL)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
