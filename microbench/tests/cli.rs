//! The `microbench` binary end to end: the sim backend, nccl-tests import of the real logs,
//! and the one-line error on this machine, which has no NVIDIA driver (issue 3).

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const LOGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/nccl-tests");

fn microbench(args: &[&str]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("microbench")
        .unwrap()
        .args(args)
        .assert()
}

/// `microbench --backend sim --profile <profile>` followed by `args`.
fn sim(profile: &str, args: &[&str]) -> assert_cmd::assert::Assert {
    microbench(&[&["--backend", "sim", "--profile", profile][..], args].concat())
}

fn stdout(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(a.get_output().stdout.clone()).unwrap()
}

fn stderr(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(a.get_output().stderr.clone()).unwrap()
}

fn log(prefix: &str) -> PathBuf {
    std::fs::read_dir(LOGS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap()
}

fn no_driver() -> bool {
    !Path::new("/dev/nvidiactl").exists()
}

#[test]
fn without_a_driver_every_gpu_command_says_so_in_one_line() {
    if !no_driver() {
        return;
    }
    for args in [
        &["topo"][..],
        &["all-reduce"],
        &["gemm"],
        &["copy"],
        &["calibrate"],
    ] {
        let a = microbench(args).failure().code(1);
        let err = stderr(&a);
        assert!(
            err.starts_with("microbench: no NVIDIA driver: "),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn sim_sweep_prints_nccl_tests_tables_and_json_records() {
    let a = sim(
        "dgx-a100",
        &["all-reduce", "-b", "1M", "-e", "4M", "-g", "4"],
    )
    .success();
    let text = stdout(&a);
    assert!(
        text.contains(
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        ),
        "{text}"
    );
    assert!(
        text.contains("     1048576        262144     float     sum      -1"),
        "{text}"
    );
    // The printed table reads back as the same run.
    let parsed = record::nccl_tests::parse(&text).unwrap();
    assert_eq!(parsed.records.len(), 6);
    assert!(parsed
        .records
        .iter()
        .all(|r| r.backend == record::Backend::Sim && r.group.ranks == 4));

    let a = sim(
        "dgx-a100",
        &["--json", "all-gather", "-b", "1M", "-e", "4M"],
    )
    .success();
    let records = record::read_json_lines(&stdout(&a)).unwrap();
    assert_eq!(records.len(), 6);
    assert!(records
        .iter()
        .all(|r| r.backend == record::Backend::Sim && r.group.gpus.len() == 8));
}

#[test]
fn sim_gemm_copy_and_topo() {
    let a = sim(
        "hgx-h200",
        &["gemm", "--shape", "8192x8192x8192", "--gpu", "0"],
    )
    .success();
    assert!(
        stdout(&a).contains("    bf16      tn       8192       8192       8192"),
        "{}",
        stdout(&a)
    );
    let a = sim(
        "hgx-h200",
        &[
            "--json", "copy", "--path", "hbm,h2d", "--gpu", "1", "-b", "1G", "-e", "1G",
        ],
    )
    .success();
    assert_eq!(record::read_json_lines(&stdout(&a)).unwrap().len(), 2);
    let a = sim("dgx-h100", &["--fault", "nvlink-degraded:gpu=3", "topo"]).success();
    assert!(
        stdout(&a).contains("GPU3\tNV9\tNV9\tNV9\t X \tNV9"),
        "{}",
        stdout(&a)
    );
    let a = sim("dgx-h100", &["--json", "topo"]).success();
    let topo: serde_json::Value = serde_json::from_str(&stdout(&a)).unwrap();
    assert_eq!(topo["schema_version"], 1);
    assert_eq!(topo["links"][0][1], "NV18");
    assert_eq!(topo["nvswitch"], true);
}

#[test]
fn unsupported_points_are_skipped_with_exit_code_3() {
    let a = sim(
        "dgx-a100",
        &[
            "gemm",
            "--dtype",
            "bf16,fp8",
            "--shape",
            "1024x1024x1024",
            "--gpu",
            "0",
        ],
    )
    .code(3);
    assert!(
        stderr(&a).contains(
            "skipped gemm fp8_e4m3 tn 1024x1024x1024 on GPU 0: fp8_e4m3 GEMM is not supported"
        ),
        "{}",
        stderr(&a)
    );
    assert!(stdout(&a).contains("bf16"));
}

/// Issue 10: `--layout` runs each GEMM in the layouts asked for, records carry theirs, and
/// fp8 outside `tn` is skipped with the reason, not quietly run as `tn`.
#[test]
fn gemm_layouts_are_recorded_and_fp8_runs_only_tn() {
    let a = sim(
        "dgx-h100",
        &[
            "--json",
            "gemm",
            "--dtype",
            "bf16,fp8",
            "--layout",
            "tn,nt",
            "--shape",
            "1024x512x256",
            "--gpu",
            "0",
        ],
    )
    .code(3);
    let records = record::read_json_lines(&stdout(&a)).unwrap();
    let got: Vec<(String, Option<record::GemmLayout>)> = records
        .iter()
        .map(|r| (r.dtype.to_string(), r.detail.layout))
        .collect();
    use record::GemmLayout::{Nt, Tn};
    assert_eq!(
        got,
        [
            ("bf16".to_string(), Some(Tn)),
            ("bf16".to_string(), Some(Nt)),
            ("fp8_e4m3".to_string(), Some(Tn)),
        ]
    );
    assert!(
        stderr(&a).contains(
            "skipped gemm fp8_e4m3 nt 1024x512x256 on GPU 0: fp8_e4m3 GEMM in layout nt is \
             not supported on GPU 0 (cuBLASLt's fp8_e4m3 kernels on Ada and Hopper take only \
             layout tn)"
        ),
        "{}",
        stderr(&a)
    );
}

#[test]
fn bad_values_name_the_field_and_what_is_allowed() {
    // Exit 2: the command line is wrong wherever it runs. Exit 1: the node (here the sim
    // profile) lacks what was asked for; the same line works on a larger node.
    let cases: &[(&[&str], &str, i32)] = &[
        (&["--backend", "sim", "topo"], "--backend sim needs --profile: one of dgx-h100, hgx-h200, gb200-nvl72, dgx-a100, l40s-pcie, dgx1-v100", 2),
        (&["--backend", "sim", "--profile", "dgx-z", "topo"], "--profile `dgx-z`: one of dgx-h100", 2),
        (&["--backend", "sim", "--profile", "dgx-h100", "--fault", "nvlink-degraded:gpu=8", "topo"], "--fault `gpu=8`: the profile has 8 gpus (0-7)", 2),
        (&["--backend", "sim", "--profile", "dgx-h100", "all-reduce", "-g", "16"], "all_reduce -g 16 needs 16 GPUs; this node has 8", 1),
        (&["--backend", "sim", "--profile", "dgx-h100", "all-reduce", "-b", "1G", "-e", "1M"], "-b/-e `1073741824..1048576`: 0 < minBytes <= maxBytes", 2),
        (&["--fault", "slow-gpu:gpu=1", "topo"], "slow-gpu needs factor=F", 2),
        (&["all-reduce", "-d", "complex"], "dtype `complex`: expected one of bf16", 2),
                (&["--profile", "dgx-h100", "topo"], "--profile, --fault, --busy and --sim-* apply to --backend sim only", 2),
        (&["--backend", "sim", "--profile", "dgx-h100", "copy", "--path", "nvme"], "--path `nvme`: one of p2p, p2p-bidir, h2d, d2h, hbm", 2),
        (&["--nodes", "2", "all-reduce"], "--nodes 2 applies to --backend sim only: for a real multi-node sweep, start microbench under a launcher", 2),
        (&["--backend", "sim", "--profile", "dgx-a100", "--nodes", "0", "all-reduce"], "invalid value '0' for '--nodes <NODES>': 0 is not in 1..=16384", 2),
        // Issue 31, item 13: this aborted on a 137 GB allocation.
        (&["--backend", "sim", "--profile", "dgx-a100", "--nodes", "4294967295", "all-reduce"], "invalid value '4294967295' for '--nodes <NODES>': 4294967295 is not in 1..=16384", 2),
        (&["--backend", "sim", "--profile", "dgx-a100", "--fault", "fabric-slow:factor=2", "all-reduce"], "factor `2` must be in (0, 1]", 2),
    ];
    for (args, want, code) in cases {
        let err = stderr(&microbench(args).code(*code));
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn import_reads_every_real_log() {
    for (prefix, extra, records) in [
        ("nccl-tests-194_", &[][..], 5),
        ("nccl-tests-214_", &[][..], 10),
        (
            "nccl-tests-44_",
            &["--collective", "all_reduce", "--scope", "intra_node"][..],
            26,
        ),
        (
            "nccl-tests-176_",
            &[
                "--collective",
                "all_reduce",
                "--ranks",
                "128",
                "--scope",
                "inter_node",
            ][..],
            12,
        ),
        ("nccl-258_", &[][..], 8),
    ] {
        let path = log(prefix);
        let mut args = vec!["--json", "import", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let a = microbench(&args).success();
        assert_eq!(
            record::read_json_lines(&stdout(&a)).unwrap().len(),
            records,
            "{prefix}"
        );
    }
    // Issue 37's only row is one nccl-tests itself failed ("Out of bounds values : 2 FAILED"):
    // nothing to import, and the reason is given.
    let a = microbench(&["import", log("nccl-tests-37_").to_str().unwrap()]).failure();
    assert!(
        stderr(&a).contains("nccl-tests marked 1 row(s) wrong"),
        "{}",
        stderr(&a)
    );
    // The truncated row of issue 194 is named on stderr; the table is printed back.
    let a = microbench(&["import", log("nccl-tests-194_").to_str().unwrap()]).success();
    assert!(
        stderr(&a).contains("line 17: row cut short; kept its out-of-place columns"),
        "{}",
        stderr(&a)
    );
    assert!(
        stdout(&a).contains(
            "  1073741824     268435456     float     sum      -1   9306.7  115.37  115.37    N/A"
        ),
        "{}",
        stdout(&a)
    );
}

/// The tables clusters and papers publish: vTrain's all-reduce lookup table (rank count and
/// collective from its file name), a GEMM sweep and attention timings as CSV; a unit the
/// reader cannot read refuses the file by line.
#[test]
fn import_reads_csv_tables() {
    let lut = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/vtrain-luts/a100/AR_GPU8_1M_1024M_LUT"
    );
    let a = microbench(&["--json", "import", lut]).success();
    let records = record::read_json_lines(&stdout(&a)).unwrap();
    assert_eq!(records.len(), 2048);
    assert!(records
        .iter()
        .all(|r| r.kind == record::Kind::AllReduce && r.group.ranks == 8));
    assert!(
        stderr(&a).contains("8 ranks read from the file name"),
        "{}",
        stderr(&a)
    );

    let dir = tempfile::tempdir().unwrap();
    let gemm = dir.path().join("gemm.csv");
    std::fs::write(
        &gemm,
        "# gpu: NVIDIA H100 80GB HBM3\nm,n,k,dtype,layout,TFLOP/s\n8192,8192,8192,bf16,tn,720\n8192,8192,8192,bf16,nt,650\n",
    )
    .unwrap();
    let attention = dir.path().join("attention.csv");
    std::fs::write(
        &attention,
        "batch,seq,heads,head_dim,causal,pass,time(ms)\n2,8192,16,128,true,fwd,1.7\n",
    )
    .unwrap();
    let a = microbench(&[
        "--json",
        "import",
        gemm.to_str().unwrap(),
        attention.to_str().unwrap(),
    ])
    .success();
    let records = record::read_json_lines(&stdout(&a)).unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records[1].detail.layout, Some(record::GemmLayout::Nt));
    assert!((records[0].flops.unwrap() / 720e12 - 1.0).abs() < 1e-9);
    assert_eq!(
        records[0].detail.gpu_model.as_deref(),
        Some("NVIDIA H100 80GB HBM3")
    );
    assert_eq!(records[2].kind, record::Kind::Attention);
    let a = microbench(&["import", attention.to_str().unwrap()]).success();
    assert!(stdout(&a).contains("head_dim"), "{}", stdout(&a));

    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "m,n,k,dtype,time(fortnights)\n1,2,3,bf16,4\n").unwrap();
    let a = microbench(&["import", bad.to_str().unwrap()]).code(1);
    assert!(
        stderr(&a).contains("bad.csv: line 1: column `time(fortnights)`"),
        "{}",
        stderr(&a)
    );
}

/// A log's own text reaches the terminal in its errors and notes: an escape sequence in a
/// column name is shown, not acted on.
#[test]
fn import_shows_escapes_from_a_log_instead_of_sending_them() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "m,n,k,dtype,time\u{1b}[2J\n1,2,3,bf16,4\n").unwrap();
    let a = microbench(&["import", bad.to_str().unwrap()]).code(1);
    let err = stderr(&a);
    assert!(
        err.contains("column `time\\u{1b}[2J`") && !err.contains('\u{1b}'),
        "{err}"
    );
}

/// A busbw of 99999 on one row of a real log failed the file as "a root >= 0 is broadcast or
/// reduce"; it is that row's busbw that disagrees with its algbw, and the row is kept by it.
#[test]
fn an_absurd_busbw_is_named_as_the_busbw() {
    let text = std::fs::read_to_string(log("nccl-tests-194_")).unwrap();
    let mut edited = Vec::new();
    let mut done = false;
    for line in text.lines() {
        let mut cols: Vec<&str> = line.split_whitespace().collect();
        if !done && cols.first() == Some(&"1073741824") {
            cols[7] = "99999";
            edited.push(cols.join("  "));
            done = true;
        } else {
            edited.push(line.to_string());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busbw.txt");
    std::fs::write(&path, edited.join("\n")).unwrap();
    let a = microbench(&["--json", "import", path.to_str().unwrap()]).success();
    let err = stderr(&a);
    assert!(
        err.contains("printed busbw 99999 GB/s, but algbw x 1.0000 is 115.373 GB/s")
            && !err.contains("root"),
        "{err}"
    );
    assert_eq!(record::read_json_lines(&stdout(&a)).unwrap().len(), 5);
}

#[test]
fn import_without_the_collective_asks_for_it() {
    let a = microbench(&["import", log("nccl-tests-44_").to_str().unwrap()]).code(1);
    assert!(
        stderr(&a).contains("table at line 3: the log does not name its collective"),
        "{}",
        stderr(&a)
    );
    let a = microbench(&["import", "/nonexistent.txt"]).code(1);
    assert!(
        stderr(&a).starts_with("microbench: reading /nonexistent.txt: "),
        "{}",
        stderr(&a)
    );
}

/// Issue 10: the agent reads `calibrate --json` as it streams. A run that dies midway has
/// already printed every record of the points before, one JSON line each; the sim process
/// table shows the run on every GPU while it lives and not after.
#[test]
fn calibrate_streams_records_and_a_panic_keeps_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("processes");
    let a = sim(
        "dgx-h100",
        &[
            "--fault",
            "panic:after=3",
            "--sim-processes",
            table.to_str().unwrap(),
            "calibrate",
            "--json",
            "-b",
            "1M",
            "-e",
            "1M",
        ],
    )
    .failure()
    .code(101);
    let lines: Vec<record::Record> = stdout(&a)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Three collective points: out-of-place and in-place records each.
    assert_eq!(lines.len(), 6, "{}", stdout(&a));
    assert!(lines.iter().all(|r| r.backend == record::Backend::Sim));
    assert!(
        stderr(&a).starts_with("microbench: internal error: sim fault panic:after=3 at point 3"),
        "{}",
        stderr(&a)
    );
    // The process is gone, so it holds no GPU.
    assert!(microbench::sim::ProcessTable::new(&table, 0)
        .read()
        .is_empty());
}

#[test]
fn issue_11_exit_codes_tell_usage_from_runtime_failures() {
    let a = microbench(&["all-reduce", "--bogus"]).code(2);
    assert!(stderr(&a).contains("--bogus"), "{}", stderr(&a));
    let a = sim("dgx-h100", &["all-reduce", "-b", "1G", "-e", "1M"]).code(2);
    assert!(stderr(&a).contains("-b/-e"), "{}", stderr(&a));
    let a = sim("dgx-h100", &["--launcher", "none", "fabric"]).code(2);
    assert!(
        stderr(&a).contains("fabric runs across a multi-node job"),
        "{}",
        stderr(&a)
    );
    let a = microbench(&["import", "/nonexistent.txt"]).code(1);
    assert!(stderr(&a).contains("No such file"), "{}", stderr(&a));
    // One file of two read: its records are printed and the run says it was partial.
    let good = log("nccl-tests-214_");
    let a = microbench(&[
        "import",
        "--json",
        good.to_str().unwrap(),
        "/nonexistent.txt",
    ])
    .code(3);
    assert_eq!(record::read_json_lines(&stdout(&a)).unwrap().len(), 10);
    let help = stdout(&microbench(&["--help"]).success());
    for line in [
        "Exit status:",
        "1  runtime failure",
        "2  usage error",
        "3  partial",
    ] {
        assert!(help.contains(line), "{help}");
    }
}

#[test]
fn issue_11_completions_and_man_page_list_the_subcommands() {
    let bash = stdout(&microbench(&["completions", "bash"]).success());
    assert!(bash.contains("complete -F _microbench"), "{bash}");
    for sub in [
        "topo",
        "all-reduce",
        "send-recv",
        "gemm",
        "import",
        "fabric",
        "completions",
        "man",
    ] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        assert!(stdout(&microbench(&["completions", shell]).success()).contains("import"));
    }
    let man = stdout(&microbench(&["man"]).success());
    assert!(man.contains(".TH microbench 1"), "{man}");
    assert!(man.contains(".SH NAME\nmicrobench \\-"), "{man}");
    assert!(man.contains(".SH SUBCOMMANDS"), "{man}");
    for sub in [
        "microbench\\-all\\-reduce(1)",
        "microbench\\-import(1)",
        "microbench\\-man(1)",
    ] {
        assert!(man.contains(sub), "man page lacks {sub}");
    }
    // Every request is a man(7) macro; groff, where installed, reads it without a warning.
    for line in man.lines().filter(|l| l.starts_with('.')) {
        let request = line.split_whitespace().next().unwrap_or(line);
        assert!(
            [".TH", ".SH", ".SS", ".TP", ".IP", ".PP", ".RS", ".RE", ".ie", ".el", ".br", ".sp"]
                .contains(&request),
            "not a man(7) request: {line}"
        );
    }
    if let Ok(out) = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-Wbreak", "-z"])
        .write_stdin(man)
        .output()
    {
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    microbench(&["man", "--dir", dir.path().to_str().unwrap()]).success();
    let import = std::fs::read_to_string(dir.path().join("microbench-import.1")).unwrap();
    assert!(import.contains("\\-\\-collective"), "{import}");
}

/// Subcommands and `--collective` take `all-reduce` (canonical, in help) and `all_reduce`
/// (the records' and nccl-tests' spelling) alike.
#[test]
fn issue_11_collectives_take_both_spellings() {
    let log = log("nccl-tests-44_");
    let log = log.to_str().unwrap();
    let import = |name: &str| {
        stdout(
            &microbench(&[
                "import",
                log,
                "--collective",
                name,
                "--scope",
                "intra_node",
                "--json",
            ])
            .success(),
        )
    };
    let kebab = import("all-reduce");
    assert_eq!(record::read_json_lines(&kebab).unwrap().len(), 26);
    assert_eq!(import("all_reduce"), kebab);
    let sweep = |name: &str| {
        stdout(
            &sim(
                "dgx-h100",
                &["--json", name, "-b", "1M", "-e", "1M", "-g", "2"],
            )
            .success(),
        )
    };
    assert_eq!(sweep("reduce_scatter"), sweep("reduce-scatter"));
    let help = stdout(&microbench(&["import", "--help"]).success());
    assert!(
        help.contains(
            "[possible values: all-reduce, all-gather, reduce-scatter, all-to-all, send-recv]"
        ),
        "{help}"
    );
}

/// Issue 11: a job killed mid-sweep leaves a log cut in the middle of a row (the fixture is
/// the real log of nccl-tests issue #194 stopped inside its third row's in-place time).
/// The complete rows and the cut row's whole out-of-place columns are kept, with a warning
/// naming the line.
#[test]
fn issue_11_a_log_cut_mid_row_keeps_what_is_whole_and_names_the_line() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/logs/nccl-tests-194_killed-mid-row.txt"
    );
    let a = microbench(&["import", "--json", fixture]).success();
    let records = record::read_json_lines(&stdout(&a)).unwrap();
    let rows: Vec<(u64, bool)> = records.iter().map(|r| (r.bytes, r.in_place)).collect();
    assert_eq!(
        rows,
        vec![
            (1 << 30, false),
            (1 << 30, true),
            (2 << 30, false),
            (2 << 30, true),
            (4 << 30, false),
        ]
    );
    assert!((records[4].timing.time_s - 36943e-6).abs() < 1e-12);
    assert_eq!(
        stderr(&a),
        format!("microbench: {fixture}: line 17: row cut short; kept its out-of-place columns, skipped in-place\n")
    );
}

#[test]
fn r31_iteration_counts_out_of_range_are_usage_errors() {
    // The README's exit codes: 2 for a usage error, named by flag, before anything runs.
    for (args, says) in [
        (&["all-reduce", "-n", "0"][..], "--iters"),
        (&["gemm", "-n", "1000001"][..], "--iters"),
        (&["all-reduce", "-w", "2000000"][..], "--warmup_iters"),
    ] {
        let a = sim("dgx-h100", args).code(2);
        assert!(stderr(&a).contains(says), "{args:?}: {}", stderr(&a));
    }
}

/// One output flag across the binaries (issue 30): every subcommand that prints data takes
/// `--format json` (before or after its name, as the other global flags) and gives what
/// `--json` gives; `--format text` gives the tables; completions and man, which have no JSON
/// form, refuse it as a usage error. `fabric` is run with `--format json` in tests/fabric.rs.
#[test]
fn every_subcommand_takes_format_json_and_json_stays_its_alias() {
    let import = log("nccl-tests-214_");
    let import = import.to_str().unwrap();
    let commands: [&[&str]; 10] = [
        &["topo"],
        &["all-reduce", "-b", "1M", "-e", "1M"],
        &["all-gather", "-b", "1M", "-e", "1M"],
        &["reduce-scatter", "-b", "1M", "-e", "1M"],
        &["all-to-all", "-b", "1M", "-e", "1M"],
        &["send-recv", "-b", "1M", "-e", "1M"],
        &["gemm", "--shape", "1024x1024x1024", "--dtype", "bf16"],
        &[
            "copy", "--path", "hbm", "--gpu", "0", "-b", "1G", "-e", "1G",
        ],
        &[
            "calibrate",
            "--minbytes",
            "1M",
            "--maxbytes",
            "1M",
            "--gemm-dtype",
            "bf16",
        ],
        &["import", import],
    ];
    /// stdout as JSON: one document, or one per line.
    fn json(text: &str) -> Vec<serde_json::Value> {
        serde_json::from_str(text).map_or_else(
            |_| {
                text.lines()
                    .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                    .collect()
            },
            |doc| vec![doc],
        )
    }
    for command in commands {
        let before =
            stdout(&sim("dgx-h100", &[&["--format", "json"][..], command].concat()).success());
        let after = stdout(&sim("dgx-h100", &[command, &["--format", "json"]].concat()).success());
        let alias = stdout(&sim("dgx-h100", &[command, &["--json"]].concat()).success());
        let text = stdout(&sim("dgx-h100", &[command, &["--format", "text"]].concat()).success());
        let (b, a, j) = (json(&before), json(&after), json(&alias));
        assert!(!b.is_empty(), "{command:?}");
        assert_eq!(b.len(), j.len(), "{command:?}");
        assert_eq!(a.len(), j.len(), "{command:?}");
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_err(),
            "{command:?}"
        );
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_err()),
            "{command:?}: {text}"
        );
    }
    // The tuner's name for the human form is taken too: one spelling works in both binaries.
    let topo = |format: &str| stdout(&sim("dgx-h100", &["topo", "--format", format]).success());
    assert_eq!(topo("table"), topo("text"));
    let libs = microbench(&["libs", "--format", "json"])
        .get_output()
        .stdout
        .clone();
    let doc: serde_json::Value = serde_json::from_slice(&libs).unwrap();
    assert_eq!(doc["schema_version"], 1);
    for command in [&["completions", "bash"][..], &["man"]] {
        let a = microbench(&[command, &["--format", "json"]].concat())
            .failure()
            .code(2);
        assert!(
            stderr(&a).contains(&format!("`{}` prints", command[0])),
            "{command:?}: {}",
            stderr(&a)
        );
    }
    let a = microbench(&["topo", "--format", "yaml"]).failure().code(2);
    assert!(
        stderr(&a).contains("[possible values: text, json]"),
        "{}",
        stderr(&a)
    );
}
