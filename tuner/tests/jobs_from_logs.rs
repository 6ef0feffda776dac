//! `tuner jobs-from-logs` on real logs (tests/data/logs, sources in its README): what each
//! reader reads from them, that no cut of any of them panics, that a complete log's run
//! parses and prices, and the binary end to end with its refusals.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use tuner::jobs::{self, Family, Job, Overrides};

fn logs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/logs")
}

fn log(name: &str) -> PathBuf {
    logs().join(name)
}

fn text(name: &str) -> String {
    jobs::read_log_file(&log(name)).expect("fixture reads").0
}

fn read(name: &str) -> Job {
    jobs::read_log(&text(name), name).unwrap_or_else(|e| panic!("{e}"))
}

fn value<T: Clone>(s: &Option<jobs::Stated<T>>) -> Option<T> {
    s.as_ref().map(|s| s.value.clone())
}

const MEGATRON_DEEPSPEED: &str = "megatron-deepspeed-gpt-125m-8gpu.log";
const TORCHTITAN: &str = "torchtitan-qwen3-14b-8gpu.log";

#[test]
fn megatron_deepspeed_log_with_eight_ranks_interleaved() {
    let job = read(MEGATRON_DEEPSPEED);
    assert_eq!(job.family, Family::MegatronDeepspeed);
    let m = &job.model;
    assert_eq!(
        [
            &m.layers,
            &m.hidden,
            &m.heads,
            &m.ffn_hidden,
            &m.vocab,
            &m.seq_len
        ]
        .map(value),
        [
            Some(12),
            Some(768),
            Some(12),
            Some(3072),
            Some(50304),
            Some(2048)
        ]
    );
    let l = &job.layout;
    assert_eq!(
        [&l.tp, &l.pp, &l.microbatch_size, &l.global_batch_size].map(value),
        [Some(1), Some(1), Some(4), Some(256)]
    );
    assert_eq!(value(&job.cluster.gpus), Some(8));
    // The launcher's `num_local_procs=8`.
    assert_eq!(value(&job.cluster.gpus_per_node), Some(8));
    assert_eq!(value(&l.zero_stage), Some(0));
    // 47 iteration lines, every 10 iterations, the first 1001.5 ms.
    assert_eq!(job.steps.len(), 47);
    assert_eq!((job.steps[0].number, job.steps[0].value), (10, 1.0015));
    assert!(job.averaged);
    // Another rank's `Detected CUDA files, patching ldflags` sits inside the block and the
    // arguments still read; the ANSI-coloured op report around it is no argument.
    assert!(job
        .found()
        .iter()
        .any(|f| f.starts_with("model.layers = 12 (line ")));
}

#[test]
fn megatron_lm_log_cut_mid_line() {
    let job = read("megatron-lm-mixtral-8x7b-16xh100-cut.log");
    assert_eq!(job.family, Family::MegatronLm);
    assert_eq!(
        job.steps.iter().map(|s| s.number).collect::<Vec<_>>(),
        [43, 44, 45]
    );
    assert_eq!(job.steps[0].tflops, Some(239.8));
    assert_eq!(value(&job.layout.global_batch_size), Some(128));
    assert_eq!(
        job.skipped,
        ["line 4: iteration 46 without its time (the line is cut short)"]
    );
}

#[test]
fn megatron_bridge_iteration_lines_read_as_megatron() {
    let job = read("megatron-bridge-nemotron-super-lora-cut.log");
    // Milliseconds as printed: 26813.0, 29511.9, 29793.2.
    let ms: Vec<f64> = job
        .steps
        .iter()
        .map(|s| (s.value * 1e4).round() / 10.0)
        .collect();
    assert_eq!(ms, [26813.0, 29511.9, 29793.2]);
}

#[test]
fn nemo2_log_with_its_resolved_arguments_and_a_negative_step_time() {
    let job = read("nemo2-llama3-toy-1gpu.log");
    assert_eq!(job.family, Family::Nemo);
    assert_eq!(value(&job.model.name).as_deref(), Some("Llama3Config8B"));
    assert_eq!(
        [
            &job.model.layers,
            &job.model.hidden,
            &job.model.heads,
            &job.model.vocab
        ]
        .map(value),
        [Some(1), Some(256), Some(32), Some(50304)]
    );
    assert_eq!(value(&job.layout.global_batch_size), Some(64));
    assert_eq!(value(&job.cluster.gpus), Some(1));
    // Iteration 9 logs `train_step_timing in s: -12.71`.
    assert_eq!(job.steps.len(), 19);
    assert!(job.skipped[0].contains("step 9 has train_step_timing in s -12.71"));
}

