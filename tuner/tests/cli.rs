//! The `tuner` binary end to end: outputs, documents and errors.

use assert_cmd::Command;
use serde_json::Value;

fn tuner() -> Command {
    Command::cargo_bin("tuner").expect("tuner binary")
}

fn stdout_of(args: &[&str]) -> String {
    outputs_of(args).0
}

/// Stdout and stderr of a run that succeeds.
fn outputs_of(args: &[&str]) -> (String, String) {
    let out = tuner().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "tuner {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

fn stderr_of_failure(args: &[&str]) -> String {
    let out = tuner().args(args).output().expect("runs");
    assert!(!out.status.success(), "tuner {args:?} should fail");
    String::from_utf8(out.stderr).expect("utf-8")
}

const RUNS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/published-runs.yaml");

#[test]
fn recommend_json_document_has_every_field() {
    let doc: Value = serde_json::from_str(&stdout_of(&[
        "recommend",
        "--model",
        "70b",
        "--gpus",
        "512",
        "--format",
        "json",
    ]))
    .unwrap();
    let evaluated = doc["evaluated"].as_u64().unwrap();
    let fitting = doc["fitting"].as_u64().unwrap();
    assert!(evaluated >= fitting && fitting > 0, "{evaluated} {fitting}");
    assert!(doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("resolves to llama3-70b")));
    let meshes = doc["meshes"].as_array().unwrap();
    // Five distinct layouts by default, each followed in rank order by those that price like it.
    let firsts = meshes
        .iter()
        .filter(|m| m["equivalent_to"].is_null())
        .count();
    assert_eq!(firsts, 5, "{doc}");
    for (i, m) in meshes.iter().enumerate() {
        assert_eq!(m["rank"].as_u64(), Some(i as u64 + 1));
        if let Some(first) = m["equivalent_to"].as_u64() {
            let f = &meshes[first as usize - 1];
            assert!(f["equivalent_to"].is_null(), "{m}");
            let step = |m: &Value| m["step_time_s"].as_f64().unwrap();
            let total = |m: &Value| m["memory_per_gpu_bytes"]["total"].as_f64().unwrap();
            assert!((step(m) - step(f)).abs() <= 0.005 * step(f), "{m}");
            assert!((total(m) - total(f)).abs() <= 0.005 * total(f), "{m}");
        }
    }
    let tokens = doc["training"]["global_batch_tokens"].as_f64().unwrap();
    let mut last = 0.0;
    for m in meshes {
        for key in [
            "tp",
            "pp",
            "dp",
            "cp",
            "ep",
            "microbatch_size",
            "microbatches",
            "virtual_stages",
            "zero_stage",
            "recompute",
            "sequence_parallel",
            "step_time_s",
            "tokens_per_s",
            "mfu",
            "bubble_fraction",
            "warnings",
        ] {
            assert!(!m[key].is_null(), "mesh lacks {key}: {m}");
        }
        for key in [
            "total",
            "weights",
            "gradients",
            "optimizer",
            "activations",
            "other",
        ] {
            assert!(m["memory_per_gpu_bytes"][key].as_f64().unwrap() >= 0.0);
        }
        let gpus = m["tp"].as_u64().unwrap()
            * m["pp"].as_u64().unwrap()
            * m["dp"].as_u64().unwrap()
            * m["cp"].as_u64().unwrap();
        assert_eq!(gpus, 512);
        let step = m["step_time_s"].as_f64().unwrap();
        assert!(step >= last, "ranked by step time");
        last = step;
        assert!((m["tokens_per_s"].as_f64().unwrap() * step / tokens - 1.0).abs() < 1e-9);
        let terms: f64 = m["time_s"]
            .as_object()
            .unwrap()
            .values()
            .map(|t| t["exposed_s"].as_f64().unwrap())
            .sum();
        assert!(
            (terms / step - 1.0).abs() < 1e-9,
            "terms add up to the step"
        );
        assert!(
            m["memory_per_gpu_bytes"]["total"].as_f64().unwrap()
                <= m["memory_capacity_bytes"].as_f64().unwrap()
        );
    }
    assert!(meshes[0]["why_below"].is_null());
    assert!(meshes[1]["why_below"].as_str().unwrap().contains("exposed"));
}

#[test]
fn recommend_yaml_is_the_same_document() {
    let yaml = stdout_of(&[
        "recommend",
        "--model",
        "llama3-8b",
        "--gpus",
        "64",
        "--format",
        "yaml",
        "--top",
        "3",
    ]);
    let doc: Value = serde_saphyr::from_str(&yaml).unwrap();
    let meshes = doc["meshes"].as_array().unwrap();
    let firsts = meshes.iter().filter(|m| m["equivalent_to"].is_null());
    assert_eq!(firsts.count(), 3);
    assert_eq!(doc["model"]["name"], "llama3-8b");
}

#[test]
fn recommend_table_prints_defaults_and_reasons() {
    let (out, err) = outputs_of(&["recommend", "--model", "70b", "--gpus", "512", "--top", "3"]);
    // Notes go to stderr, so the table can be piped on its own.
    assert!(
        err.contains("tuner: note: model `70b` resolves to llama3-70b"),
        "{err}"
    );
    assert!(err.contains("seq_len 8192 from llama3-70b"), "{err}");
    assert!(err.contains("global batch 512 sequences"), "{err}");
    assert!(!out.contains("note:"), "{out}");
    assert!(out.contains("configurations evaluated"), "{out}");
    assert!(out.contains("#2 below #1:"), "{out}");
}

/// Issue 30: ten near-identical rows, a CP rank priced like a DP rank, each repeating its
/// warnings on stdout. Llama 3 8B on 64 A100 opens with four layouts at one step time.
#[test]
fn r30_recommend_groups_layouts_that_price_alike_and_says_each_warning_once_on_stderr() {
    let args = [
        "recommend",
        "--model",
        "8b",
        "--gpus",
        "64",
        "--cluster",
        "dgx-a100",
    ];
    let (out, err) = outputs_of(&args);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with('│') && !l.contains("layout"))
        .collect();
    assert_eq!(rows.len(), 5, "{out}");
    // The first row stands for the three CP variants that price like it, named below the table
    // by the knobs they change.
    assert!(
        rows[0].contains("TP1 PP1 DP64") && rows[0].contains("+3"),
        "{out}"
    );
    assert!(out.contains("#1 alike: #2 DP32 CP2 mb2 [W"), "{out}");
    assert!(out.contains("#5 below #1:"), "{out}");
    // No warning reaches stdout; stderr says each one once, by the marker the rows carry.
    assert!(
        !out.contains("warning:") && !out.contains("memory left") && !out.contains("CP=2 is"),
        "{out}"
    );
    let warnings: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("tuner: warning: "))
        .collect();
    assert!(warnings.len() >= 2, "{err}");
    for (i, w) in warnings.iter().enumerate() {
        let (marker, text) = w.split_once(": ").unwrap();
        assert_eq!(marker, format!("W{}", i + 1));
        assert!(out.contains(marker), "{marker} is on no row:\n{out}");
        let again = warnings.iter().filter(|o| o.ends_with(text)).count();
        assert_eq!(again, 1, "said twice: {text}");
    }
    // --top counts distinct layouts; JSON keeps every layout and each one's own warnings,
    // and says the warnings on stderr without the table's markers.
    let out = tuner()
        .args([&args[..], &["--top", "2", "--format", "json"]].concat())
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let meshes = doc["meshes"].as_array().unwrap();
    assert_eq!(meshes.len(), 7, "{doc}");
    let alike: Vec<u64> = meshes
        .iter()
        .filter_map(|m| m["equivalent_to"].as_u64())
        .collect();
    assert_eq!(alike, [1, 1, 1, 5, 5]);
    assert!(meshes[1]["warnings"][0].as_str().is_some(), "{doc}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("tuner: warning: only 4.7% of GPU memory left"),
        "{err}"
    );
}

