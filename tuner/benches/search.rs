//! Full mesh searches with every knob free: llama3-405b on 16,384 H100, and DeepSeek-V3 on
//! 2,048 H800 at DeepSeek's batch (the bound: 50 ms and 200 ms).

use criterion::{criterion_group, criterion_main, Criterion};

use tuner::catalog::{self, NOMINAL};
use tuner::cost::Scenario;
use tuner::mesh::Training;
use tuner::search::{search, Constraints};

/// DeepSeek-V3 at its late-training batch of 15,360 sequences of 4,096 tokens (arXiv
/// 2412.19437 §4.2), on DeepSeek's 2,048 H800.
fn deepseek() -> Scenario {
    let model = catalog::model("deepseek-v3").unwrap().shape;
    let training = Training::megatron(model.seq_len, 15360);
    Scenario::nominal(
        model,
        training,
        catalog::cluster("hgx-h800").unwrap(),
        2048,
        NOMINAL,
    )
}

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
    let d = deepseek();
    let r = search(&d, &Constraints::default(), 10);
    eprintln!(
        "deepseek-v3 on 2048 GPUs: {} meshes evaluated, {} fit",
        r.evaluated, r.fitting
    );
    c.bench_function("search deepseek-v3 2048xH800", |b| {
        b.iter(|| search(&d, &Constraints::default(), 10))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