#[test]
fn bionemo_nemo2_lines_cut_mid_line() {
    let job = read("bionemo-esm2-nemo2-cut.log");
    assert_eq!(job.steps.len(), 6);
    assert_eq!((job.steps[0].number, job.steps[0].value), (120, 0.03146));
    assert_eq!(job.skipped.len(), 1);
}

#[test]
fn torchtitan_time_from_tps_batch_and_gpus() {
    let job = read(TORCHTITAN);
    assert_eq!(job.family, Family::Torchtitan);
    assert_eq!(value(&job.cluster.gpu).as_deref(), Some("b200"));
    assert_eq!(value(&job.cluster.gpus), Some(8));
    assert_eq!(value(&job.layout.global_batch_size), Some(1280));
    assert_eq!(value(&job.model.seq_len), Some(128));
    assert_eq!(value(&job.layout.torch_compile), Some(true));
    let r = jobs::to_run(&job, TORCHTITAN, "tt", &Overrides::default()).unwrap();
    // Steps 3-10, tps 9,919 to 10,468: 1280 x 128 / (tps x 8) is 1.96 s to 2.06 s, the
    // timestamps' 1.96 s to 2.07 s apart.
    let t = r.run.observed.iteration_time_s.unwrap();
    assert!((1.95..2.07).contains(&t), "{t}");
    assert!(r.run.notes.contains("derived from tps"), "{}", r.run.notes);
}

#[test]
fn torchtitan_ranks_repeating_each_step_and_no_batch() {
    let job = read("torchtitan-moe-8-ranks-duplicated-cut.log");
    assert_eq!(job.steps.len(), 8);
    let r = jobs::to_run(&job, "moe.log", "moe", &Overrides::default()).unwrap();
    assert_eq!(r.run.observed.iteration_time_s, None);
    assert!(r.run.notes.contains("6 repeated lines"), "{}", r.run.notes);
    assert!(
        r.run.notes.contains("pass --global-batch"),
        "{}",
        r.run.notes
    );
    assert!(r.missing.contains(&"observed.iteration_time_s"));
    let given = Overrides {
        gpus: Some(8),
        global_batch: Some(8),
        ..Overrides::default()
    };
    // Without the sequence length tokens per second still make no step time.
    let r = jobs::to_run(&job, "moe.log", "moe", &given).unwrap();
    assert_eq!(r.run.observed.iteration_time_s, None);
}

#[test]
fn deepspeed_engine_config_and_throughput_timer() {
    let job = read("deepspeed-chat-dpo-opt-350m-8gpu.log");
    assert_eq!(job.family, Family::Deepspeed);
    assert_eq!(value(&job.layout.global_batch_size), Some(32));
    assert_eq!(value(&job.layout.microbatch_size), Some(2));
    assert_eq!(value(&job.layout.dp), Some(8));
    assert_eq!(job.steps.len(), 20);
    let r = jobs::to_run(&job, "dpo.log", "dpo", &Overrides::default()).unwrap();
    // 32 / ~46.7 samples/s; the timestamps put steps 10 and 20 6.90 s apart.
    let t = r.run.observed.iteration_time_s.unwrap();
    assert!((0.66..0.71).contains(&t), "{t}");
}

#[test]
fn a_config_without_iteration_lines_is_refused_by_name() {
    let e = jobs::read_log(&text("megatron-bridge-config-no-iterations.log"), "cfg.log")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cfg.log: no iteration lines (expected Megatron-LM"),
        "{e}"
    );
}

/// Every cut of every real log, at every 97th byte, reads or is refused without a panic;
/// the cut is decoded as the binary reads a file (a cut inside a character reads as U+FFFD).
/// The cuts are shared among the machine's cores: there are some 7,000 of them.
#[test]
fn no_cut_of_any_log_panics() {
    let mut cuts: Vec<(std::sync::Arc<Vec<u8>>, usize)> = Vec::new();
    for entry in std::fs::read_dir(logs()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let bytes = std::sync::Arc::new(std::fs::read(&path).unwrap());
        for end in (0..bytes.len()).step_by(97).chain([bytes.len()]) {
            cuts.push((bytes.clone(), end));
        }
    }
    assert!(cuts.len() > 5000, "{}", cuts.len());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let cuts = &cuts;
    std::thread::scope(|scope| {
        for first in 0..threads {
            // Every n-th cut, so that each thread gets long and short ones alike.
            scope.spawn(move || {
                for (bytes, end) in cuts.iter().skip(first).step_by(threads) {
                    read_cut(&String::from_utf8_lossy(&bytes[..*end]));
                }
            });
        }
    });
}