#[test]
fn explain_says_why_a_mesh_is_impossible() {
    let (_, err) = outputs_of(&[
        "explain", "--model", "405b", "--gpus", "64", "--tp", "8", "--pp", "1", "--dp", "8",
        "--zero", "0",
    ]);
    let line = err.lines().find(|l| l.contains("impossible")).expect(&err);
    assert!(
        line.contains("needs") && line.contains("GiB per GPU, has 80 GiB"),
        "{line}"
    );
}

#[test]
fn explain_breaks_a_fixed_mesh_into_terms() {
    let args = [
        "explain",
        "--model",
        "70b",
        "--gpus",
        "512",
        "--tp",
        "8",
        "--pp",
        "8",
        "--dp",
        "8",
        "--microbatches",
        "64",
    ];
    let out = stdout_of(&args);
    for term in [
        "compute",
        "TP all-reduce",
        "pipeline bubble",
        "PP send/recv",
        "weights",
        "activations",
    ] {
        assert!(out.contains(term), "{term} missing:\n{out}");
    }
    let json: Value =
        serde_json::from_str(&stdout_of(&[&args[..], &["--format", "json"]].concat())).unwrap();
    let m = &json["meshes"][0];
    assert_eq!(
        (
            m["tp"].as_u64(),
            m["pp"].as_u64(),
            m["dp"].as_u64(),
            m["microbatches"].as_u64()
        ),
        (Some(8), Some(8), Some(8), Some(64))
    );
    // 1F1B bubble (p-1)/(v m + p - 1) with the chosen v.
    let v = m["virtual_stages"].as_f64().unwrap();
    assert!((m["bubble_fraction"].as_f64().unwrap() - 7.0 / (v * 64.0 + 7.0)).abs() < 1e-12);
}

#[test]
fn tp_beyond_nvlink_is_warned() {
    let (_, err) = outputs_of(&[
        "explain",
        "--model",
        "gpt3-175b",
        "--gpus",
        "256",
        "--tp",
        "16",
        "--pp",
        "4",
        "--dp",
        "4",
    ]);
    assert!(
        err.contains("tuner: warning: TP=16 is wider than the 8-GPU NVLink domain"),
        "{err}"
    );
}

#[test]
fn compare_sets_two_meshes_side_by_side() {
    let out = stdout_of(&[
        "compare",
        "--model",
        "70b",
        "--gpus",
        "512",
        "--a",
        "tp=8,pp=8,dp=8",
        "--b",
        "tp=4,pp=8,dp=16",
        "--no-tp-comm-overlap",
    ]);
    assert!(
        out.contains("A: TP8 PP8 DP8") && out.contains("B: TP4 PP8 DP16") && out.contains("B - A"),
        "{out}"
    );
    assert!(out.contains("TP all-reduce (exposed)"), "{out}");
}

/// Issue 30: DeepSpeed asserts train_batch_size = micro batch x accumulation steps x its
/// data-parallel size, and runs neither interleaved pipelines nor ring context parallelism;
/// the layouts the search recommends for it keep all three.
#[test]
fn deepspeed_configs_meet_deepspeeds_batch_assertion() {
    for (model, gpus) in [
        ("8b", "64"),
        ("70b", "512"),
        ("405b", "2048"),
        ("mixtral-8x7b", "256"),
    ] {
        let args = [
            "recommend",
            "--model",
            model,
            "--gpus",
            gpus,
            "--emit",
            "deepspeed",
        ];
        let ds: Value = serde_json::from_str(&stdout_of(&args)).unwrap();
        let n = |v: &Value| v.as_u64().unwrap();
        let layout = &ds["meshfit"];
        assert_eq!(
            n(&ds["train_batch_size"]),
            n(&ds["train_micro_batch_size_per_gpu"])
                * n(&ds["gradient_accumulation_steps"])
                * n(&layout["data_parallel"]),
            "{args:?}: {ds}"
        );
        assert_eq!(
            (n(&layout["virtual_stages"]), n(&layout["context_parallel"])),
            (1, 1),
            "{args:?}"
        );
    }
}

#[test]
fn launch_configs() {
    let args = [
        "explain", "--model", "70b", "--gpus", "512", "--tp", "8", "--pp", "8", "--dp", "8",
        "--zero", "1", "--emit",
    ];
    let megatron = stdout_of(&[&args[..], &["megatron"]].concat());
    for flag in [
        "--tensor-model-parallel-size 8",
        "--pipeline-model-parallel-size 8",
        "--num-query-groups 8",
        "--swiglu",
        "--use-distributed-optimizer",
    ] {
        assert!(megatron.contains(flag), "{flag}:\n{megatron}");
    }
    let ds: Value =
        serde_json::from_str(&stdout_of(&[&args[..], &["deepspeed"]].concat())).unwrap();
    assert_eq!(ds["zero_optimization"]["stage"], 1);
    assert_eq!(ds["train_batch_size"], 512);
    let titan = stdout_of(&[&args[..], &["torchtitan"]].concat());
    assert!(titan.starts_with("# torchtitan 0.3.x"), "{titan}");
    for line in [
        "--module llama3 --config llama3_70b",
        "--parallelism.tensor_parallel_degree 8",
        "--parallelism.pipeline_parallel_degree 8",
        "--parallelism.pipeline_parallel_first_stage_less_layers 0",
    ] {
        assert!(titan.lines().any(|l| l == line), "{line}:\n{titan}");
    }
    let titan = stdout_of(&[&args[..], &["torchtitan-0.2"]].concat());
    assert!(
        titan.starts_with("# torchtitan v0.2.0 to v0.2.2"),
        "{titan}"
    );
    assert!(
        titan.contains("tensor_parallel_degree = 8")
            && titan.contains("pipeline_parallel_degree = 8")
            && titan.contains("[model]\nname = \"llama3\"\nflavor = \"70B\""),
        "{titan}"
    );
    // Each config is priced as the framework it launches runs, and the output says so.
    let out = tuner()
        .args([&args[..], &["torchtitan"]].concat())
        .output()
        .expect("runs");
    let notes = String::from_utf8(out.stderr).unwrap();
    assert!(
        notes.contains("framework: fsdp, whose runtime the --emit torchtitan config launches"),
        "{notes}"
    );
}

#[test]
fn unknown_model_lists_close_names() {
    let err = stderr_of_failure(&["recommend", "--model", "llama3-7b", "--gpus", "8"]);
    assert!(
        err.contains("unknown model `llama3-7b`") && err.contains("llama3-8b"),
        "{err}"
    );
}

#[test]
fn zero_and_negative_gpus_are_refused() {
    for n in ["0", "-8"] {
        let err = stderr_of_failure(&["recommend", "--model", "70b", "--gpus", n]);
        assert!(
            err.contains(&format!("--gpus = {n}")) && err.contains("positive"),
            "{err}"
        );
    }
}

#[test]
fn gpu_count_without_a_mesh_names_the_smallest_that_works() {
    let err = stderr_of_failure(&["recommend", "--model", "70b", "--gpus", "7"]);
    assert!(
        err.contains("no parallel layout of llama3-70b fits 7 GPUs"),
        "{err}"
    );
    assert!(
        err.contains("the smallest GPU count that works is 16"),
        "{err}"
    );
    let err = stderr_of_failure(&["recommend", "--model", "405b", "--gpus", "8"]);
    assert!(
        err.contains("GiB per GPU, has 80 GiB") && err.contains("smallest GPU count that works is"),
        "{err}"
    );
}

#[test]
fn malformed_model_yaml_names_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "name: bad\nlayers: 2\nhidden: 64\nheads: 4\nffn_hidden: 256\nffn_act: relu\nvocab: 100\nseq_len: 128\n").unwrap();
    let err = stderr_of_failure(&[
        "recommend",
        "--model",
        path.to_str().unwrap(),
        "--gpus",
        "8",
    ]);
    assert!(
        err.contains("bad.yaml") && err.contains("line 6") && err.contains("relu"),
        "{err}"
    );
}

