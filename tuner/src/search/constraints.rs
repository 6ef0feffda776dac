//! The knobs a user pins, `None` for each one searched: checked against the model, the GPU
//! count and what the framework runs before any mesh is priced.

use crate::error::{bad_input, TunerError};
use crate::mesh::{EdgeStages, Framework, Recompute, Schedule};
use crate::model::ModelShape;

/// Largest context-parallel size searched or pinned; beyond it the ring is all overhead on any
/// cluster we know.
pub(super) const MAX_CP: u32 = 32;

/// Whether `pp·v` stages can split `layers`: evenly, or with one layer fewer on the first and
/// last stage (see [`crate::mesh::Mesh::stage_layers`]) while every stage keeps at least one layer.
pub(super) fn splits_layers(layers: u32, stages: u32) -> bool {
    // A pinned zero (`--virtual-stages 0`) splits nothing; its error comes from `check_knobs`.
    stages > 0
        && (layers % stages == 0 || ((layers + 2) % stages == 0 && (layers + 2) / stages >= 2))
}

/// The first and last stages of `pp` plain (not interleaved) stages over `layers` layers,
/// where the pins or the layer count make them differ from the rest; `Ok(None)` for an even
/// split or the one-fewer split of [`splits_layers`]; `Err` where no split holds.
///
/// A pinned edge keeps its count and the other stages share the rest evenly (Megatron's
/// rule for `--decoder-first-pipeline-num-layers` and `--decoder-last-pipeline-num-layers`).
/// With neither pinned and no split of [`splits_layers`], the inner stages take
/// ceil(layers / pp) each and the first and last share what is left, the last no more than
/// the first, as it also runs the output layer (and any multi-token prediction): 61 layers on
/// 16 stages are 3 + 14 x 4 + 2.
pub(super) fn edge_stages(
    layers: u32,
    pp: u32,
    (first, last): (Option<u32>, Option<u32>),
) -> Result<Option<EdgeStages>, ()> {
    let share = |rest: u32, stages: u32| (stages > 0 && rest % stages == 0).then(|| rest / stages);
    let edges = match (first, last) {
        (None, None) if splits_layers(layers, pp) || pp == 1 => return Ok(None),
        (None, None) => {
            let inner = layers.div_ceil(pp);
            let rest = layers.checked_sub(inner * (pp - 2)).ok_or(())?;
            let last = rest / 2;
            (rest - last, last)
        }
        (Some(f), Some(l)) => (f, l),
        (Some(f), None) => {
            let l = share(layers.checked_sub(f).ok_or(())?, pp - 1).ok_or(())?;
            (f, l)
        }
        (None, Some(l)) => {
            let f = share(layers.checked_sub(l).ok_or(())?, pp - 1).ok_or(())?;
            (f, l)
        }
    };
    let (f, l) = edges;
    let inner = layers.checked_sub(f + l).ok_or(())?;
    let inner_ok = if pp > 2 {
        inner > 0 && inner % (pp - 2) == 0
    } else {
        inner == 0
    };
    if pp < 2 || f == 0 || l == 0 || !inner_ok {
        return Err(());
    }
    Ok(Some(EdgeStages { first: f, last: l }))
}

/// Whether `v` virtual stages a rank can interleave a pipeline split as `edges`
/// ([`edge_stages`]): an even or one-fewer split of [`splits_layers`] over all `pp·v` chunks,
/// or, where the edge stages differ, at least `v` layers on every stage, one a chunk at least.
/// Megatron-Core lays uneven chunks out with `--pipeline-model-parallel-layout` (DeepSeek-V3's
/// Megatron-Bridge recipes: 61 layers on 4 x 4 chunks of 4, the last of 1; the cost model
/// prices each stage's layers, whatever its chunks hold).
pub(super) fn interleaves(layers: u32, pp: u32, v: u32, edges: Option<EdgeStages>) -> bool {
    match edges {
        _ if v <= 1 => true,
        None => splits_layers(layers, pp * v),
        Some(e) => e.first >= v && e.last >= v && e.inner(layers, pp).is_none_or(|i| i >= v),
    }
}

