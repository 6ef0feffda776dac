use super::*;
use crate::catalog::{self, Efficiency, NOMINAL};
use crate::cost::collective::CollectiveModel;
use crate::cost::compute::ComputeModel;
use crate::cost::compute::NominalCompute;
use crate::cost::mocks::{PerCall, PerFlop, PerWireByte, PER_FLOP};
use crate::mesh::Training;
use crate::mesh::{
    FlashKernel, Framework, LossKernel, ParamFetch, Precision, Recompute, ReduceDtype,
};
use crate::model::ModelShape;

fn training(framework: Framework) -> Training {
    Training {
        global_batch: 512,
        overlap_grad_reduce: false,
        flash_kernel: FlashKernel::Flash2,
        tp_comm_overlap: false,
        framework,
        grad_reduce: ReduceDtype::Bf16,
        ..Training::megatron(8192, 512)
    }
}

fn mesh(tp: u32, dp: u32, mb: u32, zero_stage: u8, sp: bool) -> Mesh {
    Mesh {
        tp,
        pp: 1,
        dp,
        cp: 1,
        ep: 1,
        microbatch_size: mb,
        virtual_stages: 1,
        zero_stage,
        recompute: Recompute::None,
        sequence_parallel: sp,
        schedule: crate::mesh::Schedule::OneFOneB,
        edge_stages: None,
        expert_tp: None,
    }
}

fn breakdown(mesh: &Mesh, training: &Training, collectives: &dyn CollectiveModel) -> Breakdown {
    let cluster = catalog::cluster("dgx-h100").unwrap();
    let compute = NominalCompute::new(
        &cluster.gpu,
        training.precision,
        training.flash_kernel,
        &NOMINAL,
    );
    breakdown_on(mesh, training, collectives, &compute)
}

/// Llama 3 8B on DGX H100 nodes, priced with `compute`.
fn breakdown_on(
    mesh: &Mesh,
    training: &Training,
    collectives: &dyn CollectiveModel,
    compute: &dyn ComputeModel,
) -> Breakdown {
    breakdown_with(mesh, training, collectives, compute, &NOMINAL)
}

/// The same with the catalog efficiencies replaced by `efficiency`.
fn breakdown_with(
    mesh: &Mesh,
    training: &Training,
    collectives: &dyn CollectiveModel,
    compute: &dyn ComputeModel,
    efficiency: &Efficiency,
) -> Breakdown {
    let model = catalog::model("llama3-8b").unwrap().shape;
    step_of(&model, mesh, training, (collectives, compute), efficiency)
}

/// `model` on DGX H100 nodes.
fn step_of(
    model: &ModelShape,
    mesh: &Mesh,
    training: &Training,
    (collectives, compute): (&dyn CollectiveModel, &dyn ComputeModel),
    efficiency: &Efficiency,
) -> Breakdown {
    let cluster = catalog::cluster("dgx-h100").unwrap();
    step_time(&Inputs {
        model,
        training,
        mesh,
        placement: &Placement::of(mesh, &cluster),
        compute,
        collectives,
        efficiency,
    })
}

#[test]
fn the_backward_issues_its_kernels_at_its_own_host_rate() {
    // Llama 3 8B on DP 64: 8 microbatches through 32 layers, every pass host-bound at a
    // second a kernel. A layer's forward issues its 12 kernels (TP 1, fused attention),
    // its backward 24 at the share of the forward's host time: each second of host time
    // per kernel adds 8 x 32 x 12 x (1 + 2 x share) s, and halving the share from 1 saves
    // 8 x 32 x 24 x 0.5 = 3,072 s. Full recomputation replays the forward's 12 kernels
    // from Python, at the forward's rate: 8 x 32 x 12 x (2 + 2 x share) s.
    let launch = |recompute: Recompute, host: f64, share: f64| {
        let e = Efficiency {
            host_bwd_share: share,
            ..NOMINAL
        };
        let m = Mesh {
            recompute,
            ..mesh(1, 64, 1, 0, false)
        };
        let t = training(Framework::Megatron);
        breakdown_with(&m, &t, &PerCall(0.0), &PerFlop(host), &e)
            .launch
            .time_s
    };
    let per_host_second = |r: Recompute, share: f64| launch(r, 2.0, share) - launch(r, 1.0, share);
    let per_pass = 8.0 * 32.0 * 12.0;
    for (share, passes) in [(1.0, 3.0), (0.5, 2.0)] {
        let t = per_host_second(Recompute::None, share);
        assert!((t - per_pass * passes).abs() < 1e-6, "{t}");
        let t = per_host_second(Recompute::Full, share);
        assert!((t - per_pass * (passes + 1.0)).abs() < 1e-6, "{t}");
    }
    let saved = launch(Recompute::None, 1.0, 1.0) - launch(Recompute::None, 1.0, 0.5);
    assert!((saved - 3072.0).abs() < 1e-6, "{saved}");
}

