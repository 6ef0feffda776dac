//! Published runs kept out of `validate --fit` (tests/data/), so they check the model rather
//! than steer it:
//! - Narayanan et al. 2021, Table 2: ZeRO-3 without model parallelism against PTD-P at 384 to
//!   2,240 A100s. ZeRO-3 ran at 44-48 TFLOP/s per GPU at the largest scale against PTD-P's
//!   141-159: a practitioner's rule that the model has to reproduce.
//! - NeMo 24.07's and Megatron-Bridge's DGX-H100 fp8 tables: Megatron-Core on the 700 W, HBM3
//!   H100 that the torchtitan runs in data/ do not use.
//! - Megatron-Core r0.8's strong scaling of its 177B GPT from 96 to 4,608 H100s at one batch:
//!   MFU falls from 47% to 42%.
//! - llm-foundry's H100 and A100 40GB tables: the framework of data/'s A100 80GB MPT rows on
//!   the next GPU generation (8 to 512 GPUs, 512 to 65,536 tokens) and on half the memory.

use tuner::catalog::NOMINAL;
use tuner::validate::{parse_runs, validate, Choice, RunPrediction, Validation};

fn load(name: &str) -> Validation {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("tests/data holds the runs");
    let v = validate(&[parse_runs(&text, name).unwrap()], &NOMINAL);
    assert!(v.skipped.is_empty(), "{:?}", v.skipped);
    v
}

fn table2() -> Validation {
    load("narayanan2021-table2.yaml")
}

fn run<'a>(v: &'a Validation, id: &str) -> &'a RunPrediction {
    v.runs.iter().find(|r| r.id == id).unwrap()
}

#[test]
fn three_d_beats_zero3_at_scale_by_what_was_measured() {
    let v = table2();
    for (size, gpus) in [("175B", 1536), ("530B", 2240)] {
        let zero3 = run(&v, &format!("narayanan2021-t2-zero3-{size}-{gpus}"));
        let ptdp = run(&v, &format!("narayanan2021-t2-ptdp-{size}-{gpus}"));
        let measured = zero3.observed_iteration_time_s / ptdp.observed_iteration_time_s;
        let predicted = zero3.predicted_iteration_time_s / ptdp.predicted_iteration_time_s;
        // Measured 3.2x and 3.3x; the model says 2.09x and 1.89x. Before DeepSpeed's
        // per-tensor fetch was priced, it had ZeRO-3 ahead (0.74x and 0.82x).
        assert!(
            predicted >= 1.85 && predicted <= measured * 1.1,
            "{size} on {gpus}: ZeRO-3 / PTD-P predicted {predicted:.2}, measured {measured:.2}"
        );
    }
}

#[test]
fn zero3_runs_within_a_half_and_ranked() {
    // -16% to -44% too fast, the larger models and GPU counts the more: before, -37% to -77%.
    let v = table2();
    for r in v.runs.iter().filter(|r| r.id.contains("zero3")) {
        assert!(r.error.abs() <= 0.46, "{}: {:+.3}", r.id, r.error);
    }
    assert!(
        v.summary.runs == 12 && v.summary.by_file[0].median_abs_error <= 0.15,
        "{:.3}",
        v.summary.by_file[0].median_abs_error
    );
    for g in &v.summary.groups {
        let rho = g.spearman.expect("every group's layouts differ");
        assert!(rho >= 0.85, "{}: Spearman {rho:.2}", g.name);
    }
}

/// Asserts that the `runs` runs of a file each miss by at most `each` and by `median` at the
/// median, and returns them.
fn within(name: &str, runs: usize, each: f64, median: f64) -> Validation {
    let v = load(name);
    for r in &v.runs {
        assert!(r.error.abs() <= each, "{}: {:+.3}", r.id, r.error);
    }
    let b = &v.summary.by_file[0];
    assert_eq!(b.runs, runs);
    assert!(b.median_abs_error <= median, "{:.3}", b.median_abs_error);
    v
}

