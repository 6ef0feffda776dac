//! Regression tests for issue 13 (reliability: hostile input, bad measurements), the parts
//! in the record crate's readers: nccl-tests logs read for what they say, failed and
//! non-finite rows dropped by name, records that cannot be measurements refused, and every
//! rejection explained.

use record::nccl_tests::{parse, parse_with, ImportOptions, ParseError, Warning};
use record::{read_json_lines, JsonLinesError, Kind, Scope};

/// A 24-rank all-reduce over three 8 x A100 nodes, pasted as an excerpt: the device list
/// is cut after rank 3. busbw/algbw = 95.75 / 49.96 = 1.917 = 2 x 23/24.
const A100_24: &str = "\
$ mpirun -np 24 --hostfile hosts -x NCCL_IB_HCA=mlx5 ./build/all_reduce_perf -b 256M -e 8G -f 2 -g 1
# nThread 1 nGpus 1 minBytes 268435456 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  40211 on a100-node01 device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  40212 on a100-node01 device  1 [0x0f] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid  40213 on a100-node01 device  2 [0x47] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid  40214 on a100-node01 device  3 [0x4e] NVIDIA A100-SXM4-80GB
...
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
   268435456      67108864     float     sum      -1   7027.1   38.20   73.22      0   7027.1   38.20   73.22      0
   536870912     134217728     float     sum      -1    12603   42.60   81.65      0    12603   42.60   81.65      0
  1073741824     268435456     float     sum      -1    23703   45.30   86.82      0    23703   45.30   86.82      0
  2147483648     536870912     float     sum      -1    44833   47.90   91.81      0    44833   47.90   91.81      0
  4294967296    1073741824     float     sum      -1    87474   49.10   94.11      0    87474   49.10   94.11      0
  8589934592    2147483648     float     sum      -1   171947   49.96   95.75      0   171947   49.96   95.75      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 87.2267
";

fn largest_busbw_gbs(records: &[record::Record]) -> f64 {
    let r = records.iter().max_by_key(|r| r.bytes).unwrap();
    r.busbw.unwrap() / 1e9
}

#[test]
fn r13_a_multi_node_excerpt_keeps_its_ranks_and_printed_busbw() {
    let parsed = parse(A100_24).unwrap();
    assert_eq!(parsed.records.len(), 12);
    for r in &parsed.records {
        assert_eq!((r.kind, r.group.ranks), (Kind::AllReduce, 24));
        // More A100 SXM than one node holds; the cut device list names no devices.
        assert_eq!(r.group.scope, Scope::InterNode);
        assert_eq!(r.group.gpus, Vec::<u32>::new());
        assert_eq!(r.group.node.as_deref(), Some("a100-node01"));
        // The device list names the GPU, so that the tuner can match the log to runs on it.
        assert_eq!(r.detail.gpu_model.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    }
    assert!((largest_busbw_gbs(&parsed.records) - 95.75).abs() < 0.005);
    assert_eq!(
        parsed
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "table at line 11: took 24 ranks, but the sources disagree: the printed busbw/algbw \
             (1.917) says 24; the launch line says 24; the device list shows 4 (an excerpt may \
             cut it)"
        ]
    );

    // Without its launch line, the printed ratio alone fixes 24.
    let cut = A100_24.replacen("$ mpirun", "$ # lost:", 1);
    let parsed = parse(&cut).unwrap();
    assert!(parsed.records.iter().all(|r| r.group.ranks == 24));
    assert!((largest_busbw_gbs(&parsed.records) - 95.75).abs() < 0.005);
}

#[test]
fn r13_launch_lines_give_ranks_and_nodes() {
    let row = "  1048576  262144  float  sum  -1  100.0  10.49  18.35  0  100.0  10.49  18.35  0\n";
    for (launch, ranks, scope, iters) in [
        // srun: -N nodes x --ntasks-per-node.
        (
            "srun -N 2 --ntasks-per-node=4 ./all_reduce_perf -b 1M -e 1M",
            8,
            Scope::InterNode,
            None,
        ),
        // Open MPI: processes x -g, two hosts; nccl-tests' own -n is its iteration count.
        (
            "mpirun -n 4 -H a:2,b:2 all_reduce_perf -g 2 -n 50",
            8,
            Scope::InterNode,
            Some(50),
        ),
        // One node's worth of processes under mpirun, by -npernode.
        (
            "mpirun -np 8 -npernode 8 all_reduce_perf",
            8,
            Scope::IntraNode,
            None,
        ),
    ] {
        let parsed = parse(&format!("{launch}\n{row}")).unwrap_or_else(|e| panic!("{launch}: {e}"));
        let r = &parsed.records[0];
        assert_eq!((r.group.ranks, r.group.scope), (ranks, scope), "{launch}");
        assert_eq!(r.timing.iters, iters, "{launch}");
        assert_eq!(parsed.warnings, vec![], "{launch}");
    }
}