#[test]
fn the_loss_moves_each_logit_as_often_as_its_kernels_do() {
    // Llama 3 8B (vocab 128,256) on DP 64: 8 microbatches of 8,192 tokens, at 1 TB/s.
    // Megatron's unfused loss moves 52 bytes per logit, eager PyTorch's 48, a fused kernel
    // 8: the step's compute differs by 8 x 44 x 8,192 x 128,256 bytes = 0.369837 s between
    // Megatron's and the fused one, and by 8 x 40 x ... = 0.336215 s between eager and fused.
    let compute = |loss: LossKernel| {
        let t = Training {
            loss,
            ..training(Framework::Megatron)
        };
        breakdown_on(&mesh(1, 64, 1, 0, false), &t, &PerCall(0.0), &PER_FLOP)
            .compute
            .time_s
    };
    let fused = compute(LossKernel::Fused);
    let megatron = compute(LossKernel::Megatron) - fused;
    assert!((megatron - 0.369836949504).abs() < 1e-9, "{megatron}");
    let eager = compute(LossKernel::Eager) - fused;
    assert!((eager - 0.33621540864).abs() < 1e-9, "{eager}");
    assert_eq!(Framework::Deepspeed.defaults().loss, LossKernel::Megatron);
    assert_eq!(Framework::Fsdp.defaults().loss, LossKernel::Eager);
}

#[test]
fn selective_recomputation_replays_what_the_framework_replays() {
    // Llama 3 8B (h 4096, kv 1024, SwiGLU f 14336), 8192 tokens per microbatch, 64
    // microbatches, 32 layers. torchtitan's per-op policy replays wk, wo and w3:
    // 2 x 8192 x 4096 x (1024 + 4096 + 14336) = 1.3057 TFLOP per layer, 36.5% of the
    // forward matmuls, and every elementwise kernel: 8192 x (43 x 4096 + 16 x 1.5 x
    // 14336) = 4.2614 GB. Megatron's replays the attention core: 2 x 8192^2 x 4096 FLOPs.
    let per_layer_op = 2.0 * 8192.0 * 4096.0 * (1024.0 + 4096.0 + 14336.0) * 1e-15
        + 8192.0 * (43.0 * 4096.0 + 16.0 * 1.5 * 14336.0) * 1e-12;
    let per_layer_megatron = 2.0 * 8192.0 * 8192.0 * 4096.0 * 1e-15;
    let compute = |framework, recompute| {
        let m = Mesh {
            recompute,
            ..mesh(1, 8, 1, 3, false)
        };
        breakdown_on(&m, &training(framework), &PerCall(0.0), &PER_FLOP)
            .compute
            .time_s
    };
    let none = compute(Framework::Fsdp, Recompute::None);
    let op = compute(Framework::Fsdp, Recompute::Selective) - none;
    assert!((op - 64.0 * 32.0 * per_layer_op).abs() < 1e-9, "{op}");
    assert!((op / (64.0 * 32.0) - 5.5675e-3).abs() < 1e-6, "{op}");
    let none = compute(Framework::Megatron, Recompute::None);
    let megatron = compute(Framework::Megatron, Recompute::Selective) - none;
    assert!(
        (megatron - 64.0 * 32.0 * per_layer_megatron).abs() < 1e-9,
        "{megatron}"
    );
}

