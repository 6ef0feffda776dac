//! Accuracy against the real runs in data/ (published A100 papers, H100/H200 runs, vTrain's
//! small-model sweep) with the catalog efficiencies. These guard what the model reaches today;
//! `docs/validation.md` gives the figures and `docs/misses.md` what still misses.

use std::sync::OnceLock;

use tuner::catalog::NOMINAL;
use tuner::validate::{parse_runs, validate, Bucket, Choice, RunPrediction, RunsFile, Validation};

fn read(name: &str) -> RunsFile {
    let path = format!("{}/../data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("data/ holds the runs files");
    parse_runs(&text, name).unwrap()
}

fn validation() -> &'static Validation {
    static V: OnceLock<Validation> = OnceLock::new();
    V.get_or_init(|| {
        let files = [
            read("published-runs.yaml"),
            read("more-runs.yaml"),
            read("vtrain-runs.yaml"),
        ];
        validate(&files, &NOMINAL)
    })
}

/// One priced run by id.
fn run(id: &str) -> &'static RunPrediction {
    validation()
        .runs
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("{id}"))
}

fn file(name: &str) -> &'static Bucket {
    validation()
        .summary
        .by_file
        .iter()
        .find(|b| b.name == name)
        .unwrap()
}

#[test]
fn every_run_is_priced() {
    let v = validation();
    assert!(v.skipped.is_empty(), "{:?}", v.skipped);
    assert_eq!(v.summary.runs, 80 + 45 + 720);
}

#[test]
fn published_a100_runs_within_4_percent() {
    let b = file("published-runs.yaml");
    assert!(b.median_abs_error <= 0.04, "{:.3}", b.median_abs_error);
    assert!(
        b.mean_signed_error.abs() <= 0.04,
        "{:+.3}",
        b.mean_signed_error
    );
}

#[test]
fn vtrain_small_models_within_7_percent_and_unbiased() {
    // vTrain's 720 launch-bound runs were 18.4% off (all too fast) before the host-bound
    // layer passes; 6.3% before the refit that followed torchtitan's 500 W parts, 7.3% after
    // it, 5.5% since the backward pass issues its kernels at its own (fitted) host rate.
    let b = file("vtrain-runs.yaml");
    assert!(b.median_abs_error <= 0.07, "{:.3}", b.median_abs_error);
    assert!(
        b.mean_signed_error.abs() <= 0.05,
        "{:+.3}",
        b.mean_signed_error
    );
}

#[test]
fn hopper_runs_within_6_percent() {
    // 18.5% before; 8.2% while torchtitan's 96 GB HBM2e, 500 W H100s were priced as the
    // 700 W SXM part their runs' `cluster.gpu` names, and their torch.compile as eager; 4.3%
    // after, 4.5% since the backward got its own host rate.
    let b = file("more-runs.yaml");
    assert!(b.median_abs_error <= 0.06, "{:.3}", b.median_abs_error);
    let megatron = validation()
        .summary
        .groups
        .iter()
        .find(|g| g.name == "megatron-core-r0.8-h100-weak-scaling")
        .unwrap();
    // 7.4% with FlashAttention-2 at 0.36 of the H100 peak; 8.2% since the cited 0.33 and the
    // global refit that follows it; 3.3% with the refit after the 500 W parts.
    assert!(
        megatron.median_abs_error <= 0.09,
        "{:.3}",
        megatron.median_abs_error
    );
}

#[test]
fn beats_the_constant_mfu_baseline_on_every_file() {
    // By far: 4.3% against 17.2% on the Hopper file, where it was 8.2% against 19.0% while
    // torchtitan's 500 W parts were priced at 700 W.
    for b in &validation().summary.by_file {
        assert!(
            b.median_abs_error < 0.5 * b.baseline_median_abs_error,
            "{}: {:.3} vs baseline {:.3}",
            b.name,
            b.median_abs_error,
            b.baseline_median_abs_error
        );
    }
}

#[test]
fn ranks_layouts_inside_groups() {
    // Every group of four or more runs that differ in layout, scale or recipe. The two
    // torchtitan float8 async-TP groups rank by async TP (the copies DTensor's vanilla TP
    // makes) and by scaling (rowwise keeps 46% of tensorwise's saving, and gathers in bf16);
    // before those were priced the model tied them.
    let groups: Vec<_> = validation()
        .summary
        .groups
        .iter()
        .filter(|g| g.runs >= 4)
        .collect();
    for g in &groups {
        // The lowest today: MPT-760M at 0.905; Megatron-Core's weak scaling at 0.93 (0.90,
        // the bound, before the fit's fixed point).
        let rho = g.spearman.unwrap_or_else(|| panic!("{}: tied", g.name));
        assert!(rho >= 0.9, "{}: Spearman {rho:.2}", g.name);
    }
    for name in [
        "torchtitan-h100-asynctp-llama3-70b-fp8",
        "torchtitan-h100-asynctp-llama3-8b-fp8",
    ] {
        let g = groups.iter().find(|g| g.name == name).unwrap();
        assert_eq!((g.runs, g.spearman), (4, Some(1.0)), "{name}");
    }
}