/// Three tables pasted without their `*_perf` lines after one device list: the first two
/// introduced by a line, the third by nothing.
const THREE_TABLES: &str = "\
#  Rank  0 Group  0 Pid  1 on node7 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  1 on node7 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  1 on node7 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  1 on node7 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  1 on node7 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  1 on node7 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  1 on node7 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  1 on node7 device  7 [0xdb] NVIDIA H100 80GB HBM3

all_reduce result:
     1048576        262144     float     sum      -1    17.45   60.09  105.16      0    17.45   60.09  105.16      0
     2097152        524288     float     sum      -1    23.22   90.32  158.05      0    23.22   90.32  158.05      0
     4194304       1048576     float     sum      -1    34.84  120.39  210.68      0    34.84  120.39  210.68      0

all_gather result:
     1048576         32768     float    none      -1    19.03   55.10   48.21      0    19.03   55.10   48.21      0
     2097152         65536     float    none      -1    26.12   80.29   70.25      0    26.12   80.29   70.25      0
     4194304        131072     float    none      -1    37.99  110.41   96.60      0    37.99  110.41   96.60      0
     1048576         32768     float     sum      -1    20.93   50.10   43.84      0    20.93   50.10   43.84      0
     2097152         65536     float     sum      -1    27.85   75.30   65.89      0    27.85   75.30   65.89      0
     4194304        131072     float     sum      -1    41.78  100.39   87.84      0    41.78  100.39   87.84      0
";

#[test]
fn r13_tables_without_perf_lines_are_read_table_by_table() {
    let parsed = parse(THREE_TABLES).unwrap();
    assert_eq!(parsed.warnings, vec![]);
    let kinds: Vec<(Kind, u32, Scope)> = parsed
        .records
        .iter()
        .step_by(6)
        .map(|r| (r.kind, r.group.ranks, r.group.scope))
        .collect();
    // The third table's columns (redop sum, size = 8 x count x 4) make it a reduce-scatter.
    assert_eq!(
        kinds,
        vec![
            (Kind::AllReduce, 8, Scope::IntraNode),
            (Kind::AllGather, 8, Scope::IntraNode),
            (Kind::ReduceScatter, 8, Scope::IntraNode),
        ]
    );
    assert_eq!(parsed.records[0].group.gpus, (0..8).collect::<Vec<u32>>());
}

/// A named table, then two tables pasted after it with nothing naming them, whose columns
/// fit both a 2-rank all-reduce and a send/recv (redop sum, size = count x 4, busbw = algbw).
const AMBIGUOUS: &str = "\
all_gather_perf -g 8
     1048576         32768     float    none      -1    19.03   55.10   48.21      0    19.03   55.10   48.21      0
     2097152         65536     float    none      -1    26.12   80.29   70.25      0    26.12   80.29   70.25      0
# Avg bus bandwidth    : 59.23
     1048576        262144     float     sum      -1    52.17   20.10   20.10      0    52.17   20.10   20.10      0
     2097152        524288     float     sum      -1    94.04   22.30   22.30      0    94.04   22.30   22.30      0

     1048576        262144     float     sum      -1    52.17   20.10   20.10      0    52.17   20.10   20.10      0
";