#[test]
fn per_op_recomputation_replays_the_all_gathers_of_sequence_parallelism() {
    // TP 8 with SP: 4 calls per layer per pass, 2 passes; the per-op policy saves the
    // reduce-scatter outputs and replays the 2 all-gathers: 10 calls per layer, against
    // 8 under Megatron's selective recomputation. 8 microbatches x 32 layers x 1 ms.
    // torchtitan's DTensor also re-lays out each of those 10 tensors, a read and a write
    // of 8192 x 4096 x 2 bytes at the 0.86 x 3.35 TB/s an H100 streams: 46.59 us a call.
    let mut m = mesh(8, 64, 1, 0, true);
    m.recompute = Recompute::Selective;
    let relay: f64 = 2.0 * 8192.0 * 4096.0 * 2.0 / (0.86 * 3.35e12);
    assert!((relay - 46.59e-6).abs() < 1e-8, "{relay}");
    let op = breakdown(&m, &training(Framework::Fsdp), &PerCall(1e-3));
    let want = 8.0 * 32.0 * 10.0 * (1e-3 + relay);
    assert!(
        (op.tp_comm.time_s - want).abs() < 1e-9 * want,
        "{}",
        op.tp_comm.time_s
    );
    let megatron = breakdown(&m, &training(Framework::Megatron), &PerCall(1e-3));
    assert!((megatron.tp_comm.time_s - 8.0 * 32.0 * 8.0 * 1e-3).abs() < 1e-9);
}

#[test]
fn torchtitan_gathers_tensorwise_fp8_and_async_tp_drops_the_relayout_copies() {
    // Llama 3 8B, TP 8 with SP, 8 microbatches of one 8192-token sequence, no
    // recomputation: per layer and pass 2 all-gathers and 2 reduce-scatters of a 64 MiB
    // activation, 7/8 of it on the wire at 1 GB/s: 58.72 ms each in bf16. Tensorwise fp8
    // gathers 1 byte an element (29.36 ms); its reduce-scatters stay bf16.
    let m = mesh(8, 64, 1, 0, true);
    let wire = 8192.0 * 4096.0 * 2.0 * 7.0 / 8.0 / 1e9;
    let relay = |bytes: f64| 2.0 * bytes / (0.86 * 3.35e12);
    let act = 8192.0 * 4096.0 * 2.0;
    let per_pass = |gather_share: f64, relays: bool| {
        let copies = if relays {
            2.0 * relay(act * gather_share) + 2.0 * relay(act)
        } else {
            0.0
        };
        2.0 * wire * gather_share + 2.0 * wire + copies
    };
    let tp = |precision, tp_comm_overlap| {
        let t = Training {
            precision,
            tp_comm_overlap,
            ..training(Framework::Fsdp)
        };
        breakdown(&m, &t, &PerWireByte).tp_comm
    };
    let close = |got: f64, want: f64| (got - want).abs() < 1e-9 * want;
    let passes = 8.0 * 32.0 * 2.0;
    let bf16 = tp(Precision::Bf16, false);
    assert!(
        close(bf16.time_s, passes * per_pass(1.0, true)),
        "{}",
        bf16.time_s
    );
    let fp8 = tp(Precision::Fp8, false);
    assert!(
        close(fp8.time_s, passes * per_pass(0.5, true)),
        "{}",
        fp8.time_s
    );
    let rowwise = tp(Precision::Fp8Rowwise, false);
    assert!(close(rowwise.time_s, bf16.time_s), "{}", rowwise.time_s);
    // Async TP: no copies, and no overlap priced either: every second is exposed.
    let async_tp = tp(Precision::Bf16, true);
    assert!(close(async_tp.time_s, passes * per_pass(1.0, false)));
    assert!(close(async_tp.exposed_s, async_tp.time_s));
    // Megatron's [s, b, h] layout gathers in place.
    let te = breakdown(&m, &training(Framework::Megatron), &PerWireByte).tp_comm;
    assert!(close(te.time_s, passes * per_pass(1.0, false)));
}

#[test]
fn four_tp_collectives_per_layer_per_pass_with_sequence_parallelism() {
    // Megatron SP: reduce-scatter + all-gather around attention and around the MLP, in
    // forward and again in backward. Llama 3 8B, 32 layers, TP=8, 512/(64 x 1) = 8
    // microbatches: 8 x 32 x 2 passes x 4 calls x 1 ms = 2.048 s.
    let t = training(Framework::Megatron);
    let b = breakdown(&mesh(8, 64, 1, 0, true), &t, &PerCall(1e-3));
    assert!((b.tp_comm.time_s - 8.0 * 32.0 * 2.0 * 4.0 * 1e-3).abs() < 1e-9);
    // Without SP, one all-reduce in place of each pair: half the calls.
    let b = breakdown(&mesh(8, 64, 1, 0, false), &t, &PerCall(1e-3));
    assert!((b.tp_comm.time_s - 8.0 * 32.0 * 2.0 * 2.0 * 1e-3).abs() < 1e-9);
}

