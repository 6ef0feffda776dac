//! Mesh search: enumerate every valid layout for the GPU count, drop what does not fit
//! memory, rank the rest by predicted step time at the same global batch.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::cost::{Evaluation, LayerCache, Scenario};
use crate::mesh::{Mesh, Recompute, Schedule};
use crate::model::ModelShape;

mod alike;
mod constraints;
pub use alike::{groups, prices_alike, search_distinct, Distinct, ALIKE_WITHIN};
pub(crate) use constraints::COUNTS;
pub use constraints::{Constraints, ExpertSplit};

use constraints::{chunks_evenly, edge_stages, interleaves, MAX_CP};

/// Largest virtual-stage count and microbatch searched; beyond them the schedule is all
/// overhead on any cluster we know.
const MAX_VIRTUAL_STAGES: u32 = 8;
const MAX_MICROBATCH: u32 = 64;

/// The divisors of n in increasing order, found up to sqrt(n) (a million-GPU count has a few
/// dozen; walking every integer up to it took seconds per call).
fn divisors(n: u32) -> impl Iterator<Item = u32> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1u32;
    while u64::from(d) * u64::from(d) <= u64::from(n) {
        if n % d == 0 {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.into_iter().chain(large.into_iter().rev())
}

fn pick(fixed: Option<u32>, all: impl Iterator<Item = u32>) -> Vec<u32> {
    match fixed {
        Some(v) => all.filter(|&x| x == v).collect(),
        None => all.collect(),
    }
}

/// Calls `f` on every valid mesh for `gpus` GPUs.
///
/// Valid: tp divides the heads and KV heads; pp·v splits the layers, or pp stages do with
/// uneven first and last stages ([`constraints::edge_stages`]) of a layer a chunk at least
/// ([`constraints::interleaves`]); cp splits the sequence into 2·cp balanced chunks; ep
/// divides the experts and dp x cp x tp / etp; dp·mb divides the global batch;
/// interleaving needs pp > 1 and microbatches divisible by pp (Megatron-LM); sequence
/// parallelism needs tp > 1; ZeRO-2/3 do not combine with pipeline parallelism (neither
/// DeepSpeed nor Megatron-LM allows it); DualPipe, searched only where pinned, needs an even
/// stage count and an even microbatch count of at least two a stage.
pub fn for_each_mesh(
    model: &ModelShape,
    seq_len: u32,
    global_batch: u32,
    gpus: u32,
    c: &Constraints,
    mut f: impl FnMut(Mesh),
) {
    let moe_experts = model.moe.as_ref().map(|m| m.experts);
    let recomputes = match c.recompute {
        Some(r) => vec![r],
        None => vec![Recompute::None, Recompute::Selective, Recompute::Full],
    };
    for tp in pick(c.tp, divisors(gpus)) {
        if model.heads % tp != 0 || model.kv_heads % tp != 0 {
            continue;
        }
        for cp in pick(c.cp, (0..=MAX_CP.ilog2()).map(|i| 1 << i)) {
            if (gpus / tp) % cp != 0 || seq_len % (2 * cp) != 0 && cp > 1 {
                continue;
            }
            for pp in pick(c.pp, divisors(gpus / (tp * cp))) {
                let edges = (c.first_stage_layers, c.last_stage_layers);
                let Ok(edge_stages) = edge_stages(model.layers, pp, edges) else {
                    continue;
                };
                let pinned = c.virtual_stages.is_some() || edges != (None, None);
                let dp = gpus / (tp * cp * pp);
                if c.dp.is_some_and(|d| d != dp) || global_batch % dp != 0 {
                    continue;
                }
                let per_replica = global_batch / dp;
                for (expert_tp, ep) in expert_layouts(c, moe_experts, tp, dp * cp) {
                    for mb in pick(
                        c.microbatch_size,
                        divisors(per_replica)
                            .filter(|&b| b <= MAX_MICROBATCH || c.microbatch_size.is_some()),
                    ) {
                        let m = per_replica / mb;
                        if c.microbatches.is_some_and(|want| want != m) {
                            continue;
                        }
                        // A pinned count may exceed the searched range (NeMo runs one layer per
                        // virtual stage); validity below still checks the split.
                        let vs = match (pp, c.virtual_stages) {
                            (1, _) => vec![1],
                            (_, Some(v)) => vec![v],
                            (_, None) => (1..=MAX_VIRTUAL_STAGES).collect(),
                        };
                        for v in vs {
                            // Interleaving needs microbatches in multiples of the stages, and
                            // a chunk of one layer at least; unpinned, equal chunks a stage.
                            if v == 0
                                || (v > 1
                                    && (m % pp != 0
                                        || !interleaves(model.layers, pp, v, edge_stages)
                                        || !(pinned
                                            || chunks_evenly(model.layers, pp, v, edge_stages))))
                                || c.virtual_stages.is_some_and(|x| x != v)
                            {
                                continue;
                            }
                            let schedule = c.schedule.unwrap_or(Schedule::OneFOneB);
                            // DualPipe sends microbatches in from both ends, half each, over
                            // pairs of stages, and has no virtual stages (DeepSeek-V3 §3.2.1);
                            // its `step` asserts num_chunks >= num_ranks * 2 (deepseek-ai/
                            // DualPipe, dualpipe/dualpipe.py), which its warm-up needs.
                            if schedule == Schedule::Dualpipe
                                && (pp % 2 != 0 || m % 2 != 0 || m < 2 * pp || v > 1)
                            {
                                continue;
                            }
                            // Combined 1F1B pairs microbatches across expert-parallel ranks,
                            // over virtual stages under a pipeline (`check_combined_1f1b`).
                            if schedule == Schedule::Combined1F1B && (ep == 1 || (pp > 1 && v == 1))
                            {
                                continue;
                            }
                            let zeros: Vec<u8> = match c.zero_stage {
                                Some(z) => vec![z],
                                None if dp == 1 => vec![0],
                                None if pp > 1 => vec![0, 1],
                                None => vec![0, 1, 2, 3],
                            };
                            for &zero_stage in &zeros {
                                for &recompute in &recomputes {
                                    if schedule == Schedule::Combined1F1B
                                        && recompute == Recompute::Full
                                    {
                                        continue;
                                    }
                                    // Megatron-Core trains MoE under TP only with
                                    // sequence parallelism (`MoELayer.forward`), and
                                    // torchtitan's TP plans shard the sequence.
                                    let sps: &[bool] = match c.sequence_parallel {
                                        Some(true) if tp > 1 => &[true],
                                        Some(false) => &[false],
                                        Some(true) => &[],
                                        None if tp > 1 && moe_experts.is_some() => &[true],
                                        None if tp > 1 => &[false, true],
                                        None => &[false],
                                    };
                                    for &sequence_parallel in sps {
                                        f(Mesh {
                                            tp,
                                            pp,
                                            dp,
                                            cp,
                                            ep,
                                            microbatch_size: mb,
                                            virtual_stages: v,
                                            zero_stage,
                                            recompute,
                                            sequence_parallel,
                                            schedule,
                                            edge_stages,
                                            expert_tp,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The (expert TP, EP) pairs the experts of a stage of `tp` x `dense` ranks (DP x CP) take,
/// as `c` and its framework ([`ExpertSplit`]) allow: split as the dense weights (`None`), or
/// whole (MoE Parallel Folding), where the expert-parallel group takes its ranks from TP x CP
/// x DP, as Megatron-Core's expert rank generator folds them (`ep x etp` divides
/// `tp x cp x dp`, `initialize_model_parallel`). Whole experts without EP replicate every
/// expert on every TP rank, and are taken only where pinned.
fn expert_layouts(
    c: &Constraints,
    experts: Option<u32>,
    tp: u32,
    dense: u32,
) -> Vec<(Option<u32>, u32)> {
    let etps = match (experts, c.etp, c.expert_split) {
        (None, _, _) => vec![tp],
        (Some(_), Some(etp), _) => vec![etp],
        (Some(_), None, ExpertSplit::AsDense) => vec![tp],
        (Some(_), None, _) if tp > 1 => vec![tp, 1],
        (Some(_), None, _) => vec![tp],
    };
    let unpinned = c.etp.is_none();
    let mut out = Vec::new();
    for etp in etps.into_iter().filter(|&etp| tp % etp == 0) {
        let expert_tp = (etp != tp).then_some(etp);
        for ep in pick(c.ep, divisors(dense * (tp / etp))) {
            let folded_alone = unpinned && expert_tp.is_some() && ep == 1;
            let split_under_ep = unpinned
                && c.expert_split == ExpertSplit::WholeUnderEp
                && expert_tp.is_none()
                && tp > 1
                && ep > 1;
            if !folded_alone && !split_under_ep && experts.map_or(ep == 1, |e| e % ep == 0) {
                out.push((expert_tp, ep));
            }
        }
    }
    out
}

/// Calls `f` on every valid mesh of the scenario that `c` allows.
fn for_each_scenario_mesh(scenario: &Scenario, c: &Constraints, f: impl FnMut(Mesh)) {
    let t = &scenario.training;
    for_each_mesh(
        &scenario.model,
        t.seq_len,
        t.global_batch,
        scenario.gpus,
        c,
        f,
    );
}

/// Prices every valid mesh of the scenario that `c` allows.
pub fn for_each_evaluation(scenario: &Scenario, c: &Constraints, mut f: impl FnMut(Evaluation)) {
    let mut layers = LayerCache::default();
    for_each_scenario_mesh(scenario, c, |mesh| {
        f(scenario.evaluate_cached(&mesh, scenario.memory(&mesh), &mut layers))
    });
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct SearchResult {
    /// Meshes priced.
    pub evaluated: usize,
    /// Meshes that fit memory.
    pub fitting: usize,
    /// The fastest fitting meshes, fastest first.
    pub ranked: Vec<Evaluation>,
    /// The mesh needing the least memory, kept to explain why nothing fits.
    pub leanest: Option<Evaluation>,
}

struct BySlowest(Evaluation);

impl PartialEq for BySlowest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for BySlowest {}
impl PartialOrd for BySlowest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for BySlowest {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .step_time_s
            .total_cmp(&other.0.step_time_s)
            .then_with(|| simplicity(&self.0.mesh).cmp(&simplicity(&other.0.mesh)))
    }
}

/// Exact ties (a CP rank and a DP rank often price the same) go to the simpler layout, so that
/// every run of the search ranks them alike: less context parallelism, fewer stages and
/// virtual stages, less TP, less sharding.
fn simplicity(m: &Mesh) -> (u32, u32, u32, u32, u32, u8) {
    (m.cp, m.ep, m.pp, m.virtual_stages, m.tp, m.zero_stage)
}

/// Prices every valid mesh and keeps the `top` fastest that fit.
pub fn search(scenario: &Scenario, c: &Constraints, top: usize) -> SearchResult {
    let mut heap: BinaryHeap<BySlowest> = BinaryHeap::with_capacity(top + 1);
    let mut evaluated = 0;
    let mut fitting = 0;
    let mut leanest: Option<Evaluation> = None;
    let mut layers = LayerCache::default();
    for_each_scenario_mesh(scenario, c, |mesh| {
        evaluated += 1;
        // Most meshes do not fit; their memory alone says so, and only one leaner than
        // the leanest so far needs its step time (to explain why nothing fits).
        let memory = scenario.memory(&mesh);
        if !scenario.fits(&memory) {
            if leanest
                .as_ref()
                .is_none_or(|l| memory.total < l.memory.total)
            {
                leanest = Some(scenario.evaluate(&mesh));
            }
            return;
        }
        let e = scenario.evaluate_cached(&mesh, memory, &mut layers);
        fitting += 1;
        if heap.len() < top
            || heap
                .peek()
                .is_some_and(|worst| e.step_time_s < worst.0.step_time_s)
        {
            heap.push(BySlowest(e));
            if heap.len() > top {
                heap.pop();
            }
        }
    });
    let ranked = heap.into_sorted_vec().into_iter().map(|b| b.0).collect();
    SearchResult {
        evaluated,
        fitting,
        ranked,
        leanest,
    }
}

/// The fastest mesh that fits among those `c` allows, or the one needing the least memory when
/// none fits (to say why), with the number of meshes looked at.
pub fn best_mesh(scenario: &Scenario, c: &Constraints) -> (Option<Evaluation>, usize) {
    let mut best: Option<Evaluation> = None;
    let mut count = 0;
    let key = |x: &Evaluation| {
        if x.fits() {
            (0, x.step_time_s, simplicity(&x.mesh))
        } else {
            (1, x.memory.total, simplicity(&x.mesh))
        }
    };
    for_each_evaluation(scenario, c, |e| {
        count += 1;
        if best.as_ref().is_none_or(|b| key(&e) < key(b)) {
            best = Some(e);
        }
    });
    (best, count)
}

/// Candidate counts tried by [`smallest_working_count`]: enough to pass from a node to a
/// 64x larger job, few enough that the answer comes in well under a second.
const MAX_CANDIDATES: usize = 48;

/// The smallest GPU count above `gpus` with a mesh that fits under the pinned knobs `c`,
/// trying multiples of the node size and powers of two up to 64x the request, at most
/// [`MAX_CANDIDATES`] of them.
pub fn smallest_working_count(scenario: &mut Scenario, gpus: u32, c: &Constraints) -> Option<u32> {
    let node = u64::from(scenario.cluster.gpus_per_node.max(1));
    let limit = 64 * u64::from(gpus).max(node);
    let mut candidates: Vec<u64> = (1..=MAX_CANDIDATES as u64)
        .map(|k| (u64::from(gpus) / node + k) * node)
        .chain((0..32).map(|i| 1u64 << i))
        .filter(|&n| n > u64::from(gpus) && n <= limit && n <= u64::from(u32::MAX))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates.truncate(MAX_CANDIDATES);
    let original = scenario.gpus;
    let found = candidates.into_iter().map(|n| n as u32).find(|&n| {
        scenario.gpus = n;
        let mut any = false;
        for_each_evaluation(scenario, c, |e| any = any || e.fits());
        any
    });
    scenario.gpus = original;
    found
}

/// Counts [`nearest_valid_counts`] tries on each side of the request.
const MAX_NEAREST_TRIES: u64 = 256;

/// The nearest GPU counts below and above `gpus` with at least one valid layout under the
/// pinned knobs `c` (heads, layers, global batch and the pinned sizes all divide; memory is
/// not priced), trying multiples of the pinned tp x pp x dp x cp only, at most
/// [`MAX_NEAREST_TRIES`] on each side. What to suggest when `c` passes
/// [`Constraints::check_knobs`] but not [`Constraints::check_count`] at `gpus`.
pub fn nearest_valid_counts(
    model: &ModelShape,
    seq_len: u32,
    global_batch: u32,
    gpus: u32,
    c: &Constraints,
) -> (Option<u32>, Option<u32>) {
    let step = c.pinned_product();
    if step == 0 {
        return (None, None);
    }
    let has_mesh = |n: &u64| {
        let Ok(n) = u32::try_from(*n) else {
            return false;
        };
        let mut any = false;
        for_each_mesh(model, seq_len, global_batch, n, c, |_| any = true);
        any
    };
    let k = u64::from(gpus) / step;
    let below = (1..=k)
        .rev()
        .map(|i| i * step)
        .filter(|&n| n != u64::from(gpus))
        .take(MAX_NEAREST_TRIES as usize)
        .find(has_mesh);
    let above = (k + 1..=k + MAX_NEAREST_TRIES)
        .map_while(|i| i.checked_mul(step))
        .find(has_mesh);
    let count = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok());
    (count(below), count(above))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::mesh::Framework;
    use constraints::splits_layers;

    #[test]
    fn nearest_counts_for_a_pin_that_cannot_divide() {
        // gpt3-175b: 96 heads and layers, 2048 sequences of 2048 tokens. With tp = 3 a count
        // is 3 x pp x dp x cp, pp a stage count for 96 layers (evenly, or with the edge stages
        // taking what ceil(96 / pp) a stage leaves), dp and cp powers of two: 480 = 3 x 5 x 32
        // below 512 (stages of 18, 20, 20, 20, 18), 528 = 3 x 11 x 16 above (8, 9 x 9, 7).
        let model = catalog::model("gpt3-175b").unwrap().shape;
        let c = Constraints {
            tp: Some(3),
            ..Constraints::default()
        };
        assert!(c.check(&model, 512).is_err());
        assert_eq!(
            nearest_valid_counts(&model, 2048, 2048, 512, &c),
            (Some(480), Some(528))
        );
        // tp x pp = 3 x 7 (stages of 13, 5 x 14, 13): the power-of-two data parallel sizes
        // nearest 512 are 336 (dp 16) and 672 (dp 32).
        let c = Constraints {
            tp: Some(3),
            pp: Some(7),
            ..Constraints::default()
        };
        assert_eq!(
            nearest_valid_counts(&model, 2048, 2048, 512, &c),
            (Some(336), Some(672))
        );
    }

    #[test]
    fn every_enumerated_mesh_is_valid() {
        let model = catalog::model("llama3-70b").unwrap().shape;
        let mut n = 0;
        for_each_mesh(&model, 8192, 512, 512, &Constraints::default(), |m| {
            n += 1;
            assert_eq!(m.gpus(), 512);
            assert_eq!(model.heads % m.tp, 0);
            assert_eq!(model.kv_heads % m.tp, 0);
            assert_eq!(512 % (m.dp * m.microbatch_size), 0);
            assert!(m.tp > 1 || !m.sequence_parallel);
            assert!(m.pp == 1 || m.zero_stage <= 1);
            assert!(m.virtual_stages == 1 || m.microbatches(512) % m.pp == 0);
        });
        assert!(n > 1000, "{n}");
    }

    #[test]
    fn pinned_virtual_stages_beyond_eight_are_allowed() {
        // NeMo runs one layer per virtual stage: 48 layers on 4 stages gives v = 12.
        let mut model = catalog::model("llama3-8b").unwrap().shape;
        model.layers = 48;
        let c = Constraints {
            tp: Some(8),
            pp: Some(4),
            virtual_stages: Some(12),
            ..Constraints::default()
        };
        let mut n = 0;
        for_each_mesh(&model, 8192, 64, 64, &c, |m| {
            assert_eq!(m.virtual_stages, 12);
            n += 1;
        });
        assert!(n > 0);
    }

    #[test]
    fn divisors_come_in_order() {
        assert_eq!(divisors(12).collect::<Vec<_>>(), [1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(16).collect::<Vec<_>>(), [1, 2, 4, 8, 16]);
        assert_eq!(divisors(1).collect::<Vec<_>>(), [1]);
        assert_eq!(divisors(1 << 20).count(), 21);
    }

    #[test]
    fn the_search_keeps_to_what_the_framework_runs() {
        // DeepSpeed's pipeline engine runs 1F1B only and has no ring context parallelism.
        let (c, notes) = Constraints::default().within(Framework::Deepspeed).unwrap();
        assert_eq!((c.virtual_stages, c.cp), (Some(1), Some(1)));
        assert_eq!(notes.len(), 2, "{notes:?}");
        let pinned = Constraints {
            cp: Some(2),
            ..Default::default()
        };
        let err = pinned.within(Framework::Deepspeed).unwrap_err().to_string();
        assert!(
            err.starts_with("--cp = 2: expected 1: deepspeed runs no context parallelism"),
            "{err}"
        );
        // Megatron and torchtitan run both: nothing pinned, nothing said; each splits its
        // experts its own way.
        for (framework, split) in [
            (Framework::Megatron, ExpertSplit::Either),
            (Framework::Fsdp, ExpertSplit::WholeUnderEp),
        ] {
            let (c, notes) = pinned.within(framework).unwrap();
            let want = Constraints {
                expert_split: split,
                ..pinned.clone()
            };
            assert_eq!((c, notes.len()), (want, 0));
        }
    }

    /// Issue 31, item 12: `--zero 3 --pp 2` was ranked and emitted as DeepSpeed `stage: 3` with
    /// a pipeline; neither DeepSpeed nor Megatron-LM runs it.
    #[test]
    fn r31_12_zero_2_and_3_are_never_combined_with_a_pipeline() {
        let both = Constraints {
            zero_stage: Some(3),
            pp: Some(2),
            ..Default::default()
        };
        for framework in [Framework::Megatron, Framework::Deepspeed] {
            let err = both.within(framework).unwrap_err().to_string();
            assert!(
                err.starts_with("--zero with --pp = 3 with 2: expected --zero 0 or 1 under a pipeline, or --pp 1"),
                "{err}"
            );
            let zero = Constraints {
                zero_stage: Some(2),
                ..Default::default()
            };
            let (c, notes) = zero.within(framework).unwrap();
            assert_eq!(c.pp, Some(1));
            assert!(
                notes.iter().any(|n| n.contains("--pp 1 under --zero 2")),
                "{notes:?}"
            );
        }
        // torchtitan runs FSDP2 under its pipeline schedules.
        let (c, _) = both.within(Framework::Fsdp).unwrap();
        assert_eq!((c.zero_stage, c.pp), (both.zero_stage, both.pp));
    }

    /// Megatron-Core asserts what combined 1F1B needs (`TransformerConfig.__post_init__`):
    /// the search offers only such meshes, pins that break it are refused by flag, and a
    /// framework without it refuses the schedule.
    #[test]
    fn combined_1f1b_is_searched_only_where_megatron_runs_it() {
        let moe = catalog::model("mixtral-8x7b").unwrap().shape;
        let c = Constraints {
            schedule: Some(Schedule::Combined1F1B),
            ..Default::default()
        };
        let mut n = 0;
        for_each_mesh(&moe, 4096, 256, 64, &c, |m| {
            assert!(m.ep > 1 && (m.pp == 1 || m.virtual_stages > 1), "{m}");
            assert_ne!(m.recompute, Recompute::Full, "{m}");
            n += 1;
        });
        assert!(n > 0);
        let refused =
            |c: Constraints, model: &ModelShape| c.check(model, 64).unwrap_err().to_string();
        let dense = catalog::model("llama3-8b").unwrap().shape;
        let err = refused(c.clone(), &dense);
        let expected = format!(
            "--schedule combined-1f1b with --model = {}: expected an MoE model",
            dense.name
        );
        assert!(err.starts_with(&expected), "{err}");
        for (pin, flag) in [
            (
                Constraints {
                    ep: Some(1),
                    ..c.clone()
                },
                "--ep = 1",
            ),
            (
                Constraints {
                    recompute: Some(Recompute::Full),
                    ..c.clone()
                },
                "--recompute = full",
            ),
            (
                Constraints {
                    pp: Some(2),
                    virtual_stages: Some(1),
                    ..c.clone()
                },
                "--virtual-stages = 1",
            ),
        ] {
            let err = refused(pin, &moe);
            assert!(
                err.starts_with(&format!("--schedule combined-1f1b with {flag}")),
                "{err}"
            );
            assert!(err.contains("or --schedule 1f1b"), "{err}");
        }
        for framework in [Framework::Deepspeed, Framework::Fsdp] {
            let err = c.within(framework).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{framework} runs no combined 1F1B")),
                "{err}"
            );
        }
        assert!(c.within(Framework::Megatron).is_ok());
    }

    /// Megatron-Core folds context-parallel ranks into the expert-parallel group (`ep x etp`
    /// divides `tp x cp x dp`): Mixtral 8x7B on 8 GPUs at TP 1, CP 4, DP 2 takes EP up to 8,
    /// its expert count, from CP and DP, where DP alone would give 2. Pinned, EP 8 holds
    /// there and is refused by flag over the 4 ranks of CP 2 x DP 2.
    #[test]
    fn expert_parallelism_takes_its_ranks_from_cp_too() {
        let moe = catalog::model("mixtral-8x7b").unwrap().shape;
        let c = Constraints {
            tp: Some(1),
            cp: Some(4),
            dp: Some(2),
            ..Default::default()
        };
        let mut eps = std::collections::BTreeSet::new();
        for_each_mesh(&moe, 4096, 256, 8, &c, |m| {
            eps.insert(m.ep);
        });
        assert_eq!(eps.into_iter().collect::<Vec<_>>(), [1, 2, 4, 8]);
        let pinned = Constraints { ep: Some(8), ..c };
        pinned.check(&moe, 8).unwrap();
        let err = Constraints {
            cp: Some(2),
            dp: Some(2),
            ..pinned
        }
        .check(&moe, 8)
        .unwrap_err()
        .to_string();
        assert!(err.contains("a divisor of dp x cp x tp / etp"), "{err}");
    }

    /// The search prices each mesh with the layers of the meshes alike in them priced before:
    /// every price equals the mesh priced alone. Mixtral 8x7B on 64 H100, where the ranking
    /// mixes TP, CP, EP, microbatch, recomputation and ZeRO choices.
    #[test]
    fn a_search_prices_each_mesh_as_it_prices_alone() {
        let model = catalog::model("mixtral-8x7b").unwrap().shape;
        let training = crate::mesh::Training::megatron(4096, 512);
        let cluster = catalog::cluster("dgx-h100").unwrap();
        let scenario = Scenario::nominal(model, training, cluster, 64, catalog::NOMINAL);
        let found = search(&scenario, &Constraints::default(), 200);
        assert_eq!(found.ranked.len(), 200);
        let meshes: std::collections::BTreeSet<_> = found
            .ranked
            .iter()
            .map(|e| {
                (
                    e.mesh.tp,
                    e.mesh.ep,
                    e.mesh.microbatch_size,
                    e.mesh.zero_stage,
                )
            })
            .collect();
        assert!(meshes.len() > 10, "{meshes:?}");
        for e in &found.ranked {
            let alone = scenario.evaluate(&e.mesh);
            assert_eq!(e.breakdown, alone.breakdown, "{}", e.mesh);
            assert_eq!(e.memory.total, alone.memory.total, "{}", e.mesh);
        }
    }

    #[test]
    fn dualpipe_is_searched_only_where_its_step_runs() {
        // DeepSeek-V3's 15,360 sequences on 2,048 GPUs at TP 1, PP 16: 128-way DP leaves 120
        // sequences a replica, so a microbatch of 1, 2 or 3 gives 120, 60 or 40 microbatches;
        // 4 gives 30, even but fewer than DualPipe's 2 x 16.
        let model = catalog::model("deepseek-v3").unwrap().shape;
        let c = Constraints {
            schedule: Some(Schedule::Dualpipe),
            tp: Some(1),
            cp: Some(1),
            pp: Some(16),
            ..Default::default()
        };
        let mut sizes = std::collections::BTreeSet::new();
        for_each_mesh(&model, 4096, 15360, 2048, &c, |m| {
            assert_eq!(m.virtual_stages, 1, "{m}");
            sizes.insert(m.microbatch_size);
        });
        assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
    }

    #[test]
    fn zero_virtual_stages_leave_no_mesh() {
        let model = catalog::model("llama3-70b").unwrap().shape;
        let c = Constraints {
            pp: Some(4),
            virtual_stages: Some(0),
            ..Default::default()
        };
        let mut n = 0;
        for_each_mesh(&model, 8192, 512, 64, &c, |_| n += 1);
        assert_eq!(n, 0);
        let err = c.check(&model, 64).unwrap_err().to_string();
        assert!(err.starts_with("--virtual-stages = 0"), "{err}");
    }

    #[test]
    fn impossible_pins_are_named_by_flag() {
        let model = catalog::model("llama3-70b").unwrap().shape;
        let err = |c: Constraints, gpus| c.check(&model, gpus).unwrap_err().to_string();
        let tp3 = err(
            Constraints {
                tp: Some(3),
                ..Default::default()
            },
            8,
        );
        assert!(
            tp3.starts_with("--tp = 3: expected a divisor of llama3-70b's 64 heads and 8 KV heads"),
            "{tp3}"
        );
        let tp0 = err(
            Constraints {
                tp: Some(0),
                ..Default::default()
            },
            8,
        );
        assert!(tp0.starts_with("--tp = 0"), "{tp0}");
        let m0 = err(
            Constraints {
                microbatches: Some(0),
                ..Default::default()
            },
            64,
        );
        assert!(m0.starts_with("--microbatches = 0"), "{m0}");
        let ep = err(
            Constraints {
                ep: Some(8),
                ..Default::default()
            },
            64,
        );
        assert!(ep.contains("no experts"), "{ep}");
        let product = err(
            Constraints {
                tp: Some(8),
                pp: Some(4),
                ..Default::default()
            },
            48,
        );
        assert!(
            product.contains("a multiple of the pinned tp x pp x dp x cp = 32"),
            "{product}"
        );
        assert!(Constraints {
            tp: Some(8),
            ..Default::default()
        }
        .check(&model, 64)
        .is_ok());
    }

    #[test]
    fn uneven_split_follows_llama3() {
        assert!(splits_layers(126, 16));
        assert!(splits_layers(80, 8));
        assert!(!splits_layers(80, 7));
        assert!(!splits_layers(126, 128));
    }
}