#[test]
fn r13_collective_is_asked_only_for_the_tables_that_cannot_tell() {
    // all_gather_perf named the first table; the columns of the next two rule it out and
    // do not tell all-reduce from send/recv. The error names those two tables only.
    let err = parse(AMBIGUOUS).unwrap_err();
    let ParseError::Tables(tables) = &err else {
        panic!("{err}")
    };
    assert_eq!(tables.len(), 2, "{err}");
    let one = "the log does not name its collective (no `*_perf` binary or name such as \
               `all_reduce` before it), and its columns fit all_reduce or send_recv; pass \
               --collective";
    assert_eq!(
        err.to_string(),
        format!("table at line 5: {one}; table at line 8: {one}")
    );
    // The hint decides those two; the first table keeps what its name and columns say.
    let parsed = parse_with(
        AMBIGUOUS,
        &ImportOptions {
            collective: Some(Kind::SendRecv),
            ..Default::default()
        },
    )
    .unwrap();
    let kinds: Vec<Kind> = parsed.records.iter().map(|r| r.kind).collect();
    assert_eq!(kinds[..4], [Kind::AllGather; 4]);
    assert_eq!(kinds[4..], [Kind::SendRecv; 6]);
    assert_eq!(
        parsed
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "table at line 2: the log shows all_gather; --collective send_recv applies only to \
             tables that do not say"
        ]
    );
    // A hint the columns rule out is refused by name.
    let err = parse_with(
        AMBIGUOUS,
        &ImportOptions {
            collective: Some(Kind::AllToAll),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(
            "table at line 5: --collective all_to_all does not fit its columns, which fit \
             all_reduce or send_recv"
        ),
        "{err}"
    );
}

#[test]
fn r13_rows_nccl_tests_marked_wrong_are_dropped_and_counted() {
    let text = "\
all_reduce_perf -g 8 -c 1
     1048576        262144     float     sum      -1    17.45   60.09  105.16      0    17.45   60.09  105.16      3
     2097152        524288     float     sum      -1    23.22   90.32  158.05     12    23.22   90.32  158.05     12
     4194304       1048576     float     sum      -1    34.84  120.39  210.68      0    34.84  120.39  210.68      0
# Out of bounds values : 27 FAILED
";
    let parsed = parse(text).unwrap();
    let kept: Vec<(u64, bool)> = parsed
        .records
        .iter()
        .map(|r| (r.bytes, r.in_place))
        .collect();
    assert_eq!(
        kept,
        vec![(1_048_576, false), (4_194_304, false), (4_194_304, true)]
    );
    assert_eq!(
        parsed.warnings,
        vec![Warning::Failed {
            table: 2,
            lines: vec![2, 3]
        }]
    );
    assert_eq!(
        parsed.warnings[0].to_string(),
        "table at line 2: nccl-tests marked 2 row(s) wrong (#wrong or error column) on line(s) \
         2, 3; dropped those results"
    );

    // `#wrong` printed N/A (no -c 1 per row) but the footer says FAILED: nothing in the run
    // can be trusted.
    let text = "\
all_reduce_perf -g 8
     1048576        262144     float     sum      -1    17.45   60.09  105.16    N/A    17.45   60.09  105.16    N/A
     2097152        524288     float     sum      -1    23.22   90.32  158.05    N/A    23.22   90.32  158.05    N/A
     4194304       1048576     float     sum      -1    34.84  120.39  210.68    N/A    34.84  120.39  210.68    N/A
# Out of bounds values : 27 FAILED
";
    let err = parse(text).unwrap_err().to_string();
    assert_eq!(
        err,
        "none of the 3 result rows can be imported: line 5: nccl-tests reports 27 out-of-bounds \
         values (FAILED) and no row says which; dropped the run's 6 results"
    );
}

#[test]
fn r13_inf_and_nan_rows_are_dropped_by_line_never_recorded() {
    let text = "\
all_reduce_perf -g 2
        1024           256     float     sum      -1      inf    0.00    0.00      0    12.10    0.08    0.08      0
        2048           512     float     sum      -1    12.20    0.17    0.17      0    12.10     nan    0.17      0
        4096          1024     float     sum      -1    12.40    0.33    0.33      0    12.30    0.33    0.33      0
";
    let parsed = parse(text).unwrap();
    assert_eq!(parsed.records.len(), 2);
    assert!(parsed
        .records
        .iter()
        .all(|r| r.bytes == 4096 && r.timing.time_s.is_finite()));
    let warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        vec![
            "line 2: unreadable result row (out-of-place time `inf`: expected a finite number \
             of 0 or more); skipped",
            "line 3: unreadable result row (in-place algbw `nan`: expected a finite number of 0 \
             or more); skipped",
        ]
    );
    let json = serde_json::to_string(&parsed.records).unwrap();
    assert!(!json.contains("null,\"time_min_s\""), "{json}");
}