#[test]
fn a_hidden_collective_costs_the_compute_beside_it_its_measured_slowdown() {
    // Lee et al. 2025: compute overlapped with a collective runs 18.9% slower, so 1 s of
    // hidden collective costs 1 - 1/1.189 = 0.15896 s; what exceeds the window is paid
    // in full on top.
    let s = NOMINAL.overlap_slowdown;
    assert!((s - 0.15896).abs() < 1e-5, "{s}");
    let hidden = Term::overlapped(1.0, 2.0, 0.0, s);
    assert!((hidden.exposed_s - 0.15896).abs() < 1e-5, "{hidden:?}");
    let spill = Term::overlapped(3.0, 2.0, 0.0, s);
    assert!(
        (spill.exposed_s - (1.0 + 2.0 * 0.15896)).abs() < 1e-4,
        "{spill:?}"
    );
}

#[test]
fn zero3_moves_one_and_a_half_times_the_bytes_of_data_parallel() {
    // Rajbhandari et al. 2020 §7.2.2: DP all-reduces 2 x Psi per step, ZeRO-3 gathers the
    // parameters for forward and backward and reduce-scatters the gradients, 3 x Psi.
    // One microbatch (512 sequences on 512 GPUs), bf16 gradients.
    let t = training(Framework::Fsdp);
    let dp = breakdown(&mesh(1, 512, 1, 0, false), &t, &PerWireByte);
    let z3 = breakdown(&mesh(1, 512, 1, 3, false), &t, &PerWireByte);
    let ratio = (z3.dp_grad_sync.time_s + z3.zero_gather.time_s) / dp.dp_grad_sync.time_s;
    assert!((ratio - 1.5).abs() < 1e-9, "{ratio}");
    // fp32 gradient reduction doubles the reduce-scatter: (2 + 2) / (2 x 1) over bf16's 1.5.
    let t32 = Training {
        grad_reduce: ReduceDtype::Fp32,
        ..t
    };
    let z3_32 = breakdown(&mesh(1, 512, 1, 3, false), &t32, &PerWireByte);
    let ratio = (z3_32.dp_grad_sync.time_s + z3_32.zero_gather.time_s) / dp.dp_grad_sync.time_s;
    assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
}

#[test]
fn composer_backward_post_prefetch_exposes_the_backward_gathers() {
    // Llama 3 8B on DP 64 under ZeRO-3, 8 microbatches through 32 layers, every call 1 ms
    // against layers of tens of ms. Prefetched, each gather and reduce-scatter hides and
    // costs the compute beside it its overlap slowdown (0.159 of the call). Under
    // BACKWARD_POST the backward's gather waits exposed: 8 x 32 x 1 ms x (1 - 0.15896) =
    // 0.215307 s more, and the time on the wire is the same.
    let priced = |param_fetch| {
        let t = Training {
            param_fetch,
            ..training(Framework::Fsdp)
        };
        breakdown(&mesh(1, 64, 1, 3, false), &t, &PerCall(1e-3))
    };
    let (pre, post) = (
        priced(ParamFetch::Coalesced),
        priced(ParamFetch::PostBackward),
    );
    let sum = |b: &Breakdown, f: fn(&Term) -> f64| f(&b.dp_grad_sync) + f(&b.zero_gather);
    let more = sum(&post, |t| t.exposed_s) - sum(&pre, |t| t.exposed_s);
    let expected = 8.0 * 32.0 * 1e-3 * (1.0 - NOMINAL.overlap_slowdown);
    assert!((more - expected).abs() < 1e-9, "{more}");
    assert!((expected - 0.215307).abs() < 1e-6, "{expected}");
    assert_eq!(sum(&post, |t| t.time_s), sum(&pre, |t| t.time_s));
}