#[test]
fn summaries_cover_gpu_scale_framework_and_precision() {
    let s = &validation().summary;
    let names = |b: &[Bucket]| b.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&s.by_gpu),
        [
            "a100-sxm-80gb",
            "h100-sxm",
            "h100-sxm-96gb-500w",
            "h200-sxm"
        ]
    );
    assert_eq!(names(&s.by_precision), ["bf16", "fp8", "fp8-rowwise"]);
    assert_eq!(names(&s.by_framework), ["deepspeed", "fsdp", "megatron"]);
    assert!(names(&s.by_scale).contains(&"> 4096 GPUs".to_string()));
}

#[test]
fn unpublished_interleaving_takes_the_framework_default() {
    // torchtitan's 405B interleaved 1F1B run names no split points, so torchtitan built 2
    // stages per rank; the search's fastest split (8) priced its bubble at a quarter of that.
    let interleaved = run("torchtitan2024-h100-405b-512gpu-interleaved-1f1b-fp8");
    assert_eq!(
        interleaved.choices[&Choice::VirtualStages],
        "2 (the default of an interleaved schedule without split points)"
    );
    let plain = run("torchtitan2024-h100-405b-512gpu-1f1b-fp8");
    let bubble = |r: &RunPrediction| r.breakdown.pipeline_bubble.exposed_s;
    let ratio = bubble(plain) / bubble(interleaved);
    assert!((ratio - 2.0).abs() < 0.05, "{ratio}");
}

