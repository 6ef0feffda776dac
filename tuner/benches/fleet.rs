//! Fitting and ranking from a snapshot of 1,000 nodes x 8 GPUs (issue 5 target: under 2 s on
//! one core and under 300 MB). Each node carries the agent's export: five collectives at three
//! group sizes and twelve message sizes, twelve GEMM shapes per GPU and an HBM copy per GPU.

use criterion::{criterion_group, criterion_main, Criterion};
use record::{Backend, Clock, Dtype, Gemm, Group, Kind, Record, Scope, Timing};

use tuner::catalog::{self, NOMINAL};
use tuner::cost::Scenario;
use tuner::fit::{fit_all, FitOptions};
use tuner::ingest::snapshot::{Node, Snapshot, TimeRange};
use tuner::ingest::{files, Measurements};
use tuner::mesh::Training;
use tuner::search::{search, Constraints};

const NODES: u32 = 1000;

fn timing(t: f64) -> Timing {
    Timing::without_spread(t, Some(20), Clock::CudaEvent)
}

fn node(i: u32) -> Node {
    let name = format!("node-{i:04}");
    // A deterministic wobble of a few percent per node, and one slow node in a hundred.
    let wobble =
        1.0 + 0.03 * ((i * 7919 % 13) as f64 / 13.0) - if i % 100 == 42 { 0.3 } else { 0.0 };
    let mut records = Vec::new();
    for kind in Kind::COLLECTIVES {
        for ranks in [2u32, 4, 8] {
            let busbw = 360e9 * wobble;
            let factor = record::busbw_factor(kind, ranks).unwrap();
            for p in 0..12 {
                let bytes = 1024u64 << (2 * p);
                let t = 12e-6 + bytes as f64 * factor / busbw;
                let group = Group {
                    node: Some(name.clone()),
                    gpus: (0..ranks).collect(),
                    scope: Scope::IntraNode,
                    ranks,
                };
                records.push(Record::transfer(
                    kind,
                    Backend::Nccl,
                    group,
                    bytes,
                    Dtype::Bf16,
                    timing(t),
                ));
            }
        }
    }
    for gpu in 0..8u32 {
        for (m, n, k) in [
            (8192, 8192, 8192),
            (16384, 16384, 16384),
            (4096, 4096, 4096),
            (8192, 28672, 8192),
            (8192, 8192, 28672),
            (8192, 10240, 8192),
            (8192, 8192, 1024),
            (8192, 1024, 8192),
            (8192, 3584, 8192),
            (8192, 8192, 3584),
            (16384, 8192, 8192),
            (8192, 57344, 8192),
        ] {
            let shape = Gemm { m, n, k };
            let eff =
                0.82 * wobble / ((1.0 + 100.0 / (n.min(k) as f64)) * (1.0 + 100.0 / m as f64));
            let group = Group {
                node: Some(name.clone()),
                gpus: vec![gpu],
                scope: Scope::IntraNode,
                ranks: 1,
            };
            records.push(Record::gemm(
                Backend::Nccl,
                group,
                shape,
                Dtype::Bf16,
                timing(shape.flop() / (989.4e12 * eff)),
            ));
        }
        let group = Group {
            node: Some(name.clone()),
            gpus: vec![gpu],
            scope: Scope::IntraNode,
            ranks: 1,
        };
        records.push(Record::transfer(
            Kind::HbmCopy,
            Backend::Nccl,
            group,
            1 << 30,
            Dtype::Bf16,
            timing(2.0 * (1u64 << 30) as f64 / 2.9e12),
        ));
    }
    Node {
        name,
        gpus: Vec::new(),
        links: Vec::new(),
        records,
    }
}

fn snapshot_text() -> String {
    let range = TimeRange {
        start: 0.0,
        end: 0.0,
    };
    let snap = Snapshot::per_node("bench".into(), 0.0, range, (0..NODES).map(node).collect());
    serde_json::to_string(&snap).unwrap()
}

/// Read, fit and rank: what `tuner recommend --measurements snap.json` does.
fn pipeline(text: &str) -> f64 {
    let mut m = Measurements::default();
    files::read(text, "snap.json", &mut m).unwrap();
    let cluster = catalog::cluster("dgx-h100").unwrap();
    let fits = fit_all(&m.records, cluster.gpu.bf16_flops, &FitOptions::default());
    let model = catalog::model("llama3-70b").unwrap().shape;
    let training = Training::megatron(8192, 2048);
    // A 4,096-GPU job placed on the fleet: 8,000 GPUs split no layout of a 2,048-sequence batch.
    let s = Scenario::measured(model, training, cluster, 4096, NOMINAL, &fits);
    search(&s, &Constraints::default(), 10).ranked[0].step_time_s
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn bench(c: &mut Criterion) {
    let text = snapshot_text();
    eprintln!(
        "snapshot: {} nodes, {:.1} MB of JSON",
        NODES,
        text.len() as f64 / 1e6
    );
    // FLEET_SNAPSHOT=path keeps the file, to measure `tuner recommend --measurements path`.
    if let Ok(path) = std::env::var("FLEET_SNAPSHOT") {
        std::fs::write(&path, &text).expect("writing FLEET_SNAPSHOT");
    }
    // Reset the peak so that it counts the pipeline (and the text it reads), not the
    // generation of the snapshot above (proc(5): /proc/pid/clear_refs).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let start = std::time::Instant::now();
    let step = pipeline(&text);
    eprintln!(
        "one pass: {:.2} s, best step {step:.3} s, peak RSS {:.0} MiB (snapshot text included)",
        start.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
    let mut g = c.benchmark_group("fleet");
    g.sample_size(10);
    g.bench_function("read+fit+rank 1000 nodes x 8 GPUs", |b| {
        b.iter(|| pipeline(&text))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