#[test]
fn deepspeed_before_0_6_fetches_tensor_by_tensor_and_hides_nothing() {
    // Llama 3 8B (32 layers of 9 tensors, the two 4,096-element RMSNorm weights under
    // DeepSpeed's persistence threshold) on DP=64, 8 microbatches of 1. Per microbatch:
    // 2 gather passes of 7 x 32 = 224 calls and 1 reduce-scatter pass of 9 x 32 = 288,
    // 736 calls at 1 ms plus 64 ranks x 5 us of list handling each: 8 x 736 x 1.32 ms =
    // 7.77216 s, all of it exposed, 2 x 224 / 288 of it in the gathers. The coalesced
    // fetch makes 96 calls per microbatch and hides what fits behind each layer's compute.
    let per_tensor = Training {
        param_fetch: ParamFetch::PerTensor,
        ..training(Framework::Deepspeed)
    };
    let b = breakdown(&mesh(1, 64, 1, 3, false), &per_tensor, &PerCall(1e-3));
    let total = b.dp_grad_sync.time_s + b.zero_gather.time_s;
    assert!((total - 7.77216).abs() < 1e-9, "{total}");
    let ratio = b.zero_gather.time_s / b.dp_grad_sync.time_s;
    assert!((ratio - 2.0 * 224.0 / 288.0).abs() < 1e-12, "{ratio}");
    let exposed = b.dp_grad_sync.exposed_s + b.zero_gather.exposed_s;
    assert!((exposed - total).abs() < 1e-12, "{exposed}");
    let coalesced = breakdown(
        &mesh(1, 64, 1, 3, false),
        &training(Framework::Deepspeed),
        &PerCall(1e-3),
    );
    let calls = (coalesced.dp_grad_sync.time_s + coalesced.zero_gather.time_s) / 1e-3;
    assert!((calls - 8.0 * 96.0).abs() < 1e-6, "{calls}");
    assert!(coalesced.zero_gather.exposed_s < coalesced.zero_gather.time_s);
    // Below ZeRO-3 nothing is fetched: the gradient buckets are the same either way.
    let zero1 = |t: &Training| {
        let b = breakdown(&mesh(1, 64, 1, 1, false), t, &PerCall(1e-3));
        b.dp_grad_sync.time_s + b.zero_gather.time_s
    };
    assert_eq!(zero1(&per_tensor), zero1(&training(Framework::Deepspeed)));
}

#[test]
fn gradient_calls_follow_the_framework_buckets() {
    // Llama 3 8B, DP=64: Megatron-Core buckets max(40M, 1M x 64) = 64M parameters;
    // PyTorch DDP 25 MiB of bf16 gradients; FSDP one unit per layer (3 calls each per
    // microbatch: gather, gather, reduce-scatter), 8 microbatches.
    let params = catalog::model("llama3-8b").unwrap().shape.params().total();
    let per_call = 1e-3;
    let calls = |framework: Framework, zero: u8| {
        let b = breakdown(
            &mesh(1, 64, 1, zero, false),
            &training(framework),
            &PerCall(per_call),
        );
        (b.dp_grad_sync.time_s + b.zero_gather.time_s) / per_call
    };
    let megatron = calls(Framework::Megatron, 0);
    assert!(
        (megatron - (params / 64e6).ceil()).abs() < 1e-9,
        "{megatron}"
    );
    let ddp = calls(Framework::Fsdp, 0);
    assert!(
        (ddp - (params * 2.0 / (25.0 * 1048576.0)).ceil()).abs() < 1e-9,
        "{ddp}"
    );
    let fsdp = calls(Framework::Fsdp, 3);
    assert!((fsdp - 8.0 * 32.0 * 3.0).abs() < 1e-9, "{fsdp}");
}

#[test]
fn stragglers_grow_with_the_log_of_the_gpu_count() {
    // sqrt(2 ln n): 2.04 at 8 GPUs, 4.18 at 6,144.
    assert_eq!(expected_max_of_normals(1), 0.0);
    assert!((expected_max_of_normals(8) - (2.0 * 8f64.ln()).sqrt()).abs() < 1e-12);
    assert!((expected_max_of_normals(6144) - 4.1775).abs() < 1e-3);
}