#[test]
fn a_run_the_model_cannot_price_is_reported_and_the_rest_scored() {
    let text = std::fs::read_to_string(format!(
        "{}/../data/published-runs.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // Point the first run at a GPU the catalog does not know.
    let broken = text.replacen("gpu: a100-sxm-80gb", "gpu: mi300x", 1);
    let file = parse_runs(&broken, "broken.yaml").unwrap();
    let v = validate(&[file], &NOMINAL);
    assert_eq!(v.skipped.len(), 1);
    assert!(
        v.skipped[0].reason.contains("mi300x"),
        "{}",
        v.skipped[0].reason
    );
    assert_eq!(v.summary.runs, 79);
}

/// Asserts that the one broken run of `text` is skipped for a reason naming `key`.
fn assert_refused(text: &str, key: &str) {
    let v = validate(&[parse_runs(text, "broken.yaml").unwrap()], &NOMINAL);
    assert_eq!(v.skipped.len(), 1, "{key}: {:?}", v.skipped);
    let reason = &v.skipped[0].reason;
    assert!(reason.contains(key), "{key}: {reason}");
}

#[test]
fn nonsense_cluster_figures_are_refused_with_the_key() {
    let text = std::fs::read_to_string(format!(
        "{}/../data/published-runs.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // The first run (Narayanan's 1.7B on 32 GPUs, 8 per node) with each figure broken.
    for (good, bad, key) in [
        ("nic_gbps: 200", "nic_gbps: -8", "cluster.nic_gbps = -8"),
        ("nic_gbps: 200", "nic_gbps: .nan", "cluster.nic_gbps = NaN"),
        (
            "nics_per_node: 8",
            "nics_per_node: 0",
            "cluster.nics_per_node = 0",
        ),
        (
            "gpus_per_node: 8",
            "gpus_per_node: 0",
            "cluster.gpus_per_node = 0",
        ),
        (
            "gpus_per_node: 8",
            "gpus_per_node: 8\n    nvlink_domain: 3",
            "cluster.nvlink_domain = 3",
        ),
    ] {
        assert_refused(&text.replacen(good, bad, 1), key);
    }
}

#[test]
fn misspelled_keys_and_impossible_values_are_refused_by_name() {
    let text = std::fs::read_to_string(format!(
        "{}/../data/published-runs.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // Issue 31, item 11: a misspelled key was ignored and the run scored on defaults.
    for (good, bad, nearest) in [
        ("zero_stage: null", "zero-stage: null", "zero_stage"),
        ("recompute: full", "recompte: full", "recompute"),
        (
            "iteration_time_s: 3.53",
            "iteration_time: 3.53",
            "iteration_time_s",
        ),
    ] {
        let err = parse_runs(&text.replacen(good, bad, 1), "typo.yaml")
            .unwrap_err()
            .to_string();
        let key = bad.split(':').next().unwrap();
        assert!(err.contains(&format!("unknown field `{key}`")), "{err}");
        assert!(
            err.contains(&format!("the nearest known key is `{nearest}`")),
            "{err}"
        );
    }
    // A schedule the format does not name was read as not interleaved.
    let err = parse_runs(
        &text.replacen("schedule: interleaved", "schedule: zigzag", 1),
        "zigzag.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("zigzag") && err.contains("interleaved"),
        "{err}"
    );
    // ZeRO 4 was priced; a width whose 4h wraps 32 bits became an ffn of 32; degrees whose
    // product wraps 32 bits passed the GPU count.
    for (good, bad, key) in [
        ("zero_stage: null", "zero_stage: 4", "layout.zero_stage = 4"),
        (
            "hidden: 2304",
            "hidden: 1073741832",
            "model.hidden = 1073741832",
        ),
        (
            "dp: 32\n    ep: 1\n    cp: 1",
            "dp: 2147483664\n    ep: 1\n    cp: 2",
            "tp x pp x dp x cp = 4294967328",
        ),
    ] {
        assert_refused(&text.replacen(good, bad, 1), key);
    }
}

#[test]
fn an_nvlink_domain_past_the_node_keeps_tensor_parallelism_on_nvlink() {
    let text = std::fs::read_to_string(format!(
        "{}/../data/published-runs.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // Narayanan's 1.7B on 32 GPUs moved to GB200 trays of 4 with TP 8: two trays per TP group.
    let gb200 = text
        .replacen("gpu: a100-sxm-80gb", "gpu: gb200", 1)
        .replacen("gpus_per_node: 8", "gpus_per_node: 4", 1)
        .replacen(
            "tp: 1\n    pp: 1\n    dp: 32",
            "tp: 8\n    pp: 1\n    dp: 4",
            1,
        );
    let rack = gb200.replacen(
        "gpus_per_node: 4",
        "gpus_per_node: 4\n    nvlink_domain: 72",
        1,
    );
    let priced = |text: &str| {
        let v = validate(&[parse_runs(text, "gb200.yaml").unwrap()], &NOMINAL);
        let r = v
            .runs
            .iter()
            .find(|r| r.id == "narayanan2021-t1-1.7B")
            .unwrap();
        (r.predicted_iteration_time_s, r.breakdown.tp_comm.time_s)
    };
    let ((trays, trays_tp), (nvl72, rack_tp)) = (priced(&gb200), priced(&rack));
    // Without the key the TP all-reduces cross the trays' NICs; with it they stay on the
    // rack's NVLink (1.8 TB/s a GPU against one 400 Gb/s NIC), and the step follows.
    assert!(
        rack_tp < 0.2 * trays_tp,
        "TP {rack_tp} s on the rack, {trays_tp} s on trays"
    );
    assert!(nvl72 < trays, "{nvl72} s on the rack, {trays} s on trays");
}

#[test]
fn twenty_thousand_runs_parse_within_the_budget() {
    // The first run of the vTrain file, 20,000 times.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/vtrain-runs.yaml"
    ))
    .unwrap();
    let (head, rest) = text.split_once("\n- id:").unwrap();
    let first = rest.split("\n- id:").next().unwrap();
    let mut big = head.to_string();
    for i in 0..20_000 {
        big.push_str(&format!(
            "\n- id: copy-{i}\n{}",
            first.split_once('\n').unwrap().1
        ));
    }
    let file = tuner::validate::parse_runs(&big, "big.yaml").unwrap();
    assert_eq!(file.runs.len(), 20_000);
}

#[test]
fn torchtitan_runs_are_priced_on_the_part_and_compile_their_notes_name() {
    // Grand Teton's 96 GB HBM2e H100s at 500 W; Trainy's H200s are what they say.
    let eager = run("torchtitan2024-h100-8b-8gpu-fsdp");
    assert_eq!(eager.gpu, "h100-sxm-96gb-500w");
    assert!(eager.choices[&Choice::Gpu].starts_with("h100-sxm-96gb-500w"));
    assert!(!run("trainy2025-h200-8b-32gpu-fsdp-fp8")
        .choices
        .contains_key(&Choice::Gpu));
    // The same layout eager and compiled: 2.844 s and 2.458 s measured (1.16x); the model tied
    // them (both eager) until it read torch.compile from the notes, and now says 1.23x.
    let compiled = run("torchtitan2024-h100-8b-8gpu-fsdp-compile");
    assert_eq!(eager.choices[&Choice::TorchCompile], "off (the default)");
    assert_eq!(
        compiled.choices[&Choice::TorchCompile],
        "on (the notes say so)"
    );
    let ratio = eager.predicted_iteration_time_s / compiled.predicted_iteration_time_s;
    let measured = eager.observed_iteration_time_s / compiled.observed_iteration_time_s;
    assert!(
        ratio > 1.05 && ratio < measured * 1.1,
        "{ratio:.3} vs {measured:.3}"
    );
}

/// Issue 31, item 10: a step of 1e-308 s or 1e308 s was fitted and moved every knob, and a
/// NIC of 1e-308 Gbit/s priced an infinite step; each is refused with its range.
#[test]
fn r31_10_steps_and_nic_rates_outside_their_physical_range_are_refused() {
    let text = std::fs::read_to_string(format!(
        "{}/../data/published-runs.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for (good, bad, key) in [
        (
            "iteration_time_s: 3.53",
            "iteration_time_s: 1e-308",
            "iteration_time_s = 0.00000000",
        ),
        (
            "iteration_time_s: 3.53",
            "iteration_time_s: 1e308",
            "expected a step time from 1e-4 s to 1e5 s",
        ),
        (
            "nic_gbps: 200",
            "nic_gbps: 1e-308",
            "expected a NIC line rate from 1 to 10000 Gbit/s",
        ),
    ] {
        assert_refused(&text.replacen(good, bad, 1), key);
    }
}