/// Asserts that the model beats one MFU fitted to the file itself by at least `factor`: the
/// groups there are one model over GPU counts and sequence lengths, which a FLOP count alone
/// ranks, so ranking them is no test.
fn beats_the_file_s_own_mfu(v: &Validation, factor: f64) {
    let b = &v.summary.by_file[0];
    assert!(
        b.median_abs_error * factor <= b.baseline_median_abs_error,
        "{:.3} against {:.3}",
        b.median_abs_error,
        b.baseline_median_abs_error
    );
}

#[test]
fn megatron_core_fp8_on_h100_within_a_seventh() {
    // Before Transformer Engine's fp8 activations were kept at a byte, the 70B and 405B
    // layouts did not fit without recomputation in the model, which chose full recomputation
    // and came out 17-23% too slow. With the output layer in bf16, as Megatron-Core runs it
    // (a `ColumnParallelLinear` outside Transformer Engine), the 8B row goes from +10.5% to
    // +13.0% and the 70B rows from +4.6% to +9.7%: their 128k-logit head sits on the last of
    // 8 stages (the recipe does not account for it in the split) and paces the pipeline.
    within("megatron-bridge-h100-fp8.yaml", 5, 0.135, 0.10);
}

#[test]
fn nemo_fp8_on_h100_within_three_tenths() {
    // GPT-3 5B to 175B, Llama 2 and 3, Nemotron-4 340B, on 8 to 512 GPUs: -6% to +26%. The
    // +26% is Nemotron-4 340B under full recomputation, the only layout the model fits; its
    // recipe ran selective recomputation with bf16 gradients and Adam states, which the runs
    // format cannot state (+15% while full recomputation was priced at 0.60 of a forward,
    // +21% before its 256k-logit output layer was priced in bf16, as Megatron-Core runs it).
    within("nemo-24.07-h100-fp8.yaml", 10, 0.27, 0.07);
}

#[test]
fn llm_foundry_on_h100_within_a_quarter_and_beating_its_own_mfu() {
    // MPT 760M to 70B under Composer's FSDP on 8 to 512 H100, bf16 and fp8 (77 rows). First
    // scored at 6.7%, 9.3% too fast on average and 23% at 64k tokens, while Hopper's
    // FlashAttention-1-generation kernel sat at an uncited 0.25 of peak; 2.6% with the figure
    // derived from the FlashAttention-2 paper's H100 and A100 measurements (0.1718). MPT-30B
    // at 8k tokens on 8 GPUs is the outlier here as on A100: -24%. One MFU fitted to the file
    // scores 5.5%.
    let v = within("llm-foundry-h100.yaml", 77, 0.25, 0.04);
    beats_the_file_s_own_mfu(&v, 2.0);
}

#[test]
fn llm_foundry_on_a100_40gb_within_a_quarter_and_beating_its_own_mfu() {
    // The A100 40GB table beside the 80 GB one in data/, scored blind the day it was
    // transcribed: 2.8%, -0.3% mean, where one MFU fitted to the file scores 5.7%. ZeRO-3 near
    // the 40 GB limit runs slower than priced (70B on 64 GPUs -24%, 13B on 8 GPUs -13% to
    // -15%).
    let v = within("llm-foundry-a100-40gb.yaml", 78, 0.25, 0.04);
    beats_the_file_s_own_mfu(&v, 2.0);
    // Every row ran in 40 GiB. With the logits held as eager PyTorch holds them (10 bytes)
    // where llm-foundry runs flash-attn's fused loss (4), 46 of the 78 came out over it; now
    // 8, none by more than 1.2 GiB (MPT trains without dropout, whose masks the activation
    // count keeps).
    let gib = |r: &RunPrediction| r.memory_per_gpu_bytes / f64::from(1u32 << 30);
    assert!(v.runs.iter().all(|r| gib(r) <= 41.25));
    assert!(v.runs.iter().filter(|r| gib(r) > 40.0).count() <= 8);
}