#[test]
fn custom_model_from_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.yaml");
    std::fs::write(&path, "name: tiny-1b\nlayers: 16\nhidden: 2048\nheads: 16\nkv_heads: 4\nffn_hidden: 8192\nffn_act: swiglu\nvocab: 32000\nseq_len: 4096\n").unwrap();
    let doc: Value = serde_json::from_str(&stdout_of(&[
        "recommend",
        "--model",
        path.to_str().unwrap(),
        "--gpus",
        "16",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(doc["model"]["name"], "tiny-1b");
    assert!(!doc["meshes"].as_array().unwrap().is_empty());
}

#[test]
fn models_and_clusters_list_the_catalog() {
    let models = stdout_of(&["models"]);
    for id in [
        "gpt3-175b",
        "llama2-7b",
        "llama3-405b",
        "mixtral-8x22b",
        "deepseek-v3",
        "70b -> llama3-70b",
    ] {
        assert!(models.contains(id), "{id}");
    }
    let clusters = stdout_of(&["clusters"]);
    for id in [
        "dgx-a100",
        "hgx-a800",
        "dgx-h100",
        "grand-teton-h100",
        "hgx-h200",
        "hgx-h20",
        "cray-ex254n-gh200",
        "dgx-b200",
        "dgx-b300",
        "gb200-nvl72",
        "gb300-nvl72",
        "l40s-pcie",
    ] {
        assert!(clusters.contains(id), "{id}");
    }
}

#[test]
fn validate_json_has_runs_and_summary() {
    let doc: Value = serde_json::from_str(&stdout_of(&[
        "validate", "--runs", RUNS, "--format", "json",
    ]))
    .unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 80);
    for r in runs {
        for key in [
            "id",
            "group",
            "predicted_iteration_time_s",
            "observed_iteration_time_s",
            "predicted_tokens_per_s",
            "error",
            "choices",
        ] {
            assert!(!r[key].is_null(), "{key}");
        }
        let e = r["predicted_iteration_time_s"].as_f64().unwrap()
            / r["observed_iteration_time_s"].as_f64().unwrap()
            - 1.0;
        assert!((e - r["error"].as_f64().unwrap()).abs() < 1e-12);
    }
    // Narayanan Table 1 does not publish microbatch sizes: each is chosen and reported.
    let first = runs
        .iter()
        .find(|r| r["id"] == "narayanan2021-t1-1.7B")
        .unwrap();
    assert!(first["choices"]["microbatch_size"].is_string());
    let s = &doc["summary"];
    for key in [
        "median_abs_error",
        "max_abs_error",
        "within_10pct",
        "groups",
    ] {
        assert!(!s[key].is_null(), "{key}");
    }
}

#[test]
fn measurements_of_another_gpu_are_called_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    let record = |bytes: u64, t: f64| {
        format!(
            "{{\"kind\":\"all_reduce\",\"backend\":\"nccl\",\"node\":\"n1\",\"gpus\":[0,1],\"scope\":\"intra_node\",\"ranks\":2,\"bytes\":{bytes},\"dtype\":\"bf16\",\"time_s\":{t},\"time_min_s\":null,\"time_max_s\":null,\"iters\":20,\"clock\":\"cuda_event\",\"algbw\":null,\"busbw\":null,\"flops\":null,\"timestamp\":null}}"
        )
    };
    let records: Vec<String> = (10..20)
        .map(|i| record(1 << (2 * i), 1e-5 + (1u64 << (2 * i)) as f64 / 20e9))
        .collect();
    let snap = format!(
        "{{\"format_version\": 1, \"created\": 0, \"source\": \"test\", \"time_range\": {{\"start\": 0, \"end\": 0}}, \"nodes\": [{{\"name\": \"n1\", \"gpus\": [{{\"index\": 0, \"model\": \"NVIDIA L40S\"}}], \"records\": [{}]}}]}}",
        records.join(",")
    );
    std::fs::write(&path, snap).unwrap();
    let (out, err) = outputs_of(&[
        "recommend",
        "--model",
        "llama3-8b",
        "--gpus",
        "16",
        "--top",
        "1",
        "--measurements",
        path.to_str().unwrap(),
    ]);
    assert!(err.contains("WARNING: the measurements come from NVIDIA L40S (l40s) but the cluster prices h100-sxm (NVIDIA H100 SXM5 80GB): they are not used and the catalog prices those terms; pass --cluster l40s-pcie"), "{err}");
    assert!(out.contains("terms from measurements: none"), "{out}");
}

#[test]
fn a_curve_is_used_only_where_it_was_measured() {
    // A real 5-row log: 256 B to 4 KiB sends between two A40 nodes, latency-bound throughout.
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/nccl-tests/nccl-tests-214_a40-x1-per-node-2nodes_sendrecv.txt"
    );
    let args = ["recommend", "--model", "70b", "--gpus", "16", "--top", "1"];
    let nominal = stdout_of(&args);
    let (measured, notes) = outputs_of(&[&args[..], &["--measurements", log]].concat());
    assert!(
        notes.contains("measured send_recv inter_node over 2 ranks fits poorly (R² -56.88 < 0.9): priced from the catalog"),
        "{notes}"
    );
    assert!(!notes.contains("idle-fabric sweeps"), "{notes}");
    let best = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("│ 1 "))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert!(!best(&nominal).is_empty(), "{nominal}");
    assert_eq!(best(&measured), best(&nominal), "{measured}");
}

#[test]
fn impossible_and_absurd_inputs_are_refused_at_once_by_name() {
    for (extra, expected) in [
        (
            &["--gpus", "8", "--tp", "3"][..],
            "--tp = 3: expected a divisor of llama3-70b's 64 heads and 8 KV heads",
        ),
        (
            &["--gpus", "8", "--tp", "0"],
            "--tp = 0: expected a positive count",
        ),
        (
            &["--gpus", "64", "--microbatches", "0"],
            "--microbatches = 0: expected a positive count",
        ),
        (
            &["--gpus", "48", "--tp", "8", "--pp", "4"],
            "--gpus = 48: expected a multiple of the pinned tp x pp x dp x cp = 32",
        ),
        (
            &["--gpus", "10000000"],
            "--gpus = 10000000: expected at most 1048576",
        ),
        (
            &["--gpus", "512", "--global-batch", "4294967295"],
            "--global-batch = 4294967295: expected at most 16777216 sequences",
        ),
        (
            &["--gpus", "512", "--global-batch-tokens", "1e300"],
            "--global-batch-tokens = 1e300",
        ),
        (
            &["--gpus", "16", "--nic-gbps", "-8"],
            "--nic-gbps = -8: expected a NIC line rate from 1 to 10000 Gbit/s",
        ),
        (
            &["--gpus", "16", "--nics-per-node", "0"],
            "--nics-per-node = 0: expected at least 1 for a job across nodes",
        ),
    ] {
        let args = [&["recommend", "--model", "70b"][..], extra].concat();
        let err = stderr_of_failure(&args);
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("smallest GPU count"), "{args:?}: {err}");
    }
}