#[test]
fn the_term_table_follows_the_kinds_and_their_json_names() {
    for kind in TermKind::ALL {
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{}\"", kind.name()));
    }
    let b = Breakdown::default();
    let kinds: Vec<TermKind> = b.terms().iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, TermKind::ALL);
}

/// DeepSeek-V3 on 2,048 H800 as DeepSeek laid it out (TP 1, PP 16, EP 64, 120 microbatches
/// of one sequence), under `schedule`, with the 61 layers split 3 + 14 x 4 + 2.
fn deepseek(schedule: crate::mesh::Schedule) -> crate::cost::Evaluation {
    let model = catalog::model("deepseek-v3").unwrap().shape;
    let cluster = catalog::cluster("hgx-h800").unwrap();
    let training = Training {
        precision: Precision::Fp8Blockwise,
        moe_dispatch: crate::mesh::MoeDispatch::NodeDedup,
        ..Training::megatron(4096, 15360)
    };
    let scenario = crate::cost::Scenario::nominal(model, training, cluster, 2048, NOMINAL);
    scenario.evaluate(&Mesh {
        pp: 16,
        ep: 64,
        recompute: Recompute::Selective,
        schedule,
        edge_stages: Some(crate::mesh::EdgeStages { first: 3, last: 2 }),
        ..mesh(1, 128, 1, 1, false)
    })
}

#[test]
fn dualpipe_hides_the_all_to_all_and_shrinks_the_bubble_at_the_same_compute() {
    use crate::mesh::Schedule;
    let plain = deepseek(Schedule::OneFOneB);
    let dual = deepseek(Schedule::Dualpipe);
    let (p, d) = (&plain.breakdown, &dual.breakdown);
    // 1F1B's last stage paces its pipeline: 2 layers, the MTP module's and two output
    // layers of 129,280 x 7,168 weights, more compute than the inner
    // stages' 4 layers. DualPipe's first rank runs the first and the last stage, half its
    // microbatches each: (3 + 2 + 1) / 2 layers and one output layer a microbatch.
    assert!(d.compute.time_s < p.compute.time_s);
    // 1F1B waits for every all-to-all; DualPipe hides what the other microbatch's compute
    // covers, at 20 of 132 SMs meanwhile, except in the 23 of 120 chunks its first and last
    // ranks run alone.
    assert_eq!(p.ep_all_to_all.exposed_s, p.ep_all_to_all.time_s);
    let (a2a, paired) = (d.ep_all_to_all.time_s, 97.0 / 120.0);
    let hidden = paired * d.compute.time_s.min(a2a);
    let expected = a2a - hidden * (1.0 - 20.0 / 132.0);
    assert!((d.ep_all_to_all.exposed_s / expected - 1.0).abs() < 1e-9);
    // (16/2 - 1) x 2/3 microbatches idle against 15, each microbatch shorter.
    assert!(d.pipeline_bubble.exposed_s < p.pipeline_bubble.exposed_s * (7.0 * 2.0 / 3.0) / 15.0);
    // Twice the stages' weights a rank: 8 inner layers against 4.
    assert!(dual.memory.weights > 1.9 * plain.memory.weights);
    assert!(dual.step_time_s < plain.step_time_s);
}

#[test]
fn the_last_stage_runs_the_mtp_module_and_its_output_layer() {
    use crate::mesh::Schedule;
    // In bf16 over NCCL's all-to-all, at 3 + 14 x 4 + 2 the inner stages' 4 layers and their
    // all-to-alls pace the pipeline; at 1 + 14 x 4 + 4 the last stage's 4 + 1 layers and its
    // two output layers do, with more than 5/4 of the compute.
    let model = catalog::model("deepseek-v3").unwrap().shape;
    let cluster = catalog::cluster("hgx-h800").unwrap();
    let scenario = crate::cost::Scenario::nominal(
        model,
        Training::megatron(4096, 15360),
        cluster,
        2048,
        NOMINAL,
    );
    let at = |first, last| {
        scenario
            .evaluate(&Mesh {
                pp: 16,
                ep: 64,
                schedule: Schedule::OneFOneB,
                edge_stages: Some(crate::mesh::EdgeStages { first, last }),
                ..mesh(1, 128, 1, 1, false)
            })
            .breakdown
            .compute
            .time_s
    };
    let (light, heavy) = (at(3, 2), at(1, 4));
    assert!(heavy > light * 5.0 / 4.0, "{heavy} vs {light}");
}

