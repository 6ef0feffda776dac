//! Mesh search: enumerate every valid layout for the GPU count, drop what does not fit
//! memory, rank the rest by predicted step time at the same global batch.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::cost::{Evaluation, Scenario};
use crate::mesh::{Mesh, Recompute};
use crate::model::ModelShape;

/// Knobs pinned by the user; `None` means search over it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Constraints {
    /// Tensor parallel size.
    pub tp: Option<u32>,
    /// Pipeline stages.
    pub pp: Option<u32>,
    /// Data parallel size.
    pub dp: Option<u32>,
    /// Context parallel size.
    pub cp: Option<u32>,
    /// Expert parallel size.
    pub ep: Option<u32>,
    /// Sequences per microbatch.
    pub microbatch_size: Option<u32>,
    /// Microbatches per step (fixes the microbatch size through the global batch).
    pub microbatches: Option<u32>,
    /// Virtual stages.
    pub virtual_stages: Option<u32>,
    /// ZeRO stage.
    pub zero_stage: Option<u8>,
    /// Recomputation.
    pub recompute: Option<Recompute>,
    /// Sequence parallelism.
    pub sequence_parallel: Option<bool>,
}

/// Largest context-parallel and virtual-stage sizes searched; beyond them the ring or the
/// schedule is all overhead on any cluster we know.
const MAX_CP: u32 = 32;
const MAX_VIRTUAL_STAGES: u32 = 8;
const MAX_MICROBATCH: u32 = 64;

fn divisors(n: u32) -> impl Iterator<Item = u32> {
    (1..=n).filter(move |d| n % d == 0)
}

fn pick(fixed: Option<u32>, all: impl Iterator<Item = u32>) -> Vec<u32> {
    match fixed {
        Some(v) => all.filter(|&x| x == v).collect(),
        None => all.collect(),
    }
}

/// Whether `pp·v` stages can split `layers`: evenly, or with one layer fewer on the first and
/// last stage (see [`Mesh::stage_layers`]) while every stage keeps at least one layer.
fn splits_layers(layers: u32, stages: u32) -> bool {
    layers % stages == 0 || ((layers + 2) % stages == 0 && (layers + 2) / stages >= 2)
}

/// Calls `f` on every valid mesh for `gpus` GPUs.
///
/// Valid: tp divides the heads and KV heads; pp·v splits the layers; cp splits the sequence
/// into 2·cp balanced chunks; ep divides the experts and dp; dp·mb divides the global batch;
/// interleaving needs pp > 1 and microbatches divisible by pp (Megatron-LM); sequence
/// parallelism needs tp > 1; ZeRO-2/3 do not combine with pipeline parallelism (neither
/// DeepSpeed nor Megatron-LM allows it).
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
                if !splits_layers(model.layers, pp) {
                    continue;
                }
                let dp = gpus / (tp * cp * pp);
                if c.dp.is_some_and(|d| d != dp) || global_batch % dp != 0 {
                    continue;
                }
                let per_replica = global_batch / dp;
                for ep in pick(c.ep, divisors(dp)) {
                    if moe_experts.map_or(ep != 1, |e| e % ep != 0) {
                        continue;
                    }
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
                            // Interleaving needs microbatches in multiples of the stages.
                            if (v > 1 && m % pp != 0)
                                || !splits_layers(model.layers, pp * v)
                                || c.virtual_stages.is_some_and(|x| x != v)
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
                                    let sps: &[bool] = match c.sequence_parallel {
                                        Some(true) if tp > 1 => &[true],
                                        Some(false) => &[false],
                                        Some(true) => &[],
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

/// Prices every valid mesh of the scenario that `c` allows.
pub fn for_each_evaluation(scenario: &Scenario, c: &Constraints, mut f: impl FnMut(Evaluation)) {
    let t = &scenario.training;
    for_each_mesh(
        &scenario.model,
        t.seq_len,
        t.global_batch,
        scenario.gpus,
        c,
        |mesh| f(scenario.evaluate(&mesh)),
    );
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
    for_each_evaluation(scenario, c, |e| {
        evaluated += 1;
        if !e.fits() {
            if leanest
                .as_ref()
                .is_none_or(|l| e.memory.total < l.memory.total)
            {
                leanest = Some(e);
            }
            return;
        }
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

/// The smallest GPU count above `gpus` with a mesh that fits, trying multiples of the node
/// size and powers of two up to 64x the request.
pub fn smallest_working_count(scenario: &mut Scenario, gpus: u32) -> Option<u32> {
    let node = scenario.cluster.gpus_per_node;
    let mut candidates: Vec<u32> = (1..=64 * gpus.max(node) / node)
        .map(|k| k * node)
        .chain((0..20).map(|i| 1 << i))
        .filter(|&n| n > gpus && n <= 64 * gpus.max(node))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    let original = scenario.gpus;
    let found = candidates.into_iter().find(|&n| {
        scenario.gpus = n;
        let mut any = false;
        for_each_evaluation(scenario, &Constraints::default(), |e| any = any || e.fits());
        any
    });
    scenario.gpus = original;
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

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
    fn uneven_split_follows_llama3() {
        assert!(splits_layers(126, 16));
        assert!(splits_layers(80, 8));
        assert!(!splits_layers(80, 7));
        assert!(!splits_layers(126, 128));
    }
}