/// Issue 12: a fabric run's pairwise pass over 4 DGX H100 nodes, 8 rails, 45 GB/s per pair
/// (0.90 of 400 Gb/s) except n3's NIC 1 at half that. The tuner names n3 and its NIC, prices
/// every inter-node term no faster than that NIC allows, and ranks differently from the
/// healthy run; leaving n3 out (`--exclude-degraded`) brings the healthy ranking back.
#[test]
fn issue_12_a_slow_nic_is_named_and_bounds_inter_node_terms() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, slow: f64| {
        let nodes = ["n0", "n1", "n2", "n3"];
        let mut lines = String::new();
        for (i, a) in nodes.iter().enumerate() {
            for b in &nodes[i + 1..] {
                for rail in 0..8u32 {
                    let bw = if rail == 1 && *b == "n3" {
                        45e9 * slow
                    } else {
                        45e9
                    };
                    let bytes = 64u64 << 20;
                    let r = serde_json::json!({
                        "kind": "send_recv", "backend": "sim", "node": a, "gpus": [rail],
                        "scope": "inter_node", "ranks": 2, "bytes": bytes, "dtype": "fp32",
                        "time_s": bytes as f64 / bw, "time_min_s": null, "time_max_s": null,
                        "iters": 20, "clock": "model", "algbw": bw, "busbw": bw,
                        "flops": null, "timestamp": null, "peer_node": b, "ranks_per_node": 1
                    });
                    lines.push_str(&format!("{r}\n"));
                }
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, lines).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (ok, slow) = (write("ok.jsonl", 1.0), write("slow.jsonl", 0.5));
    let recommend = |file: &str, extra: &[&str]| -> Value {
        let mut args = vec![
            "recommend",
            "--model",
            "llama3-70b",
            "--gpus",
            "64",
            "--top",
            "5",
            "--format",
            "json",
            "--measurements",
            file,
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&stdout_of(&args)).unwrap()
    };
    // The top five layouts in rank order: a fault that slows some layouts more than others
    // reorders them, even where the best one is robust to it (here the fourth place changes).
    let layout = |doc: &Value| -> Vec<Vec<Value>> {
        doc["meshes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                ["tp", "pp", "dp", "cp", "virtual_stages", "microbatch_size"]
                    .iter()
                    .map(|k| m[*k].clone())
                    .collect()
            })
            .collect()
    };
    let healthy = recommend(&ok, &[]);
    assert_eq!(healthy["measurements"]["stragglers"], serde_json::json!([]));
    let faulted = recommend(&slow, &[]);
    let s = &faulted["measurements"]["stragglers"];
    assert_eq!(s.as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s[0]["node"], "n3");
    assert_eq!(
        s[0]["what"],
        "inter-node send_recv pairs through NIC 1 (busbw, best of 3 peers)"
    );
    assert_eq!(s[0]["shortfall"], 0.5);
    let notes = faulted["notes"].to_string();
    assert!(
        notes.contains("no faster than node n3's NIC 1 allows: 22.5 GB/s"),
        "{notes}"
    );
    assert_ne!(layout(&healthy), layout(&faulted));
    let best = |doc: &Value| doc["meshes"][0]["step_time_s"].as_f64().unwrap();
    assert!(best(&faulted) > best(&healthy));
    let excluded = recommend(&slow, &["--exclude-degraded"]);
    let ex = &excluded["measurements"]["excluded"];
    assert_eq!(ex[0][0], "n3", "{ex}");
    assert_eq!(layout(&excluded), layout(&healthy));
    assert_eq!(best(&excluded), best(&healthy));
}

/// The exit code and stderr of a run that fails.
fn failure(args: &[&str]) -> (i32, String) {
    let out = tuner().args(args).output().expect("runs");
    let err = String::from_utf8(out.stderr).expect("utf-8");
    (out.status.code().expect("an exit code"), err)
}