/// Whether each stage of an uneven split holds a whole number of `v`-layer-equal chunks, as
/// Megatron-Core's `--decoder-first-pipeline-num-layers` and `--decoder-last-pipeline-num-layers`
/// need under virtual stages (`get_num_layers_to_build`). The search tries uneven splits over
/// virtual stages only so; other chunkings (a layout string's) are priced where pinned.
pub(super) fn chunks_evenly(layers: u32, pp: u32, v: u32, edges: Option<EdgeStages>) -> bool {
    edges.is_none_or(|e| {
        e.first % v == 0 && e.last % v == 0 && e.inner(layers, pp).is_none_or(|i| i % v == 0)
    })
}

/// Knobs pinned by the user; `None` means search over it. The flags of `recommend` and
/// `explain` are these fields.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Constraints {
    /// Tensor parallel size.
    #[arg(long)]
    pub tp: Option<u32>,
    /// Pipeline stages.
    #[arg(long)]
    pub pp: Option<u32>,
    /// Data parallel size.
    #[arg(long)]
    pub dp: Option<u32>,
    /// Context parallel size.
    #[arg(long)]
    pub cp: Option<u32>,
    /// Expert parallel size.
    #[arg(long)]
    pub ep: Option<u32>,
    /// Sequences per microbatch.
    #[arg(long)]
    pub microbatch_size: Option<u32>,
    /// Microbatches per step.
    #[arg(long)]
    pub microbatches: Option<u32>,
    /// Virtual pipeline stages per rank.
    #[arg(long)]
    pub virtual_stages: Option<u32>,
    /// ZeRO stage, 0-3.
    #[arg(long = "zero", value_name = "ZERO", value_parser = clap::value_parser!(u8).range(0..=3))]
    pub zero_stage: Option<u8>,
    /// Activation recomputation.
    #[arg(long, value_enum)]
    pub recompute: Option<Recompute>,
    /// Sequence parallelism.
    #[arg(long)]
    pub sequence_parallel: Option<bool>,
    /// Pipeline schedule; the search runs 1F1B unless this names another.
    #[arg(long, value_enum)]
    pub schedule: Option<Schedule>,
    /// Layers on the first pipeline stage, where it differs from the others.
    #[arg(long)]
    pub first_stage_layers: Option<u32>,
    /// Layers on the last pipeline stage, where it differs from the others.
    #[arg(long)]
    pub last_stage_layers: Option<u32>,
    /// Tensor-parallel ranks each expert splits over (Megatron's
    /// `--expert-tensor-parallel-size`; default: --tp). 1 folds the expert-parallel group
    /// over the TP ranks, so --ep may reach --tp x --dp.
    #[arg(long)]
    pub etp: Option<u32>,
    /// How the framework splits experts under TP where `etp` is not pinned; set by
    /// [`Constraints::within`].
    #[arg(skip)]
    pub expert_split: ExpertSplit,
}

/// The expert tensor-parallel sizes a framework runs, which the search tries where `--etp`
/// is not pinned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExpertSplit {
    /// Split as the dense weights or whole (Megatron-Core's `expert_tensor_parallel_size`).
    #[default]
    Either,
    /// Split as the dense weights only (DeepSpeed's layouts here).
    AsDense,
    /// Whole under expert parallelism, split as the dense weights without it (torchtitan:
    /// 0.3 lays the experts over dp_shard x cp x tp, and applies TP to them without EP).
    WholeUnderEp,
}

impl ExpertSplit {
    /// How `framework` splits its experts.
    pub fn of(framework: Framework) -> ExpertSplit {
        match framework {
            Framework::Megatron => ExpertSplit::Either,
            Framework::Deepspeed => ExpertSplit::AsDense,
            Framework::Fsdp => ExpertSplit::WholeUnderEp,
        }
    }

