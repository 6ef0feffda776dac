use super::steady_state::one_per_iteration;
use super::*;

#[test]
fn warmup_drops_a_tenth_and_at_least_two_but_never_all() {
    let got: Vec<usize> = [0, 1, 2, 3, 10, 20, 21, 40, 100]
        .iter()
        .map(|&n| warmup_lines(n))
        .collect();
    assert_eq!(got, [0, 0, 1, 2, 2, 2, 3, 4, 10]);
}

#[test]
fn steady_state_is_the_median_after_the_warmup() {
    // Iteration 1 compiles (9 s), iteration 7 saves a checkpoint (30 s).
    let t: Vec<(u64, f64)> = [9.0, 2.5, 1.0, 1.2, 1.1, 1.3, 30.0, 1.0]
        .iter()
        .enumerate()
        .map(|(i, &s)| (i as u64 + 1, s))
        .collect();
    let s = steady_state(&t, None).unwrap();
    assert_eq!((s.kept, s.dropped), (6, 2));
    assert_eq!(s.kept_range, (3, 8));
    assert_eq!(s.dropped_range, Some((1, 2)));
    assert!((s.median_s - 1.15).abs() < 1e-12, "{}", s.median_s);
    assert!(steady_state(&t, Some(8)).is_none());
    assert_eq!(steady_state(&t, Some(0)).unwrap().kept, 8);
    assert!(steady_state(&[], None).is_none());
}

#[test]
fn repeated_iterations_keep_rank_zero() {
    let step = |number, value, rank| Step {
        number,
        value,
        line: 1,
        rank,
        tflops: None,
        batch: None,
    };
    let (kept, dups) = one_per_iteration(&[
        step(2, 5.0, Some(3)),
        step(1, 1.0, None),
        step(2, 2.0, Some(0)),
        step(2, 7.0, Some(1)),
    ]);
    assert_eq!(dups, 2);
    assert_eq!(kept.iter().map(|s| s.value).collect::<Vec<_>>(), [1.0, 2.0]);
}

#[test]
fn flags_are_checked_by_name() {
    let bad = Overrides {
        gpu: Some("h100".into()),
        ..Overrides::default()
    };
    let e = bad.check().unwrap_err().to_string();
    assert!(
        e.starts_with("--gpu = h100: expected a catalog GPU id: "),
        "{e}"
    );
    assert!(e.contains("h100-sxm"), "{e}");
    let zero = Overrides {
        gpus_per_node: Some(0),
        ..Overrides::default()
    };
    assert!(zero
        .check()
        .unwrap_err()
        .to_string()
        .starts_with("--gpus-per-node = 0"));
    let nan = Overrides {
        nic_gbps: Some(f64::NAN),
        ..Overrides::default()
    };
    assert!(nan.check().is_err());
}

#[test]
fn sizes_at_the_edge_of_u32_do_not_overflow() {
    let big = u32::MAX;
    let megatron = format!(
        "------------------------ arguments ------------------------\n  num_layers ... {big}\n  hidden_size ... {big}\n  num_attention_heads ... 1\n  kv_channels ... 7\n  tensor_model_parallel_size ... {big}\n  pipeline_model_parallel_size ... {big}\n  context_parallel_size ... {big}\n  data_parallel_size ... {big}\n  num_layers_per_virtual_pipeline_stage ... {big}\n  num_experts ... {big}\n  moe_ffn_hidden_size ... 1\n  moe_shared_expert_intermediate_size ... {big}\n  global_batch_size ... {big}\n-------------------- end of arguments ---------------------\n iteration 1/ 2 | elapsed time per iteration (ms): 1e308 |\n iteration 2/ 2 | elapsed time per iteration (ms): 1e-308 |\n"
    );
    let titan = format!(
        "Building 3-D device mesh with ['dp', 'dp_shard', 'tp'], [{big}, {big}, {big}]\nBuilding llama3 8B with ModelArgs(dim={big}, multiple_of={big}, ffn_dim_multiplier=1e300)\nglobal batch size {big}, sequence length {big}\nstep: 1 tps: 1e-300\nstep: 2 tps: 1e300\n"
    );
    for (text, name) in [(megatron, "m.log"), (titan, "t.log")] {
        let job = read_log(&text, name).unwrap();
        let o = Overrides {
            gpus: Some(1 << 20),
            warmup: Some(0),
            ..Overrides::default()
        };
        let r = to_run(&job, name, "x", &o).unwrap();
        assert!(r.run.observed.iteration_time_s.is_none_or(f64::is_finite));
        render(&[r.run]).unwrap();
    }
}

#[test]
fn an_unknown_file_is_refused_by_name() {
    let e = read_log("hello\nworld\n", "notes.txt")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "notes.txt: no iteration lines (expected Megatron-LM 'elapsed time per iteration (ms)', \
         NeMo 'train_step_timing', torchtitan 'tps', DeepSpeed 'samples/sec')"
    );
}