#[test]
fn strong_scaling_on_h100_loses_throughput_per_gpu() {
    // Measured, per-GPU throughput on 4,608 GPUs is 0.89x that on 96 (MFU 47% -> 42%). The
    // model loses far more, 0.64x: at 96 GPUs it is 17% too fast, at 4,608 16% too slow.
    // With DP 2 the 96-GPU run has almost no bubble, so its miss is the per-microbatch
    // compute; at 4,608 only 12 microbatches fill 6 stages, and the model prices the
    // unpublished virtual stages at Megatron's default of none (interleaving at 4 stages
    // per rank brings it to +3.5%, and the 96-GPU run to -15%).
    let v = load("megatron-core-r0.8-strong-scaling.yaml");
    let small = run(&v, "megatron2024-h100-ss-177B-96gpu");
    let large = run(&v, "megatron2024-h100-ss-177B-4608gpu");
    // Per-GPU throughput at one batch is the inverse of GPU-seconds per step.
    let gpu_s = |r: &RunPrediction, t: f64| t * f64::from(r.gpus);
    let measured = gpu_s(small, small.observed_iteration_time_s)
        / gpu_s(large, large.observed_iteration_time_s);
    let predicted = gpu_s(small, small.predicted_iteration_time_s)
        / gpu_s(large, large.predicted_iteration_time_s);
    assert!((measured - 0.894).abs() < 0.005, "{measured:.3}");
    assert!(
        predicted > 0.6 && predicted < 1.0,
        "per-GPU throughput on 4,608 against 96 GPUs: predicted {predicted:.3}, measured {measured:.3}"
    );
    for r in &v.runs {
        assert!(r.error.abs() <= 0.18, "{}: {:+.3}", r.id, r.error);
    }
}

#[test]
fn moe_on_h100_is_priced_with_the_recipe_s_dispatcher_and_balance() {
    // Qwen3-30B-A3B on 16 H100: EP 16 over two nodes, and PP 2 x VP 12 with EP 8 inside a node.
    // Priced as an NCCL all-to-all with the 1.25 capacity-factor imbalance, the EP 16 row was
    // 72% too slow (39 s of exchange in a 29 s step). The recipe forces balanced routing and
    // sends each token once per node (HybridEP): 34% too fast. The EP 8 row was 9% too fast
    // while each local expert cost two launches (host-bound); as the grouped GEMM the recipe
    // runs, 39%, and the two rows rank as measured (EP 8 the faster). With the dispatcher's
    // permutation copies and each expert's half-empty last row block: 30% and 35%. With fp8's
    // k-loop overhead as DeepGEMM measured it (hidden 2048 and experts 768 wide make short
    // k-loops): 26% and 31%; with the output layer and router in bf16, 25% and 30%. The PP 2
    // row's recipe (Megatron-Bridge v0.3.0 scripts/performance, moe_a2a_overlap) ran
    // Megatron-Core's combined 1F1B, which hides its all-to-alls: 43% too fast. Transformer
    // Engine's GroupedLinear issues one cuBLAS GEMM per local expert over four streams, each a
    // launch the host pays for, though their tiles share the SMs as a grouped GEMM's do: the
    // PP 2 row's 16 local experts make its passes host-bound again, 31%; the EP 16 row's 8
    // leave its passes, all-to-alls included, GPU-bound. With Qwen3's per-head query and key
    // norms (two more memory-bound kernels a layer): 24.5% and 28.1%.
    let v = load("megatron-bridge-h100-moe.yaml");
    let ep16 = run(&v, "mbridge-26.04.01-h100-qwen3-30b-a3b-16gpu-ep16-fp8");
    assert_eq!(ep16.choices[&Choice::MoeDispatch], "node-dedup");
    assert!(ep16.choices[&Choice::ExpertGemms].starts_with("per-expert"));
    assert!(ep16.choices[&Choice::MoeBalance].starts_with("forced"));
    assert!((-0.27..=-0.22).contains(&ep16.error), "{:+.3}", ep16.error);
    let ep8 = run(
        &v,
        "mbridge-26.02.01-h100-qwen3-30b-a3b-16gpu-pp2-vp12-ep8-fp8",
    );
    let a2a = &ep8.breakdown.ep_all_to_all;
    assert!(a2a.exposed_s < 0.25 * a2a.time_s, "{a2a:?}");
    assert!(
        ep8.breakdown.launch.exposed_s > 2.0,
        "{:?}",
        ep8.breakdown.launch
    );
    assert_eq!(ep16.breakdown.launch.exposed_s, 0.0);
    assert!((-0.31..=-0.25).contains(&ep8.error), "{:+.3}", ep8.error);
    assert!(ep8.predicted_iteration_time_s < ep16.predicted_iteration_time_s);
    assert!(ep8.observed_iteration_time_s < ep16.observed_iteration_time_s);
}

