use super::*;
use crate::{AttentionPass, Dtype, GemmLayout, Kind, Scope};

fn lut(gpu: &str, ranks: u32) -> (String, String) {
    let name = format!("AR_GPU{ranks}_1M_1024M_LUT");
    let path = format!(
        "{}/../data/vtrain-luts/{gpu}/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    (std::fs::read_to_string(path).unwrap(), name)
}

/// vTrain's lookup tables as stored: 1,024 sizes from 1 MiB to 1 GiB, out-of-place and
/// in-place, the rank count and the collective from the file name, and the printed busbw
/// agreeing with size / time x 2(n-1)/n on every row (the reader refuses a row where it does
/// not). A100, 8 ranks, 1 MiB: 92.79 us, 1048576 / 92.79e-6 x 1.75 = 19.78 GB/s as printed.
#[test]
fn vtrains_lookup_tables_read_as_stored() {
    for gpu in ["a100", "v100"] {
        for ranks in 2..=8 {
            let (text, name) = lut(gpu, ranks);
            let p = parse(&text, &name, &ImportOptions::default()).unwrap();
            assert_eq!(p.kind, TableKind::Collective);
            assert_eq!(p.records.len(), 2048, "{gpu} {name}");
            assert!(p.records.iter().all(|r| r.kind == Kind::AllReduce
                && r.group.ranks == ranks
                && r.group.scope == Scope::IntraNode
                && r.dtype == Dtype::Fp32));
            assert_eq!(p.records.iter().filter(|r| r.in_place).count(), 1024);
            assert!(p
                .notes
                .iter()
                .any(|n| n.contains("all_reduce read from the file name")));
        }
    }
    let (text, name) = lut("a100", 8);
    let p = parse(&text, &name, &ImportOptions::default()).unwrap();
    let first = &p.records[0];
    assert_eq!((first.bytes, first.in_place), (1048576, false));
    assert!((first.timing.time_s - 92.79e-6).abs() < 1e-12);
    assert!((first.busbw.unwrap() / 19.78e9 - 1.0).abs() < 1e-3);
    let last = p.records.last().unwrap();
    assert_eq!((last.bytes, last.in_place), (1 << 30, true));
}

#[test]
fn without_a_name_the_rank_count_comes_from_the_bandwidth() {
    let (text, _) = lut("a100", 4);
    let p = parse(
        &text,
        "lut.csv",
        &ImportOptions {
            collective: Some(Kind::AllReduce),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(p.records.iter().all(|r| r.group.ranks == 4));
    // A flag that contradicts the printed bus bandwidth is refused on the first row.
    let err = parse(
        &text,
        "AR_GPU8.csv",
        &ImportOptions {
            ranks: Some(8),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.reason.contains("for 8 ranks (the flag)"), "{err}");
    let err = parse(&text, "lut.csv", &ImportOptions::default()).unwrap_err();
    assert!(err.reason.contains("pass --collective"), "{err}");
}

#[test]
fn a_unit_it_cannot_read_refuses_the_file_by_line() {
    let text =
        "size(B),count,type,time(fortnights),busbw(GB/s)\n1048576,262144,float,92790,19.78\n";
    let err = parse(text, "AR_GPU8_LUT", &ImportOptions::default()).unwrap_err();
    assert_eq!(err.line, 1);
    assert_eq!(
        err.reason,
        "column `time(fortnights)`: unit `fortnights` is not a time unit (s, ms, us, ns)"
    );
}

/// A GEMM sweep with its layout and a time per call; the FLOP rate follows. 8192^3 in
/// 3.8 ms: 2 x 8192^3 / 3.8e-3 = 289.3 TFLOP/s.
#[test]
fn gemm_sweeps_with_time_or_rate() {
    let text = "# gpu: NVIDIA A100-SXM4-80GB\nm,n,k,dtype,layout,time(ms)\n8192,8192,8192,bf16,tn,3.8\n4096,1024,4096,bfloat16,nt,0.15\n";
    let p = parse(text, "gemm.csv", &ImportOptions::default()).unwrap();
    assert_eq!(p.kind, TableKind::Gemm);
    assert_eq!(p.gpu_model.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    let r = &p.records[0];
    assert_eq!(
        (r.kind, r.dtype, r.detail.layout),
        (Kind::Gemm, Dtype::Bf16, Some(GemmLayout::Tn))
    );
    assert!(
        (r.flops.unwrap() / 289.35e12 - 1.0).abs() < 1e-3,
        "{:?}",
        r.flops
    );
    assert_eq!(r.detail.gpu_model.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    assert_eq!(p.records[1].detail.layout, Some(GemmLayout::Nt));
    // A rate instead of a time; a batch divides the call's time.
    let text = "m,n,k,dtype,batch,TFLOP/s,gpu\n1024,1024,1024,fp16,4,100,H100\n";
    let p = parse(text, "g.csv", &ImportOptions::default()).unwrap();
    let r = &p.records[0];
    let per_gemm = 2.0 * 1024f64.powi(3) / 100e12;
    assert!((r.timing.time_s / per_gemm - 1.0).abs() < 1e-9);
    assert!((r.flops.unwrap() / 100e12 - 1.0).abs() < 1e-9);
    assert!(p.notes.iter().any(|n| n.contains("all three layouts")));
}

/// BLAS-style columns as cuBLAS benchmarks print them: transposes as two flags, the rate
/// in the name.
#[test]
fn gemm_sweeps_in_blas_columns() {
    let text = "M,N,K,transA,transB,Precision,achieved_TFLOPS\n4096,4096,4096,T,N,bf16,600\n4096,4096,4096,N,T,bf16,550\n";
    let p = parse(text, "g.csv", &ImportOptions::default()).unwrap();
    let layouts: Vec<_> = p.records.iter().map(|r| r.detail.layout).collect();
    assert_eq!(layouts, [Some(GemmLayout::Tn), Some(GemmLayout::Nt)]);
    assert!((p.records[1].flops.unwrap() / 550e12 - 1.0).abs() < 1e-9);
    let err = parse(
        "m,n,k,transa,transb,dtype,time(us)\n1,2,3,T,T,bf16,4\n",
        "g.csv",
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("line 2: layout `tt`"), "{err}");
}

#[test]
fn gemm_refusals_name_line_and_reason() {
    let bad = |text: &str| {
        parse(text, "g.csv", &ImportOptions::default())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        bad("m,n,k,dtype,time\n1,2,3,bf16,4\n"),
        "line 1: column `time` names no unit: write it as time(s), time(ms), time(us) or time(ns)"
    );
    assert!(bad("m,n,k,time(us)\n1,2,3,4\n").contains("no dtype column"));
    assert_eq!(
        bad("m,n,k,dtype,time(us)\n1,2,3,bf16,4\n1,2,0,bf16,4\n"),
        "line 3: column `k` is `0`: expected a whole number from 1 to 1099511627776"
    );
    assert!(
        bad("m,n,k,dtype,time(us)\n1,2,3,int4,4\n").starts_with("line 2: column `dtype` is `int4`")
    );
    assert!(bad("m,n,k,dtype,layout,time(us)\n1,2,3,bf16,tt,4\n").contains("layout `tt`"));
    assert_eq!(
        bad("m,n,k,dtype,time(us)\n"),
        "line 1: a header and no rows"
    );
    assert!(
        bad("m,n,k,dtype,gpu,time(us)\n1,2,3,bf16,A100,4\n1,2,3,bf16,H100,4\n")
            .starts_with("line 3: `H100` where line 2 says `A100`: one table, one GPU model")
    );
}

/// FlashAttention's benchmark convention: batch 2, 8k tokens, 16 heads of 128, causal, a
/// forward at 300 TFLOP/s: 4 x 2 x 8192^2 x 16 x 128 / 2 = 5.5e11 FLOPs, 1.83 ms.
#[test]
fn attention_timings_in_flash_attentions_convention() {
    let text = "batch,seq,heads,head_dim,causal,pass,TFLOP/s\n2,8192,16,128,true,fwd,300\n2,8192,16,128,true,bwd,250\n";
    let p = parse(text, "attn.csv", &ImportOptions::default()).unwrap();
    assert_eq!(p.kind, TableKind::Attention);
    let fwd = &p.records[0];
    let shape = fwd.detail.attention.unwrap();
    assert_eq!(
        (shape.seq, shape.pass, fwd.kind),
        (8192, AttentionPass::Fwd, Kind::Attention)
    );
    let flop = 4.0 * 2.0 * 8192f64.powi(2) * 16.0 * 128.0 / 2.0;
    assert!((shape.flop() / flop - 1.0).abs() < 1e-12);
    assert!((fwd.timing.time_s - flop / 300e12).abs() < 1e-12);
    let bwd = &p.records[1];
    assert!((bwd.timing.time_s - 2.5 * flop / 250e12).abs() < 1e-12);
    assert!(p.notes.iter().any(|n| n.contains("bf16")));
}

/// Each placement's time in its own column's unit: out-of-place in us, in-place in ns.
#[test]
fn each_placement_keeps_its_unit() {
    let text = "size(B),time(us),time(ns)\n1048576,92.79,92150\n";
    let p = parse(text, "AR_GPU8.csv", &ImportOptions::default()).unwrap();
    let times: Vec<f64> = p.records.iter().map(|r| r.timing.time_s).collect();
    assert!(
        (times[0] - 92.79e-6).abs() < 1e-12 && (times[1] - 92.15e-6).abs() < 1e-12,
        "{times:?}"
    );
}

/// Two columns of one quantity are refused: which is meant is not for the reader to guess.
#[test]
fn repeated_columns_are_refused() {
    let bad = |text: &str| {
        parse(text, "g.csv", &ImportOptions::default())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        bad("m,m,n,k,dtype,time(us)\n1,1,2,3,bf16,4\n"),
        "line 1: columns `m` and `m` both read as the same quantity: keep one"
    );
    assert!(bad("m,n,k,dtype,median_us,mean_us\n1,2,3,bf16,4,5\n")
        .contains("`median_us` and `mean_us`"));
    // A bare flops column is a count or a rate: it names no unit.
    assert!(bad("m,n,k,dtype,flops\n1,2,3,bf16,4\n").contains("column `flops` names no unit"));
}

#[test]
fn unknown_headers_and_tables_are_refused_whole() {
    assert!(!is_table("# nThread 1 nGpus 8\n#  size  count  type\n"));
    assert!(is_table("size(B),count,type,time(ns),busbw(GB/s)\n"));
    // A unit it cannot read still makes it a table, refused by line and reason.
    assert!(is_table(
        "size(B),count,type,time(fortnights),busbw(GB/s)\n"
    ));
    assert!(!is_table("Hi, I ran nccl-tests, and it hangs\n"));
    let err = parse("a,b,c\n1,2,3\n", "x.csv", &ImportOptions::default()).unwrap_err();
    assert!(err.reason.contains("names no table"), "{err}");
}

/// No input panics: every cut of the real tables and the examples above reads or refuses.
#[test]
fn every_cut_reads_or_refuses() {
    let (text, name) = lut("a100", 8);
    let head: String = text.lines().take(40).collect::<Vec<_>>().join("\n");
    let texts = [
        head,
        "m,n,k,dtype,layout,time(ms)\n8192,8192,8192,bf16,tn,3.8\n".to_string(),
        "batch,seq,heads,head_dim,causal,pass,TFLOP/s\n2,8192,16,128,true,fwd,300\n".to_string(),
    ];
    for text in &texts {
        for cut in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
            let _ = parse(&text[..cut], &name, &ImportOptions::default());
        }
    }
}

/// Issue 31, item 4: a table's times were held to no range, so 1e-300 s reached the fits as
/// NaN curves. Each kind of table refuses such a row by line, field, value and range.
#[test]
fn r31_4_rows_outside_the_physical_ranges_refuse_the_table_by_line() {
    let refused = |text: &str, name: &str| {
        parse(text, name, &ImportOptions::default())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(
            "size(B),time(us)\n1048576,92.79\n2097152,1e-300\n",
            "AR_GPU8.csv"
        ),
        "line 3: time_s 1e-306: expected a time from 1e-7 s to 1e4 s"
    );
    assert_eq!(
        refused("m,n,k,dtype,time(s)\n8192,8192,8192,bf16,1e9\n", "g.csv"),
        "line 2: time_s 1000000000: expected a time from 1e-7 s to 1e4 s"
    );
    assert_eq!(
        refused(
            "batch,seq,heads,head_dim,TFLOP/s\n1,128,1,64,1e300\n",
            "attn.csv"
        ),
        "line 2: time_s 0: expected a time from 1e-7 s to 1e4 s"
    );
}