/// Mixtral 8x7B on 32 H100 at EP 8 (four nodes, so the all-to-all crosses the network),
/// 4,096-token sequences, a 256-sequence batch, under `schedule` with `pp` x `v` stages.
fn mixtral(schedule: crate::mesh::Schedule, pp: u32, v: u32) -> crate::cost::Evaluation {
    let model = catalog::model("mixtral-8x7b").unwrap().shape;
    let cluster = catalog::cluster("dgx-h100").unwrap();
    let scenario =
        crate::cost::Scenario::nominal(model, Training::megatron(4096, 256), cluster, 32, NOMINAL);
    scenario.evaluate(&Mesh {
        pp,
        ep: 8,
        virtual_stages: v,
        schedule,
        ..mesh(1, 32 / pp, 1, 1, false)
    })
}

#[test]
fn combined_1f1b_hides_all_but_the_unpaired_all_to_alls_at_the_same_compute() {
    use crate::mesh::Schedule;
    for (pp, v, m) in [(1, 1, 8.0), (4, 2, 32.0)] {
        let plain = mixtral(Schedule::OneFOneB, pp, v);
        let combined = mixtral(Schedule::Combined1F1B, pp, v);
        let (p, c) = (&plain.breakdown, &combined.breakdown);
        assert_eq!(c.compute.time_s, p.compute.time_s);
        assert_eq!(c.pipeline_bubble.exposed_s, p.pipeline_bubble.exposed_s);
        assert_eq!(c.ep_all_to_all.time_s, p.ep_all_to_all.time_s);
        assert_eq!(p.ep_all_to_all.exposed_s, p.ep_all_to_all.time_s);
        // Without a pipeline the first forward and the last backward run alone: 1 of 8
        // microbatches' all-to-alls. PP 4 x v 2: 2 x 3 + 1 x 4 + 1 = 11 warm-up chunks of
        // 32 x 2. The rest hides under the paired compute, at 20 of 132 SMs.
        let unpaired = if pp == 1 { 1.0 / m } else { 11.0 / (m * 2.0) };
        let a2a = c.ep_all_to_all.time_s;
        let hidden = ((1.0 - unpaired) * a2a).min((1.0 - unpaired) * c.compute.time_s);
        let expected = unpaired * a2a + ((1.0 - unpaired) * a2a - hidden) + hidden * 20.0 / 132.0;
        assert!(
            (c.ep_all_to_all.exposed_s / expected - 1.0).abs() < 1e-9,
            "pp {pp}: {} against {expected}",
            c.ep_all_to_all.exposed_s
        );
        assert!(c.ep_all_to_all.exposed_s < 0.5 * p.ep_all_to_all.exposed_s);
        // One more chunk of activations: one layer of 32 without a pipeline, one virtual
        // stage of the first rank's two with PP 4 x v 2 (of its 4 + 3/2 in flight).
        let grown = combined.memory.activations / plain.memory.activations;
        assert!(grown > 1.0, "pp {pp}: {grown}");
        assert!(
            grown
                < if pp == 1 {
                    1.0 + 1.5 / 32.0
                } else {
                    1.0 + 1.0 / 5.5
                }
        );
        assert!(combined.step_time_s < plain.step_time_s);
    }
}