#[test]
fn r13_when_every_row_is_rejected_the_error_gives_reasons_and_a_count() {
    let mut text = String::from("all_reduce_perf -g 2\n");
    for i in 0..5 {
        text.push_str(&format!(
            "  {}  256  float  sum  -1  inf  0.00  0.00  0  inf  0.00  0.00  0\n",
            1024 << i
        ));
    }
    let err = parse(&text).unwrap_err();
    assert!(matches!(
        err,
        ParseError::NoValidRows {
            rows: 5,
            rejected: 5,
            ..
        }
    ));
    let err = err.to_string();
    assert!(
        err.starts_with(
            "none of the 5 result rows can be imported: line 2: unreadable result row \
             (out-of-place time `inf`: expected a finite number of 0 or more); skipped; line 3:"
        ),
        "{err}"
    );
    assert!(err.ends_with("; and 2 more"), "{err}");
}

#[test]
fn r13_a_byte_order_mark_is_harmless() {
    let with_bom = format!("\u{feff}{A100_24}");
    assert_eq!(parse(&with_bom).unwrap(), parse(A100_24).unwrap());
    let line = serde_json::to_string(&parse(A100_24).unwrap().records[0]).unwrap();
    assert_eq!(
        read_json_lines(&format!("\u{feff}{line}\n")).unwrap().len(),
        1
    );
}

#[test]
fn r13_json_lines_refuse_what_cannot_be_a_measurement() {
    let good = serde_json::to_string(&parse(A100_24).unwrap().records[0]).unwrap();
    let with = |from: &str, to: &str| {
        assert!(good.contains(from), "{good}");
        good.replacen(from, to, 1)
    };
    let text = [
        good.clone(),
        with("\"ranks\":24", "\"ranks\":0"),
        with("\"time_s\":0.0070271", "\"time_s\":-1"),
        with("\"time_s\":0.0070271", "\"time_s\":0"),
        with("\"time_s\":0.0070271", "\"time_s\":null"),
    ]
    .join("\n");
    let err = read_json_lines(&text).unwrap_err();
    let JsonLinesError::BadLines { bad, lines, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!((*bad, *lines), (4, 5));
    let err = err.to_string();
    assert!(
        err.starts_with(
            "4 of 5 non-blank lines are not valid measurement records: line 2: ranks 0: expected \
             1 to 1048576 ranks; line 3: time_s -1: expected a time from 1e-7 s to 1e4 s; line \
             4: time_s 0: expected a time from 1e-7 s to 1e4 s; line 5: not a measurement \
             record: invalid type: null, expected f64"
        ),
        "{err}"
    );

    // Every line bad: the first five are named and all are counted.
    let bad_lines = vec![with("\"ranks\":24", "\"ranks\":0"); 7].join("\n");
    let err = read_json_lines(&bad_lines).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "7 of 7 non-blank lines are not valid measurement records (first 5): line 1: ranks 0"
        ),
        "{err}"
    );
    assert!(
        err.contains("line 5: ranks 0") && !err.contains("line 6"),
        "{err}"
    );

    let array = format!("[\n{good},\n{good}\n]\n");
    assert_eq!(
        read_json_lines(&array).unwrap_err().to_string(),
        "the file is a JSON array; microbench --json writes one record per line"
    );
}

/// Every record carries its group: a log of many device lines and many rows must not cost
/// their product.
#[test]
fn r13_memory_stays_linear_in_a_log_of_many_devices_and_rows() {
    let mut text = String::from("sendrecv_perf\n");
    for rank in 0..2000 {
        text.push_str(&format!(
            "#  Rank {rank} Group 0 Pid 1 on host{} device {} [0x1] NVIDIA H100 80GB HBM3\n",
            rank / 8,
            rank % 8
        ));
    }
    for i in 0..2000u64 {
        let size = 4 * (i + 1);
        text.push_str(&format!(
            "  {size}  {}  float  sum  -1  10.00  0.00  0.00  0  10.00  0.00  0.00  0\n",
            i + 1
        ));
    }
    let parsed = parse(&text).unwrap();
    assert_eq!(parsed.records.len(), 4000);
    assert!(parsed.records.iter().all(|r| r.group.ranks == 2000
        && r.group.scope == Scope::InterNode
        && r.group.gpus.is_empty()));
}