    /// The expert TP size a layout of `tp` and `ep` runs where none is said: split as the
    /// dense weights (Megatron-Core's default), but whole under EP where the framework keeps
    /// them so.
    pub fn default_etp(self, tp: u32, ep: u32) -> u32 {
        if self == ExpertSplit::WholeUnderEp && ep > 1 {
            1
        } else {
            tp
        }
    }
}

/// A pinned count: its flag, the keys a mesh spec (`tp=8,mb=2`) may name it by, and its field.
pub(crate) struct Count {
    pub(crate) flag: &'static str,
    pub(crate) keys: &'static [&'static str],
    pub(crate) field: fn(&mut Constraints) -> &mut Option<u32>,
}

/// Every knob that is a positive count, in flag order.
pub(crate) const COUNTS: [Count; 9] = [
    count("--tp", &["tp"], |c| &mut c.tp),
    count("--pp", &["pp"], |c| &mut c.pp),
    count("--dp", &["dp"], |c| &mut c.dp),
    count("--cp", &["cp"], |c| &mut c.cp),
    count("--ep", &["ep"], |c| &mut c.ep),
    count("--etp", &["etp"], |c| &mut c.etp),
    count("--microbatch-size", &["mb", "microbatch_size"], |c| {
        &mut c.microbatch_size
    }),
    count("--microbatches", &["m", "microbatches"], |c| {
        &mut c.microbatches
    }),
    count("--virtual-stages", &["v", "virtual_stages"], |c| {
        &mut c.virtual_stages
    }),
];

const fn count(
    flag: &'static str,
    keys: &'static [&'static str],
    field: fn(&mut Constraints) -> &mut Option<u32>,
) -> Count {
    Count { flag, keys, field }
}

impl Constraints {
    /// Why the pinned knobs can hold at no GPU count, or not at `gpus`: a zero, a size the
    /// model cannot split, or a product that does not divide the GPUs. Named by flag.
    pub fn check(&self, model: &ModelShape, gpus: u32) -> Result<(), TunerError> {
        self.check_knobs(model)?;
        self.check_count(gpus)
    }