#[test]
fn a_capacity_caps_the_busiest_expert_and_padding_carries_it_whatever_the_routing() {
    // Mixtral 8x7B at EP 8 on 4 nodes: dropless, the busiest expert carries 1.25 x its
    // share; a capacity factor of 1.0 drops what exceeds the share; padded to a capacity of
    // 2.0, every expert computes and exchanges twice its share.
    let priced = |capacity_factor, pad_to_capacity| {
        let mut model = catalog::model("mixtral-8x7b").unwrap().shape;
        let moe = model.moe.as_mut().unwrap();
        moe.capacity_factor = capacity_factor;
        moe.pad_to_capacity = pad_to_capacity;
        let cluster = catalog::cluster("dgx-h100").unwrap();
        let training = Training::megatron(4096, 256);
        let scenario = crate::cost::Scenario::nominal(model, training, cluster, 32, NOMINAL);
        scenario
            .evaluate(&Mesh {
                ep: 8,
                ..mesh(1, 32, 1, 1, false)
            })
            .breakdown
    };
    let dropless = priced(None, false);
    let capped = priced(Some(1.0), false);
    let roomy = priced(Some(2.0), false);
    let padded = priced(Some(2.0), true);
    // A capacity above the imbalance changes nothing.
    assert_eq!(roomy.ep_all_to_all.time_s, dropless.ep_all_to_all.time_s);
    assert_eq!(roomy.compute.time_s, dropless.compute.time_s);
    // The exchange grows with the bytes: 1.0 / 1.25 and 2.0 / 1.25 of them, less the
    // per-call latency that does not grow.
    let ratio = |b: &Breakdown| b.ep_all_to_all.time_s / dropless.ep_all_to_all.time_s;
    assert!((0.8..0.85).contains(&ratio(&capped)), "{}", ratio(&capped));
    assert!((1.45..=1.6).contains(&ratio(&padded)), "{}", ratio(&padded));
    assert!(capped.compute.time_s < dropless.compute.time_s);
    assert!(padded.compute.time_s > dropless.compute.time_s);
}

#[test]
fn per_head_query_and_key_norms_cost_their_bytes_and_two_kernels() {
    // Llama 3 8B's shape with Qwen3's norms, DP 8 (64 microbatches of 8,192 tokens): each
    // layer's forward reads and writes 8,192 x (4,096 + 1,024) bf16 elements, 167.8 MB, at
    // 1 TB/s; the backward twice that, as the other memory-bound kernels'. A forward pass
    // issues two kernels more, at a second each (the backward's host share set to 1).
    let plain = catalog::model("llama3-8b").unwrap().shape;
    let normed = ModelShape {
        qk_norm: true,
        ..plain.clone()
    };
    let e = Efficiency {
        host_bwd_share: 1.0,
        ..NOMINAL
    };
    let m = mesh(1, 8, 1, 0, false);
    let t = training(Framework::Megatron);
    let step =
        |model: &ModelShape, host: f64| step_of(model, &m, &t, (&PerCall(0.0), &PerFlop(host)), &e);
    let bytes = 2.0 * 2.0 * 8192.0 * (4096.0 + 1024.0);
    assert_eq!(bytes, 167_772_160.0);
    let extra = step(&normed, 0.0).compute.time_s - step(&plain, 0.0).compute.time_s;
    assert!(
        (extra - 64.0 * 32.0 * 3.0 * bytes * 1e-12).abs() < 1e-9,
        "{extra}"
    );
    // Kernels: 2 a forward pass, 4 a backward, of host time the GPU waits on less the time
    // the norms themselves run.
    let launches = step(&normed, 1.0).launch.time_s - step(&plain, 1.0).launch.time_s;
    assert!(
        (launches - (64.0 * 32.0 * 6.0 - extra)).abs() < 1e-6,
        "{launches}"
    );
}

#[test]
fn a_step_captured_in_cuda_graphs_waits_for_no_host() {
    // Llama 3 8B on DP 64 behind a host of a second a kernel: every pass host-bound eager;
    // captured (torchtitan 0.3 without a pipeline) the host launches no kernel. Under a
    // pipeline 0.3 captures nothing, and an MoE model's expert-parallel all-to-all waits for
    // the host, so neither is captured.
    let model = catalog::model("llama3-8b").unwrap().shape;
    let launch = |m: &Mesh, graphs: bool| {
        let t = Training {
            step_graphs: graphs,
            ..training(Framework::Fsdp)
        };
        step_of(&model, m, &t, (&PerCall(0.0), &PerFlop(1.0)), &NOMINAL)
            .launch
            .time_s
    };
    let flat = mesh(1, 64, 1, 0, false);
    assert!(launch(&flat, false) > 1000.0);
    assert_eq!(launch(&flat, true), 0.0);
    let piped = Mesh {
        pp: 2,
        dp: 32,
        ..flat
    };
    assert_eq!(launch(&piped, true), launch(&piped, false));
    let t = Training {
        step_graphs: true,
        ..training(Framework::Fsdp)
    };
    let ep = Mesh { ep: 8, ..flat };
    assert!(t.step_captured(&flat, true));
    assert!(!t.step_captured(&ep, true));
    assert!(t.step_captured(&ep, false));
}