/// Found by fuzzing: `-g 0` on the command line made a 0-rank group whose busbw was NaN.
#[test]
fn r13_fuzz_a_zero_count_flag_is_no_rank_count() {
    let text = "all_gather_perf -g 0 -n 0\n  1048576  32768  float  none  -1  19.03  55.10  48.21  0  19.03  55.10  48.21  0\n";
    let parsed = parse_with(
        text,
        &ImportOptions {
            scope: Some(Scope::IntraNode),
            ..Default::default()
        },
    )
    .unwrap();
    for r in &parsed.records {
        assert_eq!((r.group.ranks, r.timing.iters), (8, None));
        r.validate().unwrap();
    }
}

/// A count whose buffer is past 2^64 bytes is named, not multiplied into a panic.
#[test]
fn r13_a_count_past_u64_bytes_is_unreadable() {
    let text = "all_reduce_perf -g 2\n  8  4611686018427387904  double  sum  -1  10.00  0.00  0.00  0  10.00  0.00  0.00  0\n  8  2  float  sum  -1  10.00  0.00  0.00  0  10.00  0.00  0.00  0\n";
    let parsed = parse(text).unwrap();
    assert_eq!(parsed.records.len(), 2);
    assert_eq!(
        parsed.warnings[0].to_string(),
        "line 2: unreadable result row (count `4611686018427387904` x type size x 2 ranks is past \
         2^64 bytes); skipped"
    );
}

/// The JSON-lines fuzz seeds are records the reader takes, so fuzzing starts from valid input.
#[test]
fn r13_fuzz_seeds_are_valid_records() {
    let seeds = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/json_lines/records.jsonl"
    );
    let text =
        record::read_bounded(std::path::Path::new(seeds), record::MAX_JSON_LINES_BYTES).unwrap();
    assert_eq!(read_json_lines(&text).unwrap().len(), 3);
}

/// Found by fuzzing the tuner's measurement files: `-g 5 -t 4294963648` multiplied past u32
/// and panicked; a GPU count no machine has is read as absent, as a 0 is.
#[test]
fn r13_fuzz_a_gpu_count_past_u32_is_no_rank_count() {
    let text = "all_gather_perf -g 5 -t 4294963648 -n 20\n  1048576  32768  float  none  -1  19.03  55.10  48.21  0  19.03  55.10  48.21  0\n";
    let parsed = parse_with(
        text,
        &ImportOptions {
            scope: Some(Scope::IntraNode),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(parsed.records.len(), 2);
    for r in &parsed.records {
        assert_eq!(r.group.ranks, 8);
        r.validate().unwrap();
    }
}

/// Found while fixing the one above: `--map-by ppr:0:node` divided the process count by 0
/// nodes' worth of processes; it places no process, so it is read as absent.
#[test]
fn r13_ppr_zero_per_node_is_no_per_node_count() {
    let text = "mpirun -np 16 --map-by ppr:0:node ./all_reduce_perf -g 1\n  1048576  262144  float  sum  -1  19.03  55.10  103.31  0  19.03  55.10  103.31  0\n";
    let parsed = parse_with(
        text,
        &ImportOptions {
            scope: Some(Scope::InterNode),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(parsed.records.len(), 2);
    for r in &parsed.records {
        assert_eq!(r.group.ranks, 16);
        r.validate().unwrap();
    }
}

#[test]
fn r31_a_size_past_u64_is_a_named_rejection_not_a_vanished_row() {
    // 10^22 bytes fits no u64: the row used to read as a context line and vanish.
    let text = A100_24.replace(
        "   268435456      67108864",
        "   10000000000000000000000      67108864",
    );
    let parsed = parse(&text).unwrap();
    assert_eq!(parsed.records.len(), 10);
    let said = parsed.warnings.iter().any(|w| {
        matches!(w, Warning::Unreadable { reason, .. }
            if reason.contains("size `10000000000000000000000`"))
    });
    assert!(said, "{:?}", parsed.warnings);
}
