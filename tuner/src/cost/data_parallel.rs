//! Data parallelism: the parameters a GPU holds and owns, gradient buckets, the gradient
//! reduction and ZeRO's parameter gathers.

use super::collective::Collective;
use super::inputs::Inputs;
use super::term::Term;
use crate::catalog::frameworks;
use crate::mesh::ParamFetch;
use crate::placement::GroupSpan;

/// Parameters held by the last stage per GPU, dense and expert, before ZeRO sharding.
pub(super) fn stage_params(x: &Inputs) -> (f64, f64) {
    let p = x.model.params();
    let tp = f64::from(x.mesh.tp);
    let share = x.mesh.stage_layers(x.model.layers) / f64::from(x.model.layers);
    let output = f64::from(x.model.vocab) * f64::from(x.model.hidden);
    let embed = if x.mesh.pp == 1 { p.embeddings } else { output };
    (
        (p.dense_layers * share + embed) / tp,
        p.experts * share / f64::from(x.mesh.etp() * x.mesh.ep),
    )
}

/// Parameters whose optimizer state this GPU updates: ZeRO shards them over the gradient
/// group (DP x CP).
pub(super) fn owned_params(x: &Inputs) -> f64 {
    let (dense, experts) = stage_params(x);
    if x.mesh.zero_stage >= 1 {
        dense / f64::from(x.mesh.dp * x.mesh.cp) + experts / f64::from(x.mesh.expert_dp())
    } else {
        dense + experts
    }
}

/// The compute a data-parallel collective can hide behind.
pub(super) struct Windows {
    /// Microbatches per step.
    pub m: f64,
    /// Layers on the stage.
    pub stage_layers: f64,
    /// One layer's forward pass of one microbatch.
    pub fwd_layer: f64,
    /// One layer's backward pass of one microbatch, with its recomputation.
    pub bwd_layer: f64,
    /// Pipeline idle time at the end (and start) of the step.
    pub idle: f64,
}

/// One data-parallel collective over both weight kinds, each over its own group in its own
/// calls.
struct Calls<'a, 'b> {
    x: &'a Inputs<'b>,
    /// Dense and expert parameters with their gradient groups.
    groups: [(f64, GroupSpan); 2],
    /// Layers on the stage.
    stage_layers: f64,
    /// Whether each call hands c10d one tensor per rank (DeepSpeed's ZeRO-3 before v0.6).
    per_tensor: bool,
}

impl Calls<'_, '_> {
    /// Time and calls of one pass of collective `c`: `calls_per_layer` where the framework
    /// calls per layer or per tensor, else one call per gradient bucket; plus host time where
    /// each call takes a list of the ranks' tensors. The bytes split evenly over the calls,
    /// which prices each call's latency exactly and its bandwidth within NCCL's choice of
    /// protocol by size.
    fn pass(
        &self,
        c: Collective,
        bytes_per_param: f64,
        calls_per_layer: Option<f64>,
    ) -> (f64, f64) {
        let x = self.x;
        let mut total = 0.0;
        let mut calls = 0.0;
        for (params, group) in self.groups {
            if params <= 0.0 || group.ranks <= 1 {
                continue;
            }
            let n = match calls_per_layer {
                Some(k) => k * self.stage_layers.ceil(),
                None => {
                    let grad_bytes = x.training.grad_reduce.bytes();
                    x.training
                        .framework
                        .defaults()
                        .bucket
                        .count(grad_bytes, params, group.ranks)
                }
            };
            total += x
                .collectives
                .calls_s(c, &group, params * bytes_per_param, n);
            if self.per_tensor {
                total += n * f64::from(group.ranks) * x.efficiency.list_host_s_per_rank;
            }
            calls += n;
        }
        (total, calls)
    }
}