    /// Why the pinned knobs can hold at no GPU count: a zero or a size the model cannot
    /// split. Named by flag.
    pub fn check_knobs(&self, model: &ModelShape) -> Result<(), TunerError> {
        self.check_combined_1f1b(model)?;
        let mut pinned = self.clone();
        for count in &COUNTS {
            if *(count.field)(&mut pinned) == Some(0) {
                return Err(bad_input(count.flag, 0, "a positive count"));
            }
        }
        if let Some(tp) = self.tp {
            if model.heads % tp != 0 || model.kv_heads % tp != 0 {
                return Err(bad_input(
                    "--tp",
                    tp,
                    &format!(
                        "a divisor of {}'s {} heads and {} KV heads",
                        model.name, model.heads, model.kv_heads
                    ),
                ));
            }
        }
        if let Some(pp) = self.pp {
            let edges = (self.first_stage_layers, self.last_stage_layers);
            let split = edge_stages(model.layers, pp, edges);
            if edges != (None, None) {
                if pp < 2 {
                    return Err(bad_input(
                        "--first-stage-layers/--last-stage-layers",
                        format!("{edges:?} with --pp {pp}"),
                        "uneven edge stages of a pipeline: --pp 2 or more",
                    ));
                }
                if split.is_err() {
                    return Err(bad_input(
                        "--first-stage-layers/--last-stage-layers",
                        format!("{edges:?} with --pp {pp}"),
                        &format!(
                            "counts of 1 or more that leave the {} layers' rest in equal shares of at least 1 on the other stages",
                            model.layers
                        ),
                    ));
                }
            } else if split.is_err() {
                return Err(bad_input(
                    "--pp",
                    pp,
                    &format!(
                        "a stage count that splits {} layers (evenly, one fewer on the first and last stage, or the rest shared by them)",
                        model.layers
                    ),
                ));
            }
            if let (Ok(split), Some(v)) = (split, self.virtual_stages) {
                if !interleaves(model.layers, pp, v, split) {
                    return Err(bad_input(
                        "--virtual-stages",
                        format!("{v} with --pp {pp}"),
                        &format!(
                            "a count that splits {} layers over {pp} x v chunks evenly or one fewer on the first and last, or, with uneven edge stages, at most the layers of the smallest stage",
                            model.layers
                        ),
                    ));
                }
            }
        }
        if let (Some(etp), Some(tp)) = (self.etp, self.tp) {
            if tp % etp != 0 {
                return Err(bad_input(
                    "--etp with --tp",
                    format!("{etp} with {tp}"),
                    "a divisor of --tp",
                ));
            }
        }
        if let Some(cp) = self.cp {
            if !cp.is_power_of_two() || cp > MAX_CP {
                return Err(bad_input("--cp", cp, "a power of two up to 32"));
            }
        }
        if let (Some(v), Some(1)) = (self.virtual_stages.filter(|&v| v > 1), self.pp) {
            return Err(bad_input(
                "--virtual-stages with --pp",
                format!("{v} with 1"),
                "--virtual-stages 1 without a pipeline, or --pp 2 or more",
            ));
        }
        if let (Some(true), Some(1)) = (self.sequence_parallel, self.tp) {
            return Err(bad_input(
                "--sequence-parallel with --tp",
                "true with 1",
                "--sequence-parallel false without tensor parallelism, or --tp 2 or more",
            ));
        }
        if let Some(ep) = self.ep.filter(|&e| e > 1) {
            match &model.moe {
                Some(moe) if moe.experts % ep == 0 => {}
                Some(moe) => {
                    return Err(bad_input(
                        "--ep",
                        ep,
                        &format!("a divisor of the {} experts", moe.experts),
                    ))
                }
                None => return Err(bad_input("--ep", ep, "1: the model has no experts")),
            }
            // Unpinned, the search folds the experts over TP (etp 1) among its choices, and
            // over CP where it is not pinned to 1.
            if let (Some(tp), Some(dp)) = (self.tp, self.dp) {
                let (etp, cp) = (self.etp.unwrap_or(1), self.cp.unwrap_or(1));
                if tp % etp == 0 && (dp * cp * (tp / etp)) % ep != 0 {
                    return Err(bad_input(
                        "--ep with --tp, --cp, --dp and --etp",
                        format!("{ep} with {tp}, {cp}, {dp} and {etp}"),
                        "a divisor of dp x cp x tp / etp: expert parallelism takes its ranks from \
                         DP and CP, and from TP too where each expert splits over fewer TP ranks \
                         (--etp 1)",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Why combined 1F1B cannot run the pinned knobs: Megatron-Core asserts expert
    /// parallelism, virtual stages under a pipeline, no full recomputation and at most one
    /// multi-token-prediction layer for it (`TransformerConfig.__post_init__`); virtual stages
    /// exclude uneven edge stages here.
    fn check_combined_1f1b(&self, model: &ModelShape) -> Result<(), TunerError> {
        if self.schedule != Some(Schedule::Combined1F1B) {
            return Ok(());
        }
        let refuse = |flag: &str, value: String, why: &str| {
            Err(bad_input(
                &format!("--schedule combined-1f1b with {flag}"),
                value,
                &format!("{why}, or --schedule 1f1b"),
            ))
        };
        if model.moe.is_none() {
            return refuse(
                "--model",
                model.name.clone(),
                "an MoE model: combined 1F1B hides the expert-parallel all-to-all",
            );
        }
        if self.ep == Some(1) {
            return refuse("--ep", "1".into(), "--ep 2 or more");
        }
        if self.recompute == Some(Recompute::Full) {
            return refuse(
                "--recompute",
                "full".into(),
                "--recompute none or selective",
            );
        }
        if model.mtp_layers > 1 {
            return refuse(
                "--model",
                format!("{} with {} MTP layers", model.name, model.mtp_layers),
                "at most one multi-token-prediction layer",
            );
        }
        if self.pp.is_some_and(|pp| pp > 1) && self.virtual_stages == Some(1) {
            return refuse(
                "--virtual-stages",
                "1".into(),
                "--virtual-stages 2 or more under a pipeline",
            );
        }
        Ok(())
    }

    /// These pins within what `framework` runs: where it cannot run virtual stages or context
    /// parallelism the search keeps them at 1, which a note says; a pin past that is refused,
    /// named by flag.
    pub fn within(&self, framework: Framework) -> Result<(Constraints, Vec<String>), TunerError> {
        let d = framework.defaults();
        let mut c = self.clone();
        let mut notes = Vec::new();
        for (runs, flag, pin, what) in [
            (
                d.interleaved_pipeline,
                "--virtual-stages",
                &mut c.virtual_stages,
                "interleaved pipeline schedule",
            ),
            (d.context_parallel, "--cp", &mut c.cp, "context parallelism"),
        ] {
            if runs {
                continue;
            }
            match *pin {
                Some(v) if v > 1 => {
                    return Err(bad_input(
                        flag,
                        v,
                        &format!("1: {framework} runs no {what}"),
                    ))
                }
                _ => *pin = Some(1),
            }
            notes.push(format!(
                "{framework} runs no {what}: the search keeps {flag} 1"
            ));
        }
        if !d.combined_1f1b && c.schedule == Some(Schedule::Combined1F1B) {
            return Err(bad_input(
                "--schedule",
                "combined-1f1b",
                &format!(
                    "1f1b: {framework} runs no combined 1F1B (Megatron-Core's \
                     --overlap-moe-expert-parallel-comm)"
                ),
            ));
        }
        if !d.sharded_pipeline {
            c.keep_sharding_off_pipelines(framework, &mut notes)?;
        }
        c.expert_split = ExpertSplit::of(framework);
        Ok((c, notes))
    }

    /// For a framework that shards no gradients or parameters under a pipeline (issue 31,
    /// item 12): pinning both is refused by both flags, and a pinned ZeRO-2/3 keeps `--pp` 1.
    fn keep_sharding_off_pipelines(
        &mut self,
        framework: Framework,
        notes: &mut Vec<String>,
    ) -> Result<(), TunerError> {
        let Some(zero) = self.zero_stage.filter(|&z| z >= 2) else {
            return Ok(());
        };
        match self.pp {
            Some(pp) if pp > 1 => Err(bad_input(
                "--zero with --pp",
                format!("{zero} with {pp}"),
                &format!(
                    "--zero 0 or 1 under a pipeline, or --pp 1: {framework} runs no ZeRO-2/3 \
                     with pipeline parallelism"
                ),
            )),
            _ => {
                self.pp = Some(1);
                notes.push(format!(
                    "{framework} runs no ZeRO-2/3 with pipeline parallelism: the search keeps \
                     --pp 1 under --zero {zero}"
                ));
                Ok(())
            }
        }
    }

    /// Why a sequence of `seq_len` tokens cannot hold the pinned context parallelism: ring
    /// attention splits it into 2 x cp balanced chunks.
    pub fn check_sequence(&self, seq_len: u32) -> Result<(), TunerError> {
        match self.cp.filter(|&cp| cp > 1) {
            Some(cp) if seq_len % (2 * cp) != 0 => Err(bad_input(
                "--cp with --seq-len",
                format!("{cp} with {seq_len}"),
                &format!(
                    "a sequence length that 2 x cp = {} chunks split evenly",
                    2 * cp
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Why `gpus` cannot hold the pinned sizes: their product does not divide it.
    pub fn check_count(&self, gpus: u32) -> Result<(), TunerError> {
        let pinned = self.pinned_product();
        if u64::from(gpus) % pinned != 0 {
            return Err(bad_input(
                "--gpus",
                gpus,
                &format!("a multiple of the pinned tp x pp x dp x cp = {pinned}"),
            ));
        }
        Ok(())
    }

    /// tp x pp x dp x cp of the pinned sizes (1 for each one not pinned): every GPU count
    /// with a layout is a multiple of it.
    pub(super) fn pinned_product(&self) -> u64 {
        [self.tp, self.pp, self.dp, self.cp]
            .iter()
            .fold(1u64, |p, v| p.saturating_mul(u64::from(v.unwrap_or(1))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(first: u32, last: u32) -> Result<Option<EdgeStages>, ()> {
        Ok(Some(EdgeStages { first, last }))
    }

    #[test]
    fn edge_stages_take_what_the_inner_stages_leave() {
        // DeepSeek-V3's 61 layers on 16 stages: 14 x 4 inside, 3 first and 2 last.
        assert_eq!(edge_stages(61, 16, (None, None)), edges(3, 2));
        // Even and one-fewer splits need no edges; one stage has none.
        assert_eq!(edge_stages(80, 8, (None, None)), Ok(None));
        assert_eq!(edge_stages(126, 16, (None, None)), Ok(None));
        assert_eq!(edge_stages(61, 1, (None, None)), Ok(None));
        // Two stages split what there is.
        assert_eq!(edge_stages(61, 2, (None, None)), edges(31, 30));
        // Too many stages for the layers.
        assert_eq!(edge_stages(20, 16, (None, None)), Err(()));
    }

    #[test]
    fn virtual_stages_interleave_uneven_edges_a_layer_a_chunk_at_least() {
        let e = |first, last| Some(EdgeStages { first, last });
        // DeepSeek-V3 as Megatron-Bridge's GB200 recipe lays it out: 61 layers on 4 ranks x 4
        // chunks, 16 on each rank but the last, which holds 13.
        assert!(interleaves(61, 4, 4, e(16, 13)));
        // On 16 stages the edges take 3 and 2: two chunks a rank, not three.
        assert!(interleaves(61, 16, 2, e(3, 2)));
        assert!(!interleaves(61, 16, 3, e(3, 2)));
        // An even or one-fewer split over all chunks, as before: Qwen3-235B-A22B's 94 layers on
        // 8 x 4 (96 counted, 3 a chunk); 80 layers on 8 x 3 would leave 10 for 3 chunks.
        assert!(interleaves(94, 8, 4, None));
        assert!(!interleaves(80, 8, 3, None));
        assert!(interleaves(80, 8, 1, None));
        // The search's own uneven splits over virtual stages chunk evenly: DeepSeek-V3's 16 and
        // 13 do not, 96 layers on 5 stages (18, 20 x 3, 18) do in twos.
        assert!(!chunks_evenly(61, 4, 4, e(16, 13)));
        assert!(chunks_evenly(96, 5, 2, e(18, 18)));
        assert!(!chunks_evenly(96, 5, 3, e(18, 18)));
        assert!(chunks_evenly(94, 8, 4, None));
    }

    #[test]
    fn pinned_edges_leave_the_rest_in_equal_shares() {
        assert_eq!(edge_stages(61, 16, (Some(2), Some(3))), edges(2, 3));
        // One edge pinned: the other stages, the other edge among them, share the rest.
        assert_eq!(edge_stages(61, 16, (Some(1), None)), edges(1, 4));
        assert_eq!(edge_stages(61, 16, (None, Some(1))), edges(4, 1));
        // 61 - 3 - 3 = 55 over 14 inner stages does not divide; a zero edge is no stage.
        assert_eq!(edge_stages(61, 16, (Some(3), Some(3))), Err(()));
        assert_eq!(edge_stages(61, 16, (Some(0), Some(5))), Err(()));
        assert_eq!(edge_stages(61, 16, (Some(70), None)), Err(()));
    }
}
