//! Full mesh search for llama3-405b on 16,384 H100 GPUs with every knob free.

use criterion::{criterion_group, criterion_main, Criterion};

use tuner::catalog::{self, NOMINAL};
use tuner::cost::Scenario;
use tuner::mesh::Training;
use tuner::search::{search, Constraints};

fn scenario() -> Scenario {
    let model = catalog::model("llama3-405b").unwrap().shape;
    let training = Training::megatron(
        model.seq_len,
        // 16M tokens, as Llama 3 405B trained in its main stage (arXiv 2407.21783 §3.4.1).
        2048,
    );
    Scenario::nominal(
        model,
        training,
        catalog::cluster("dgx-h100").unwrap(),
        16384,
        NOMINAL,
    )
}

fn bench(c: &mut Criterion) {
    let s = scenario();
    let r = search(&s, &Constraints::default(), 10);
    eprintln!(
        "405b on 16384 GPUs: {} meshes evaluated, {} fit",
        r.evaluated, r.fitting
    );
    c.bench_function("search llama3-405b 16384xH100", |b| {
        b.iter(|| search(&s, &Constraints::default(), 10))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