/// Data-parallel terms, gradient reduction and ZeRO gathers, one call per bucket or layer.
///
/// ZeRO-0 all-reduces gradients once per step; ZeRO-1 reduce-scatters them and all-gathers
/// the updated bf16 parameters, the same volume (Rajbhandari et al. 2020 §7.2); ZeRO-2
/// reduce-scatters after every microbatch's backward. Where the framework overlaps the
/// reduction, only what exceeds the last microbatch's backward is exposed, and at least the
/// last bucket. ZeRO-3 is [`zero3`], or [`zero3_per_tensor`] under [`ParamFetch::PerTensor`].
pub(super) fn data_parallel(x: &Inputs, w: &Windows) -> (Term, Term) {
    let mesh = x.mesh;
    let g = &x.placement.grad;
    if g.ranks <= 1 && x.placement.expert_dp.ranks <= 1 {
        return (Term::default(), Term::default());
    }
    let (dense, experts) = stage_params(x);
    let grad_bytes = x.training.grad_reduce.bytes();
    let per_tensor = x.training.param_fetch == ParamFetch::PerTensor && mesh.zero_stage >= 3;
    let calls = Calls {
        x,
        groups: [(dense, *g), (experts, x.placement.expert_dp)],
        stage_layers: w.stage_layers,
        per_tensor,
    };
    let backward = w.stage_layers * w.bwd_layer + w.idle;
    let forward = w.stage_layers * w.fwd_layer + w.idle;
    let overlap = x.training.overlap_grad_reduce;
    let slowdown = x.efficiency.overlap_slowdown;
    let exposure = |(t, calls): (f64, f64), window: f64| {
        if overlap {
            Term::overlapped(t, window, t / calls.max(1.0), slowdown)
        } else {
            Term::exposed(t)
        }
    };
    match mesh.zero_stage {
        0 => (
            exposure(
                calls.pass(Collective::AllReduce, grad_bytes, None),
                backward,
            ),
            Term::default(),
        ),
        1 | 2 => {
            let rs = calls.pass(Collective::ReduceScatter, grad_bytes, None);
            let ag = calls.pass(Collective::AllGather, 2.0, None);
            let reduce = if mesh.zero_stage == 2 {
                let all = exposure(rs, backward);
                Term {
                    time_s: w.m * all.time_s,
                    exposed_s: w.m * all.exposed_s,
                }
            } else {
                exposure(rs, backward)
            };
            // Megatron-Core overlaps the parameter gather with the next step's forward.
            (reduce, exposure(ag, forward))
        }
        _ if per_tensor => zero3_per_tensor(&calls, grad_bytes, w.m),
        _ => zero3(&calls, grad_bytes, w),
    }
}

/// ZeRO-3 (FSDP) gathers each layer's parameters before its forward and again before its
/// backward, and reduce-scatters its gradients, for every microbatch, prefetching one layer
/// ahead: what exceeds each layer's compute is exposed, plus the first gather; under
/// [`ParamFetch::PostBackward`] the backward's gathers are exposed whole.
fn zero3(calls: &Calls, grad_bytes: f64, w: &Windows) -> (Term, Term) {
    let x = calls.x;
    let slowdown = x.efficiency.overlap_slowdown;
    let (ag, layers) = calls.pass(Collective::AllGather, 2.0, Some(1.0));
    let (rs, _) = calls.pass(Collective::ReduceScatter, grad_bytes, Some(1.0));
    let (ag_l, rs_l) = (ag / layers, rs / layers);
    let fwd = Term::overlapped(ag_l, w.fwd_layer, 0.0, slowdown);
    let bwd = if x.training.param_fetch == ParamFetch::PostBackward {
        let rs = Term::overlapped(rs_l, w.bwd_layer, 0.0, slowdown);
        Term::exposed(ag_l + rs.exposed_s)
    } else {
        Term::overlapped(ag_l + rs_l, w.bwd_layer, 0.0, slowdown)
    };
    let per_mb = layers * (fwd.exposed_s + bwd.exposed_s) + ag_l;
    let total = w.m * layers * (2.0 * ag_l + rs_l);
    let exposed = w.m * per_mb;
    let share = |part: f64| Term {
        time_s: part,
        exposed_s: exposed * part / total,
    };
    (share(w.m * layers * rs_l), share(w.m * layers * 2.0 * ag_l))
}

/// DeepSpeed's ZeRO-3 before v0.6.0 ([`ParamFetch::PerTensor`]): the gathers and
/// reduce-scatters of [`zero3`] per parameter tensor, each call behind a device-wide
/// synchronize and handing c10d one tensor per rank: all of it is priced exposed, and each
/// call pays host time per rank. Tensors under DeepSpeed's persistence threshold stay whole
/// on every rank and are gathered once per step; every tensor's gradient is
/// reduce-scattered.
///
/// Two things of v0.4's `stage3.py` are left out, and they pull opposite ways: a module's
/// hook prefetches the next tensor while fewer than `stage3_max_live_parameters` (1e9)
/// elements are gathered, and that gather runs beside the module's compute; under full
/// recomputation the replay gathers every tensor again, and the backward after it again those
/// whose next use lies more than `stage3_max_reuse_distance` (1e9) elements of other modules
/// away. Followed by hand through one layer of the 175B GPT on 1,536 GPUs at the model's
/// per-call times, the prefetch hides more of the forward than the re-gathers add to the
/// backward, so together they would make a step the model already prices 33% too fast faster
/// still: the missing cost is elsewhere.
fn zero3_per_tensor(calls: &Calls, grad_bytes: f64, m: f64) -> (Term, Term) {
    let tensors = calls.x.model.layer_tensors();
    let gathered = tensors
        .iter()
        .filter(|&&n| n >= frameworks::DEEPSPEED_PERSISTENCE_THRESHOLD)
        .count();
    let (ag, _) = calls.pass(Collective::AllGather, 2.0, Some(gathered as f64));
    let (rs, _) = calls.pass(
        Collective::ReduceScatter,
        grad_bytes,
        Some(tensors.len() as f64),
    );
    (Term::exposed(m * rs), Term::exposed(m * 2.0 * ag))
}