#[test]
fn issue_11_usage_errors_exit_2_and_runtime_failures_1() {
    for (args, says) in [
        (
            &["recommend", "--model", "70b", "--gpus", "0"][..],
            "--gpus = 0",
        ),
        (
            &["recommend", "--model", "70b", "--gpus", "8", "--bogus"],
            "--bogus",
        ),
        (
            &["recommend", "--model", "llama9", "--gpus", "8"],
            "unknown model `llama9`",
        ),
        (
            &[
                "recommend",
                "--model",
                "70b",
                "--gpus",
                "8",
                "--cluster",
                "dgx-x",
            ],
            "unknown cluster",
        ),
        (
            &[
                "compare", "--model", "70b", "--gpus", "64", "--a", "tp=8", "--b", "zero=9",
            ],
            "--b zero",
        ),
        (&["fit"], "--measurements/--prometheus"),
        (
            &[
                "recommend",
                "--model",
                "70b",
                "--gpus",
                "8",
                "--timeout",
                "soon",
                "--prometheus",
                "http://127.0.0.1:1",
            ],
            "--timeout",
        ),
        (&["models", "--format", "xml"], "xml"),
        (
            &[
                "recommend",
                "--model",
                "8b",
                "--gpus",
                "8",
                "--emit",
                "torchtitan",
                "--framework",
                "megatron",
            ],
            "--framework = megatron: expected fsdp, the framework `--emit torchtitan` writes for",
        ),
    ] {
        let (code, err) = failure(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let missing = std::env::temp_dir().join("meshfit-issue-11-no-such-runs.yaml");
    for (args, says) in [
        (
            vec!["validate", "--runs", missing.to_str().unwrap()],
            "No such file",
        ),
        (
            vec![
                "recommend",
                "--model",
                "70b",
                "--gpus",
                "8",
                "--prometheus",
                "http://127.0.0.1:1",
                "--timeout",
                "2s",
            ],
            "prometheus http://127.0.0.1:1",
        ),
        (
            vec!["recommend", "--model", "405b", "--gpus", "8"],
            "no parallel layout of llama3-405b fits 8 GPUs",
        ),
    ] {
        let (code, err) = failure(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let help = stdout_of(&["--help"]);
    assert!(
        help.contains("Exit status:") && help.contains("2  usage error"),
        "{help}"
    );
}

#[test]
fn issue_11_a_pin_that_cannot_divide_the_gpus_names_the_nearest_counts() {
    // gpt3-175b has 96 heads, so tp 3 is a valid pin; 512 is no multiple of 3. With the
    // default batch (2048 sequences) dp is a power of two and pp splits 96 layers, with
    // uneven edge stages where it must: 480 (tp 3 x pp 5 x dp 32) and 528 (tp 3 x pp 11 x
    // dp 16) are the nearest counts with a layout.
    let (code, err) = failure(&[
        "recommend",
        "--model",
        "gpt3-175b",
        "--gpus",
        "512",
        "--tp",
        "3",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--gpus = 512: expected a multiple of the pinned tp x pp x dp x cp = 3; the nearest GPU counts with a layout for the pinned knobs: --gpus 480 or 528"),
        "{err}"
    );
    let doc: Value = serde_json::from_str(&stdout_of(&[
        "recommend",
        "--model",
        "gpt3-175b",
        "--gpus",
        "528",
        "--tp",
        "3",
        "--format",
        "json",
        "--top",
        "1",
    ]))
    .unwrap();
    assert_eq!(doc["meshes"][0]["tp"], 3);
}

/// Every subcommand of the tuner, as completions and man pages must list them.
const SUBCOMMANDS: [&str; 10] = [
    "recommend",
    "explain",
    "compare",
    "validate",
    "fit",
    "snapshot",
    "models",
    "clusters",
    "completions",
    "man",
];

#[test]
fn issue_11_completions_and_man_page_list_the_subcommands() {
    let bash = stdout_of(&["completions", "bash"]);
    for sub in SUBCOMMANDS {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    assert!(bash.contains("complete -F _tuner"), "{bash}");
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        assert!(
            stdout_of(&["completions", shell]).contains("recommend"),
            "{shell}"
        );
    }
    let man = stdout_of(&["man"]);
    assert!(
        man.starts_with(".ie \\n(.g .ds Aq") || man.starts_with(".TH"),
        "{man}"
    );
    assert!(man.contains(".TH tuner 1"), "{man}");
    assert!(man.contains(".SH NAME\ntuner \\-"), "{man}");
    assert!(man.contains(".SH SUBCOMMANDS"), "{man}");
    for sub in [
        "tuner\\-recommend(1)",
        "tuner\\-models(1)",
        "tuner\\-man(1)",
    ] {
        assert!(man.contains(sub), "man page lacks {sub}: {man}");
    }
    assert_valid_roff(&man);
    assert!(!man.contains("tuner\\-help(1)"), "no page for help: {man}");
    // With --dir, the page of every subcommand the list names is written beside tuner.1.
    let dir = tempfile::tempdir().unwrap();
    let said = stdout_of(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(
        said.starts_with("wrote tuner.1 and a page per subcommand into "),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("tuner.1")).unwrap(),
        man
    );
    for sub in SUBCOMMANDS {
        let page = std::fs::read_to_string(dir.path().join(format!("tuner-{sub}.1"))).unwrap();
        assert!(page.contains(&format!(".TH tuner-{sub} 1")), "{page}");
        assert_valid_roff(&page);
    }
    let recommend = std::fs::read_to_string(dir.path().join("tuner-recommend.1")).unwrap();
    assert!(recommend.contains("\\-\\-gpus"), "{recommend}");
    let (code, err) = failure(&["man", "--dir", "/nonexistent/meshfit-man"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("writing man pages into /nonexistent/meshfit-man"),
        "{err}"
    );
}

/// Every request line is a man(7) macro or the quote-string setup clap_mangen writes; where
/// groff is installed, it reads the page with every warning on and reports none.
fn assert_valid_roff(man: &str) {
    const REQUESTS: [&str; 14] = [
        ".TH", ".SH", ".SS", ".TP", ".IP", ".PP", ".RS", ".RE", ".ie", ".el", ".br", ".sp", ".nf",
        ".fi",
    ];
    for line in man
        .lines()
        .filter(|l| l.starts_with('.') || l.starts_with('\''))
    {
        let request = line.split_whitespace().next().unwrap_or(line);
        assert!(REQUESTS.contains(&request), "not a man(7) request: {line}");
    }
    // Every warning but `break`: a long flag such as --global-batch-tokens cannot be
    // hyphenated to fit a line, which is layout, not a fault of the page.
    let Ok(mut groff) = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-Wbreak", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        return;
    };
    use std::io::Write;
    groff
        .stdin
        .take()
        .unwrap()
        .write_all(man.as_bytes())
        .unwrap();
    let out = groff.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "groff: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn issue_11_models_and_clusters_print_tables_json_and_yaml() {
    let table = stdout_of(&["models"]);
    assert!(
        table.contains("llama3-70b") && table.contains("aliases: "),
        "{table}"
    );
    let models: Value = serde_json::from_str(&stdout_of(&["models", "--format", "json"])).unwrap();
    assert_eq!(models["schema_version"], 1);
    let l70 = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "llama3-70b")
        .expect("llama3-70b listed");
    assert_eq!(l70["shape"]["layers"], 80);
    assert_eq!(l70["shape"]["kv_heads"], 8);
    assert!(
        (l70["params"].as_f64().unwrap() / 70.6e9 - 1.0).abs() < 0.01,
        "{l70}"
    );
    assert!(models["aliases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["alias"] == "70b" && a["model"] == "llama3-70b"));
    let clusters: Value =
        serde_saphyr::from_str(&stdout_of(&["clusters", "--format", "yaml"])).unwrap();
    assert_eq!(clusters["schema_version"], 1);
    let h100 = clusters["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "dgx-h100")
        .expect("dgx-h100 listed");
    assert_eq!(h100["gpus_per_node"], 8);
    assert_eq!(h100["nic_bits_per_s"].as_f64(), Some(400e9));
}

#[test]
fn issue_11_every_json_document_carries_the_schema_version() {
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/nccl-tests/nccl-tests-214_a40-x1-per-node-2nodes_sendrecv.txt"
    );
    for args in [
        &["recommend", "--model", "8b", "--gpus", "8", "--top", "1"][..],
        &["explain", "--model", "8b", "--gpus", "8", "--tp", "8"],
        &[
            "compare", "--model", "8b", "--gpus", "8", "--a", "tp=8", "--b", "tp=4",
        ],
        &["validate", "--runs", RUNS, "--summary"],
        &["fit", "--measurements", log],
        &["models"],
        &["clusters"],
    ] {
        let (out, _) = outputs_of(&[args, &["--format", "json"]].concat());
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert_eq!(doc["schema_version"], 1, "{args:?}");
        let yaml = stdout_of(&[args, &["--format", "yaml"]].concat());
        assert!(yaml.starts_with("schema_version: 1\n"), "{args:?}: {yaml}");
    }
}

/// The warnings `explain --format json` gives its one mesh.
fn explain_warnings(args: &[&str]) -> Vec<String> {
    let args = [&["explain"][..], args, &["--format", "json"]].concat();
    let doc: Value = serde_json::from_str(&stdout_of(&args)).unwrap();
    doc["meshes"][0]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn context_parallel_layouts_carry_the_validation_caveat() {
    // Context parallelism is where validation finds the model most optimistic (torchtitan's
    // CP runs), so every CP layout says so, and no other layout does.
    let base = ["--model", "70b", "--gpus", "512", "--pp", "4", "--dp", "16"];
    let warnings = |extra: &[&str]| explain_warnings(&[&base[..], extra].concat());
    let cp = warnings(&["--tp", "2", "--cp", "4"]);
    assert!(
        cp.iter()
            .any(|w| w.starts_with("CP=4 is priced") && w.contains("--cp 1")),
        "{cp:?}"
    );
    let no_cp = warnings(&["--tp", "8"]);
    assert!(!no_cp.iter().any(|w| w.contains("CP=")), "{no_cp:?}");
    assert!(!no_cp.iter().any(|w| w.starts_with("MoE")), "{no_cp:?}");
}

#[test]
fn moe_layouts_carry_the_validation_caveat_and_the_dispatch_remedy() {
    // Every MoE layout says its step time is optimistic; one whose experts span nodes names
    // the deduplicating dispatcher, unless that is what was priced.
    let base = [
        "--model",
        "mixtral-8x7b",
        "--gpus",
        "64",
        "--tp",
        "1",
        "--pp",
        "1",
    ];
    let base = [&base[..], &["--dp", "64", "--ep", "8", "--zero", "1"]].concat();
    let warnings = |extra: &[&str]| explain_warnings(&[&base[..], extra].concat());
    let spread = warnings(&[]);
    assert!(
        spread
            .iter()
            .any(|w| w.starts_with("MoE step times are optimistic")),
        "{spread:?}"
    );
    let crosses = |w: &Vec<String>| w.iter().any(|w| w.contains("--moe-dispatch node-dedup"));
    // EP 8 on 8-GPU nodes stays inside one node: nothing crosses; on 4-GPU nodes it spans two.
    assert!(!crosses(&spread), "{spread:?}");
    let wide = warnings(&["--gpus-per-node", "4"]);
    assert!(crosses(&wide), "{wide:?}");
    let dedup = warnings(&["--gpus-per-node", "4", "--moe-dispatch", "node-dedup"]);
    assert!(!crosses(&dedup), "{dedup:?}");
}

/// DeepSeek-V3 on 256 GPUs of GB200 NVL72 racks.
const DEEPSEEK_V3_ON_256_GB200: [&str; 6] = [
    "--model",
    "deepseek-v3",
    "--gpus",
    "256",
    "--cluster",
    "gb200-nvl72",
];

/// DeepSeek-V3 on 2,048 H800 at the batch of its technical report (§4.2).
const DEEPSEEK_V3_AT_DEEPSEEK_S_BATCH: [&str; 8] = [
    "--model",
    "deepseek-v3",
    "--gpus",
    "2048",
    "--cluster",
    "hgx-h800",
    "--global-batch",
    "15360",
];

#[test]
fn moe_layouts_host_bound_by_per_expert_launches_say_to_raise_ep() {
    // DeepSeek-V3 without EP holds all 256 experts on every GPU. Megatron-Core launches each
    // expert's GEMM on its own (Transformer Engine's GroupedLinear): 512 launches a forward
    // pass, and the step waits for the host. At EP 8, 32 experts a GPU, the all-to-alls keep
    // the GPU busier than the host; torchtitan's grouped GEMM is one launch whatever EP is,
    // and so is Megatron's where `--expert-gemms grouped` says it runs one.
    let base = [
        &DEEPSEEK_V3_AT_DEEPSEEK_S_BATCH[..],
        &[
            "--pp",
            "8",
            "--microbatch-size",
            "1",
            "--recompute",
            "selective",
        ],
    ]
    .concat();
    let warnings = |extra: &[&str]| explain_warnings(&[&base[..], extra].concat());
    let launches = |w: &[String]| {
        w.iter()
            .find(|w| w.contains("launches a GEMM per expert"))
            .cloned()
    };
    let all = warnings(&["--tp", "8", "--ep", "1"]);
    let said = launches(&all).unwrap_or_else(|| panic!("{all:?}"));
    assert!(
        said.contains("each of the 256 experts on a GPU") && said.contains("raise EP"),
        "{said}"
    );
    let spread = warnings(&["--tp", "2", "--ep", "8"]);
    assert!(launches(&spread).is_none(), "{spread:?}");
    let grouped = warnings(&["--tp", "8", "--ep", "1", "--framework", "fsdp"]);
    assert!(launches(&grouped).is_none(), "{grouped:?}");
    // Megatron told that its experts launch as one grouped GEMM (moe_use_grouped_tensor).
    let told = warnings(&["--tp", "8", "--ep", "1", "--expert-gemms", "grouped"]);
    assert!(launches(&told).is_none(), "{told:?}");
}

/// Issue 31, item 12: `--zero 3 --pp 2` was ranked and `--emit deepspeed` wrote `stage: 3`
/// with a pipeline; pinning both is a usage error naming both flags.
#[test]
fn r31_12_zero_3_pinned_with_a_pipeline_is_a_usage_error() {
    for extra in [&[][..], &["--emit", "deepspeed"][..]] {
        let args = [
            &[
                "recommend",
                "--model",
                "70b",
                "--gpus",
                "64",
                "--zero",
                "3",
                "--pp",
                "2",
            ][..],
            extra,
        ]
        .concat();
        let out = tuner().args(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("--zero with --pp = 3 with 2"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 31, item 12 refused `--emit megatron` for 126 layers priced with one fewer on the
/// first and last of 8 stages x 8 virtual stages, as a split Megatron-LM could not express.
/// Megatron-Core splits so under `--account-for-embedding-in-pipeline-split` and
/// `--account-for-loss-in-pipeline-split` (128 counted layers, 2 a chunk): the binary writes
/// the config, and torchtitan's TOML writes the same layout.
#[test]
fn r31_12_emit_megatron_of_an_uneven_interleaved_split_counts_the_embedding_and_loss() {
    let args = [
        "explain",
        "--model",
        "405b",
        "--gpus",
        "1024",
        "--tp",
        "8",
        "--pp",
        "8",
        "--dp",
        "8",
        "--cp",
        "2",
        "--virtual-stages",
        "8",
        "--emit",
        "megatron",
    ];
    let megatron = stdout_of(&args);
    assert!(
        megatron.contains("--num-layers-per-virtual-pipeline-stage 2")
            && megatron.contains(
                "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
            ),
        "{megatron}"
    );
    let titan = stdout_of(&[&args[..args.len() - 1], &["torchtitan-0.2"]].concat());
    assert!(titan.contains("pipeline_parallel_degree = 8"), "{titan}");
}

#[test]
fn deepseek_v3_s_own_layout_explains_and_a_split_that_cannot_hold_is_named() {
    // 61 layers on 16 stages: refused before; the edge stages now take what 14 inner stages
    // of 4 leave (3 and 2). Pinned edges of 3 and 3 leave 55 layers, which 14 stages cannot
    // share evenly.
    let layout = [
        "--tp",
        "1",
        "--pp",
        "16",
        "--dp",
        "128",
        "--cp",
        "1",
        "--ep",
        "64",
        "--microbatch-size",
        "1",
        "--zero",
        "1",
        "--recompute",
        "selective",
        "--sequence-parallel",
        "false",
        "--precision",
        "fp8-blockwise",
        "--schedule",
        "dualpipe",
        "--moe-dispatch",
        "node-dedup",
    ];
    let base = [&["explain"][..], &DEEPSEEK_V3_AT_DEEPSEEK_S_BATCH, &layout].concat();
    let doc: Value =
        serde_json::from_str(&stdout_of(&[&base[..], &["--format", "json"]].concat())).unwrap();
    let mesh = &doc["meshes"][0];
    assert_eq!(mesh["schedule"], "dualpipe");
    assert_eq!(mesh["edge_stages"]["first"], 3);
    assert_eq!(mesh["edge_stages"]["last"], 2);
    // As validate prices the ISCA '25 runs: 19.9 s against DeepSeek's 19.9 s, the all-to-alls
    // of the 23 of 120 chunks DualPipe's first and last ranks run alone exposed.
    let step = mesh["step_time_s"].as_f64().unwrap();
    assert!((19.3..20.6).contains(&step), "{step}");
    let (code, err) = failure(
        &[
            &base[..],
            &["--first-stage-layers", "3", "--last-stage-layers", "3"],
        ]
        .concat(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--first-stage-layers/--last-stage-layers"),
        "{err}"
    );
}

#[test]
fn r31_pins_that_cannot_hold_together_are_usage_errors_naming_both_flags() {
    for (pins, says) in [
        (
            &["--virtual-stages", "2", "--pp", "1"][..],
            "--virtual-stages with --pp = 2 with 1",
        ),
        (
            &["--tp", "1", "--sequence-parallel", "true"][..],
            "--sequence-parallel with --tp = true with 1",
        ),
        (
            &["--seq-len", "1", "--cp", "32"][..],
            "--cp with --seq-len = 32 with 1",
        ),
    ] {
        let args = [&["recommend", "--model", "70b", "--gpus", "64"][..], pins].concat();
        let (code, err) = failure(&args);
        assert_eq!(code, 2, "{pins:?}: {err}");
        assert!(err.contains(says), "{pins:?}: {err}");
    }
}

/// Issue 30: stdout holds the data only; `explain` and `compare` printed their layouts'
/// warnings there.
#[test]
fn r30_explain_and_compare_say_their_warnings_on_stderr() {
    let job = ["--model", "70b", "--gpus", "64"];
    let (out, err) = outputs_of(
        &[
            &["explain"][..],
            &job,
            &["--tp", "2", "--pp", "4", "--cp", "2"],
        ]
        .concat(),
    );
    assert!(!out.contains("CP=2 is priced"), "{out}");
    assert!(err.contains("tuner: warning: CP=2 is priced"), "{err}");
    let (out, err) = outputs_of(
        &[
            &["compare"][..],
            &job,
            &["--a", "tp=8,pp=1,dp=8", "--b", "tp=2,pp=4,dp=4,cp=2"],
        ]
        .concat(),
    );
    assert!(!out.contains("warning"), "{out}");
    let warned: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].starts_with("tuner: warning: B: CP=2 is priced"),
        "{err}"
    );
}

/// Issue 31: text from a reply or a file (a node name, a snapshot's source) reached the
/// terminal with its escape sequences raw, so a `hostname` of `n\e[31mX` turned the user's
/// terminal red. Tables, notes and errors show them escaped; the files keep them as written.
#[test]
fn r31_text_from_files_reaches_the_terminal_escaped() {
    let seed = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/measurement_files/snapshot.json"
    );
    let mut snap: Value = serde_json::from_str(&std::fs::read_to_string(seed).unwrap()).unwrap();
    snap["source"] = "prom\u{1b}]0;owned\u{7} \u{1b}[2J".into();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    std::fs::write(&path, snap.to_string()).unwrap();
    let (table, notes) = outputs_of(&["fit", "--measurements", path.to_str().unwrap()]);
    assert!(
        table.contains("(snapshot of prom\\u{1b}]0;owned\\u{7} \\u{1b}[2J)"),
        "{table}"
    );
    assert!(!table.contains('\u{1b}') && !notes.contains('\u{1b}'));
    // A JSON document escapes in its own syntax: it reads back as the file spelled it.
    let doc: Value = serde_json::from_str(&stdout_of(&[
        "fit",
        "--measurements",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    assert!(doc["sources"][0]
        .as_str()
        .unwrap()
        .contains("prom\u{1b}]0;owned\u{7} \u{1b}[2J"));
    snap["nodes"][0]["name"] = "n\u{1b}[31mX".into();
    snap["nodes"][0]["records"][0]["ranks"] = 0.into();
    std::fs::write(&path, snap.to_string()).unwrap();
    let err = stderr_of_failure(&["fit", "--measurements", path.to_str().unwrap()]);
    assert!(
        err.contains("node n\\u{1b}[31mX record 1: ranks 0") && !err.contains('\u{1b}'),
        "{err}"
    );
}

/// A node named with a newline (`n1\ntuner: note: ...`) printed a second note line that
/// looked like the tuner's own: each note is one line, its breaks escaped.
#[test]
fn a_name_with_a_newline_stays_inside_its_note() {
    let seed = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/measurement_files/snapshot.json"
    );
    let mut snap: Value = serde_json::from_str(&std::fs::read_to_string(seed).unwrap()).unwrap();
    let name = "n1\ntuner: note: every node healthy";
    let node = &mut snap["nodes"][0];
    node["name"] = name.into();
    let records = node["records"].as_array_mut().unwrap();
    for r in records.iter_mut() {
        r["node"] = name.into();
    }
    // The same point again, ten times slower: the conflict note names the node.
    let mut slower = records[0].clone();
    slower["time_s"] = (records[0]["time_s"].as_f64().unwrap() * 10.0).into();
    records.push(slower);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    std::fs::write(&path, snap.to_string()).unwrap();
    let (_, notes) = outputs_of(&["fit", "--measurements", path.to_str().unwrap()]);
    assert!(
        notes.contains("n1\\ntuner: note: every node healthy"),
        "{notes}"
    );
    assert!(
        notes
            .lines()
            .all(|l| l.starts_with("tuner: ") && !l.starts_with("tuner: note: every node")),
        "{notes}"
    );
}

/// Issue 31: a run id in two runs files, or one file given twice, was scored twice and
/// weighed double in the medians. The second is refused by file and id.
#[test]
fn r31_a_run_id_in_two_runs_files_is_refused() {
    let all = std::fs::read_to_string(RUNS).unwrap();
    let second = all.match_indices("\n- id: ").nth(1).unwrap().0;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    std::fs::write(&a, &all[..=second]).unwrap();
    std::fs::write(&b, &all[..=second]).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    stdout_of(&["validate", "--runs", a]);
    for (second, which) in [
        (a, "the file is given twice".into()),
        (b, format!("`{a}` has it")),
    ] {
        let err = stderr_of_failure(&["validate", "--runs", a, second]);
        assert!(
            err.contains(&format!(
                "{second}: runs[narayanan2021-t1-1.7B].id = narayanan2021-t1-1.7B: expected an \
                 id no earlier runs file has ({which})"
            )),
            "{err}"
        );
    }
}

/// microbench's name for the human form is taken too: one spelling works in both binaries.
#[test]
fn text_is_the_table_as_microbench_names_it() {
    let models = |format: &str| stdout_of(&["models", "--format", format]);
    assert_eq!(models("text"), models("table"));
}

/// A GB200 NVL72 rack is 18 trays of 4 GPUs on one 72-GPU NVLink fabric. On four racks
/// (288 GPUs) DeepSeek-V3's ranking reaches past a tray, TP x EP blocks of 8 to 32 with EP 8
/// or 16, and keeps every TP x CP block and expert-parallel group inside the rack: none of the
/// 40 best is warned as wider than the domain. A TP of 128 is, by name.
#[test]
fn nvl72_layouts_spread_tp_and_ep_over_trays_and_stay_in_the_rack() {
    let doc: Value = serde_json::from_str(&stdout_of(&[
        "recommend",
        "--model",
        "deepseek-v3",
        "--gpus",
        "288",
        "--cluster",
        "gb200-nvl72",
        "--top",
        "40",
        "--format",
        "json",
    ]))
    .unwrap();
    let meshes = doc["meshes"].as_array().unwrap();
    let knob = |m: &Value, k: &str| m[k].as_u64().unwrap();
    assert!(
        meshes
            .iter()
            .any(|m| knob(m, "tp") > 1 && knob(m, "tp") * knob(m, "ep") > 4),
        "no TP x EP block past a tray"
    );
    assert!(
        meshes.iter().any(|m| knob(m, "ep") >= 8),
        "no EP past a tray"
    );
    for m in meshes {
        // EP ranks sit ETP apart over the TP x CP x DP ranks (Megatron-Core's expert rank
        // order): an expert-parallel group spans EP x ETP neighbouring ranks.
        let etp = m["expert_tp"].as_u64().unwrap_or(knob(m, "tp"));
        let block = (knob(m, "tp") * knob(m, "cp")).max(knob(m, "ep") * etp);
        assert!(block <= 72, "rank {}: TP x CP x EP = {block}", m["rank"]);
        assert!(
            !m["warnings"].to_string().contains("wider than the 72-GPU"),
            "{m}"
        );
    }
    let (_, err) = outputs_of(
        &[
            &["explain"][..],
            &DEEPSEEK_V3_ON_256_GB200,
            &["--tp", "128", "--pp", "2", "--dp", "1"],
        ]
        .concat(),
    );
    assert!(
        err.contains("TP=128 is wider than the 72-GPU NVLink domain"),
        "{err}"
    );
}

/// A fabric run over two trays of one NVL72 rack, four ranks each (`nvlink_domains` 1), prices
/// the TP 8 collectives (all-reduce, and all-gather and reduce-scatter under sequence
/// parallelism) of a layout on gb200-nvl72: they span the two trays over NVLink. The
/// same run without the field, as an older file says it, is taken for a run across racks and
/// prices nothing inside the rack.
#[test]
fn a_fabric_run_inside_the_rack_prices_tp_across_its_trays() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, domains: Option<u32>| {
        let mut lines = String::new();
        // nccl-tests' bus bandwidth factors at 8 ranks: 2 x 7/8, and 7/8.
        let kinds = [
            ("all_reduce", 1.75),
            ("all_gather", 0.875),
            ("reduce_scatter", 0.875),
        ];
        for (kind, factor) in kinds {
            for i in 20..=30 {
                let bytes = 1u64 << i;
                let time_s = 20e-6 + bytes as f64 * factor / 700e9;
                let mut r = serde_json::json!({
                    "kind": kind, "backend": "nccl", "node": "t0",
                    "gpus": [0, 1, 2, 3, 0, 1, 2, 3], "scope": "inter_node", "ranks": 8,
                    "bytes": bytes, "dtype": "bf16", "time_s": time_s, "time_min_s": null,
                    "time_max_s": null, "iters": 20, "clock": "cuda_event",
                    "algbw": bytes as f64 / time_s, "busbw": bytes as f64 * factor / time_s,
                    "flops": null, "timestamp": null, "ranks_per_node": 4,
                    "nodes": ["t0", "t1"], "gpu_model": "NVIDIA GB200"
                });
                if let Some(d) = domains {
                    r["nvlink_domains"] = d.into();
                }
                lines.push_str(&format!("{r}\n"));
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, lines).unwrap();
        path.to_str().unwrap().to_string()
    };
    let tp_comm = |file: &str| {
        let doc: Value = serde_json::from_str(&stdout_of(&[
            "explain",
            "--model",
            "deepseek-v3",
            "--gpus",
            "288",
            "--cluster",
            "gb200-nvl72",
            "--tp",
            "8",
            "--pp",
            "9",
            "--dp",
            "4",
            "--measurements",
            file,
            "--format",
            "json",
        ]))
        .unwrap();
        doc["meshes"][0]["sources"]["tp_comm"].clone()
    };
    assert_eq!(tp_comm(&write("rack.jsonl", Some(1))), "measured");
    assert_eq!(tp_comm(&write("old.jsonl", None)), "nominal");
}

/// A runs file states sliding-window attention as Hugging Face's `config.json` does, and
/// validate prices the window: the Qwen3-30B-A3B EP 16 row with every other layer sliding over
/// 128 positions is faster than as published, by less than its attention. A run whose
/// `layer_types` list has the wrong length is not priced, and says why by field.
#[test]
fn a_runs_file_states_a_sliding_window() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/megatron-bridge-h100-moe.yaml"
    );
    let all = std::fs::read_to_string(file).unwrap();
    let second = all.match_indices("\n- id: ").nth(1).unwrap().0;
    let row = &all[..=second];
    let types: Vec<&str> = (0..48)
        .map(|i| ["sliding_attention", "full_attention"][i % 2])
        .collect();
    let windowed = row.replace(
        "moe: {experts: 128",
        &format!(
            "sliding_window: 128, layer_types: [{}], moe: {{experts: 128",
            types.join(", ")
        ),
    );
    assert_ne!(windowed, row);
    let dir = tempfile::tempdir().unwrap();
    let predicted = |text: &str| {
        validate_json(dir.path(), text)["runs"][0]["predicted_iteration_time_s"]
            .as_f64()
            .unwrap()
    };
    let (square, slid) = (predicted(row), predicted(&windowed));
    assert!(slid < square && slid > 0.9 * square, "{slid} vs {square}");

    let short = windowed.replace("[sliding_attention, full_attention, ", "[");
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, short).unwrap();
    // Validate goes on with the other runs and lists this one as not priced, with why.
    let out = stdout_of(&["validate", "--runs", path.to_str().unwrap()]);
    assert!(
        out.contains("not priced")
            && out.contains("layer_types = 46 entries: expected one per layer: 48"),
        "{out}"
    );
}

/// Uneven edge stages over virtual stages, as Megatron-Bridge's DeepSeek-V3 recipes lay them
/// out (61 layers on 4 ranks x 4 chunks, 16 a rank but 13 on the last): explain prices them
/// with the interleaved schedule's bubble, where they were refused as a plain pipeline's only,
/// and a chunk count past the smallest stage's layers is a usage error naming the flag.
#[test]
fn edge_stages_interleave_over_virtual_stages() {
    let layout = |v: &'static str| {
        [
            &["explain"][..],
            &DEEPSEEK_V3_ON_256_GB200,
            &[
                "--global-batch",
                "4096",
                "--tp",
                "1",
                "--pp",
                "4",
                "--dp",
                "64",
                "--ep",
                "64",
                "--first-stage-layers",
                "16",
                "--last-stage-layers",
                "13",
                "--microbatch-size",
                "1",
                "--virtual-stages",
                v,
            ],
        ]
        .concat()
    };
    let bubble = |v| {
        let doc: Value = serde_json::from_str(&stdout_of(
            &[&layout(v)[..], &["--format", "json"]].concat(),
        ))
        .unwrap();
        let mesh = &doc["meshes"][0];
        assert_eq!(mesh["edge_stages"]["first"], 16);
        assert_eq!(mesh["edge_stages"]["last"], 13);
        assert_eq!(mesh["virtual_stages"].as_u64(), Some(v.parse().unwrap()));
        mesh["bubble_fraction"].as_f64().unwrap()
    };
    // Four chunks a rank shrink the fill and drain to a quarter (64 microbatches either way).
    let (plain, interleaved) = (bubble("1"), bubble("4"));
    assert!(interleaved < 0.4 * plain, "{interleaved} vs {plain}");
    let (code, err) = failure(&layout("14"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--virtual-stages = 14 with --pp 4"), "{err}");
}

/// Megatron-Bridge's MoE recipes keep each expert whole under tensor parallelism
/// (`expert_tensor_parallel_size = 1`), so expert parallelism takes its ranks from TP x DP:
/// Qwen3-235B-A22B's H100 recipe runs EP 32 beside TP 2 and DP 16. A runs file states that
/// layout (with `layout.etp`, or leaving it to the recipe's rule, which `choices` names) and
/// explain prices it under `--etp 1`; `--etp` that does not divide `--tp` is a usage error.
#[test]
fn experts_fold_over_tensor_parallel_ranks() {
    let run = |etp: &str| {
        format!(
            "format: 1\nruns:\n- id: folded\n  group: g\n  source: \"Megatron-Bridge recipe shape, for a test\"\n  \
             model: {{name: q235, layers: 94, hidden: 4096, heads: 64, kv_heads: 4, head_dim: 128, ffn_hidden: 12288, ffn_act: swiglu, vocab: 151936, seq_len: 4096, tied_embeddings: false, moe: {{experts: 128, top_k: 8, expert_ffn_hidden: 1536}}}}\n  \
             cluster: {{gpu: h100-sxm, gpus: 256, gpus_per_node: 8, nics_per_node: 8, nic_gbps: 400}}\n  \
             layout: {{tp: 2, pp: 8, dp: 16, ep: 32, cp: 1, virtual_stages: 4, microbatch_size: 1, global_batch_size: 8192, zero_stage: 1, recompute: none, sequence_parallel: true, schedule: null{etp}}}\n  \
             observed: {{iteration_time_s: 100.0, tokens_per_s: null, tflops_per_gpu: null, tflops_kind: null, mfu: null}}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let priced = |text: String| validate_json(dir.path(), &text)["runs"][0].clone();
    let recipe = priced(run(""));
    assert!(
        recipe["choices"]["etp"]
            .as_str()
            .is_some_and(|c| c.starts_with("1 (the recipe's")),
        "{recipe}"
    );
    let stated = priced(run(", etp: 1"));
    assert!(stated["choices"]["etp"].is_null(), "{stated}");
    // Another source's run under Megatron-Core's default splits each expert over the TP pair,
    // which EP 32 beside DP 16 cannot: not priced, and why.
    let doc = validate_json(
        dir.path(),
        &run("").replace("Megatron-Bridge recipe shape", "a paper"),
    );
    let reason = doc["skipped"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("ep x etp dividing tp x cp x dp") && reason.contains("(--etp 1)"),
        "{reason}"
    );
    assert_eq!(
        recipe["predicted_iteration_time_s"],
        stated["predicted_iteration_time_s"]
    );

    // TP 2 x DP 16 on 32 GPUs, with `ep` expert-parallel ranks.
    let layout = |model: &'static str, ep: &'static str| {
        [
            "explain",
            "--model",
            model,
            "--gpus",
            "32",
            "--tp",
            "2",
            "--pp",
            "1",
            "--dp",
            "16",
            "--ep",
            ep,
            "--sequence-parallel",
            "true",
        ]
    };
    let mixtral = layout("8x7b", "8");
    let doc: Value = serde_json::from_str(&stdout_of(
        &[&mixtral[..], &["--etp", "1", "--format", "json"]].concat(),
    ))
    .unwrap();
    assert_eq!(doc["meshes"][0]["expert_tp"], 1);
    let (code, err) = failure(&[&mixtral[..], &["--etp", "3"]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--etp with --tp = 3 with 2"), "{err}");
    // EP 32 beside DP 16 needs the experts folded over the TP pair: explain folds them where
    // --etp is left out, and says why not where it is pinned to the pair.
    let wide = [&layout("deepseek-v3", "32")[..], &["--format", "json"]].concat();
    let doc: Value = serde_json::from_str(&stdout_of(&wide)).unwrap();
    assert_eq!(doc["meshes"][0]["expert_tp"], 1);
    let (code, err) = failure(&[&wide[..], &["--etp", "2"]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--ep with --tp, --cp, --dp and --etp = 32 with 2, 1, 16 and 2"),
        "{err}"
    );
}

/// `validate --format json` of a runs file with `text`, written into `dir`.
fn validate_json(dir: &std::path::Path, text: &str) -> Value {
    let path = dir.join("runs.yaml");
    std::fs::write(&path, text).unwrap();
    serde_json::from_str(&stdout_of(&[
        "validate",
        "--runs",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap()
}

/// Review findings on folded experts: expert gradients reduce over their own group even where
/// the dense one has a single rank (TP 8 DP 1 EP 2 with whole experts: 4 ranks hold each
/// expert), and torchtitan without EP splits its experts over TP as the dense weights, so
/// its memory matches Megatron's there.
#[test]
fn whole_experts_reduce_their_gradients_and_torchtitan_splits_them_without_ep() {
    let explain = |extra: &[&str]| -> Value {
        let args = [
            &[
                "explain", "--model", "8x7b", "--gpus", "8", "--tp", "8", "--pp", "1", "--dp", "1",
                "--format", "json",
            ][..],
            extra,
        ]
        .concat();
        serde_json::from_str(&stdout_of(&args)).unwrap()
    };
    let folded = explain(&["--ep", "2", "--etp", "1"]);
    let grad = folded["meshes"][0]["time_s"]["dp_grad_sync"]["time_s"]
        .as_f64()
        .unwrap();
    assert!(grad > 0.0, "{folded}");
    let weights = |framework: &str| {
        let doc = explain(&["--ep", "1", "--framework", framework]);
        assert!(doc["meshes"][0]["expert_tp"].is_null(), "{doc}");
        doc["meshes"][0]["memory_per_gpu_bytes"]["weights"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(weights("fsdp"), weights("megatron"));
}