fn read_cut(cut: &str) {
    let Ok(job) = jobs::read_log(cut, "cut.log") else {
        return;
    };
    let _ = jobs::to_run(&job, "cut.log", "cut", &Overrides::default());
    let full = Overrides {
        gpu: Some("h100-sxm".into()),
        gpus: value(&job.cluster.gpus).or(Some(8)),
        global_batch: value(&job.layout.global_batch_size).or(Some(8)),
        warmup: Some(0),
        ..Overrides::default()
    };
    let _ = jobs::to_run(&job, "cut.log", "cut", &full);
}

/// The run written for a complete log, filled in by flags, parses as format 1 and prices.
#[test]
fn a_complete_log_round_trips_through_validate() {
    let job = read(MEGATRON_DEEPSPEED);
    let o = Overrides {
        gpu: Some("a100-sxm-80gb".into()),
        nics_per_node: Some(8),
        nic_gbps: Some(200.0),
        ..Overrides::default()
    };
    let r = jobs::to_run(&job, MEGATRON_DEEPSPEED, "mds", &o).unwrap();
    assert!(r.missing.is_empty(), "{:?}", r.missing);
    let yaml = jobs::render(&[r.run]).unwrap();
    let file =
        tuner::validate::parse_runs(&yaml, "jobs.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(file.runs.len(), 1);
    let p = tuner::validate::predict(&file.runs[0], &tuner::catalog::NOMINAL).unwrap();
    assert!(
        p.predicted_iteration_time_s.is_finite() && p.predicted_iteration_time_s > 0.0,
        "{}",
        p.predicted_iteration_time_s
    );
}

fn tuner() -> Command {
    Command::cargo_bin("tuner").expect("tuner binary")
}

#[test]
fn cli_writes_yaml_to_stdout_and_notes_to_stderr() {
    let out = tuner()
        .args(["jobs-from-logs", "--gpu", "h100-sxm"])
        .arg(log(TORCHTITAN))
        .arg(log("nemo2-llama3-toy-1gpu.log"))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    // The log names a B200: --gpu h100-sxm contradicts it.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--gpu h100-sxm contradicts the log: line 27 states b200"),
        "{stderr}"
    );

    let out = tuner()
        .args([
            "jobs-from-logs",
            "--nics-per-node",
            "8",
            "--nic-gbps",
            "400",
        ])
        .arg(log(TORCHTITAN))
        .arg(log("nemo2-llama3-toy-1gpu.log"))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("# meshfit runs, format 1."), "{stdout}");
    assert!(
        stdout.contains("format: 1\nruns:\n- id: torchtitan-qwen3-14b-8gpu\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("group: jobs-nemo2-llama3-toy-1gpu"),
        "{stdout}"
    );
    assert!(
        stderr.lines().all(|l| l.starts_with("tuner: note: ")),
        "{stderr}"
    );
    assert!(stderr.contains("gpu (pass --gpu)"), "{stderr}");
}

#[test]
fn cli_writes_a_file_that_validate_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jobs.yaml");
    tuner()
        .args([
            "jobs-from-logs",
            "--gpu",
            "a100-sxm-80gb",
            "--nics-per-node",
            "8",
        ])
        .args(["--nic-gbps", "200", "--group", "cluster-a", "-o"])
        .arg(&out)
        .arg(log(MEGATRON_DEEPSPEED))
        .assert()
        .success()
        .stdout("");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("group: cluster-a"), "{text}");
    tuner()
        .args(["validate", "--format", "json", "--runs"])
        .arg(&out)
        .assert()
        .success();
}

#[test]
fn cli_refuses_a_log_without_iteration_lines_and_unknown_flags() {
    let cfg = log("megatron-bridge-config-no-iterations.log");
    let out = tuner().arg("jobs-from-logs").arg(&cfg).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: no iteration lines (expected", cfg.display())),
        "{stderr}"
    );

    let out = tuner()
        .args(["jobs-from-logs", "--gpu", "h100"])
        .arg(log(TORCHTITAN))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--gpu = h100: expected a catalog GPU id: a100-sxm-40gb"),
        "{stderr}"
    );

    let out = tuner()
        .args(["jobs-from-logs", "--warmup", "10"])
        .arg(log(TORCHTITAN))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("--warmup 10 drops all 10"));

    let out = tuner()
        .args(["jobs-from-logs", "/nonexistent/train.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("/nonexistent/train.log"));
}