#[test]
fn a_runs_file_that_leaves_the_qwen3_norms_out_gets_them_from_the_catalog() {
    // The Qwen3-30B-A3B rows without `model.qk_norm`: their dimensions are the catalog's
    // qwen3-30b-a3b, whose heads are normalised, so they price as with the field, and
    // `choices` says why. A dense run of no catalog model's dimensions keeps none.
    let name = "megatron-bridge-h100-moe.yaml";
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let unsaid = text.replace("qk_norm: true, ", "");
    assert_ne!(unsaid, text);
    let v = validate(&[parse_runs(&unsaid, name).unwrap()], &NOMINAL);
    let stated = load(name);
    for (a, b) in v.runs.iter().zip(&stated.runs) {
        assert_eq!(a.predicted_iteration_time_s, b.predicted_iteration_time_s);
        assert_eq!(
            a.choices[&Choice::QkNorm],
            "true (the norms of qwen3-30b-a3b, whose dimensions the run's model has)"
        );
        assert!(!b.choices.contains_key(&Choice::QkNorm));
    }
    let other = unsaid.replace("hidden: 2048", "hidden: 2304");
    let v = validate(&[parse_runs(&other, name).unwrap()], &NOMINAL);
    assert!(v
        .runs
        .iter()
        .all(|r| !r.choices.contains_key(&Choice::QkNorm)));
}

#[test]
fn a_runs_file_names_combined_1f1b_and_it_hides_the_exchange() {
    // The EP 16 row as if its recipe had also set --overlap-moe-expert-parallel-comm: 1 of
    // its 64 microbatches' all-to-alls stays exposed, the rest runs beside the paired
    // microbatch's compute at 20 of 132 SMs.
    let name = "megatron-bridge-h100-moe.yaml";
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let ep16 = "mbridge-26.04.01-h100-qwen3-30b-a3b-16gpu-ep16-fp8";
    let combined = text.replacen("schedule: null", "schedule: combined-1f1b", 1);
    let v = validate(&[parse_runs(&combined, name).unwrap()], &NOMINAL);
    let plain = load(name);
    let (c, p) = (run(&v, ep16), run(&plain, ep16));
    let (ca, pa) = (&c.breakdown.ep_all_to_all, &p.breakdown.ep_all_to_all);
    assert_eq!(ca.time_s, pa.time_s);
    assert_eq!(pa.exposed_s, pa.time_s);
    assert!(
        ca.exposed_s < pa.time_s / 64.0 + 0.16 * pa.time_s,
        "{ca:?} {pa:?}"
    );
    assert!(c.predicted_iteration_time_s < p.predicted_iteration_time_s);
}

#[test]
fn deepseek_v3_prices_as_deepseek_laid_it_out() {
    // DeepSeek-V3 on 2,048 H800 (ISCA '25): 61 layers on 16 DualPipe stages, EP 64 over 8
    // nodes, block-scaled fp8, MLA, the MTP module. Refused before (61 layers split no
    // 16-stage pipeline); priced now with the edge stages taking what 14 inner stages of 4
    // leave. 10% too fast on both networks while the 23 of 120 chunks that DualPipe's first
    // and last ranks run alone hid their all-to-alls; within 1% since they wait for them
    // (docs/misses.md).
    let v = load("deepseek-v3-isca25.yaml");
    assert_eq!(v.runs.len(), 2);
    for r in &v.runs {
        assert!(
            (-0.03..=0.03).contains(&r.error),
            "{}: {:+.3}",
            r.id,
            r.error
        );
        assert_eq!(r.choices[&Choice::MoeDispatch], "node-dedup");
        assert!(r.choices[&Choice::ExpertGemms].contains("DeepGEMM"));
        assert_eq!(r.precision.to_string(), "fp8-blockwise");
    }
}
