//! Megatron-LM's log: the arguments block it prints at start-up
//! (`------------------------ arguments ------------------------`, then `  num_layers ....
//! 32` lines, then `-------------------- end of arguments ---------------------`) and its
//! iteration lines (` [2024-05-01 10:00:00] iteration       20/  500000 | consumed samples:
//! ... | elapsed time per iteration (ms): 1234.5 | ...`), as `megatron/training/training.py`
//! prints them from its last rank. Megatron-DeepSpeed prints the same lines (and its arguments
//! add `deepspeed` and `zero_stage`); Megatron-Bridge prints the same iteration line
//! (`src/megatron/bridge/training/utils/train_utils.py`) with its own configuration summary,
//! which [`super::nemo::bridge_summary`] reads.
//!
//! Cannot read: the model's name (Megatron never prints one), the GPU and the network (it
//! prints neither), the vocabulary when the tokenizer line is missing and the arguments left
//! `padded_vocab_size` unset (it is filled in after they are printed).

use super::job::skips;
use super::lines::{
    count, count_after, dotted, keep_first, leading_number, lines, number_after, Settings,
};
use super::{state, Family, Job, Measure, Step};
use crate::mesh::{Precision, Recompute};
use crate::model::{FfnAct, Moe};
use crate::validate::Attention;

/// The iteration line's figure.
pub const MARK: &str = "elapsed time per iteration (ms)";

/// The arguments block.
type Args = Settings;

/// Reads a Megatron-family log; `None` when no line prints [`MARK`].
pub fn read(text: &str) -> Option<Job> {
    if !text.contains(MARK) {
        return None;
    }
    let mut job = Job::new(Family::MegatronLm, Measure::Seconds, MARK);
    let mut args = Args::new();
    let mut in_args = false;
    let mut seen_args = false;
    let mut world_line: Option<(String, usize)> = None;
    for line in lines(text) {
        let t: &str = &line.text;
        // Every mark below has a `-`, `|` or `:` in it; most lines of a log (NCCL's, other
        // ranks') are passed over on that one byte search.
        let has = |c: char| t.contains(c);
        if has('-') && t.contains("arguments") {
            if t.contains("end of arguments") {
                in_args = false;
                continue;
            }
            if t.contains("arguments ----") {
                in_args = true;
                seen_args = true;
                continue;
            }
        }
        if in_args {
            // Other ranks' lines interleave into the block; only `key .... value` counts, and a
            // key's first value wins.
            if let Some((k, v)) = dotted(t) {
                keep_first(&mut args, k, v, line.number);
            }
            continue;
        }
        if !(has('|') || has(':')) {
            continue;
        }
        if t.contains(MARK) || t.contains("| consumed samples:") {
            // An iteration line cut before its time still names its iteration.
            iteration(t, line.number, line.rank, &mut job);
        } else if let Some(at) = t.find("new size: ") {
            // ` > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)`
            if let Some(v) = leading_number(&t[at + "new size: ".len()..]).and_then(count) {
                state(&mut job.model.vocab, v, line.number);
            }
        } else if t.contains("using world size:") && world_line.is_none() {
            world_line = Some((t.to_string(), line.number));
        } else if t.contains("DeepSpeedEngine configuration") {
            job.family = Family::MegatronDeepspeed;
        }
    }
    if seen_args {
        apply_args(&args, &mut job);
    } else {
        job.notes.push(
            "no arguments block (the log starts after it, or was cut before it): the model and most of the layout are unknown".into(),
        );
    }
    if let Some((t, n)) = world_line {
        world_size_line(&t, n, &mut job);
    }
    if super::nemo::bridge_summary(text, &mut job) {
        job.family = Family::MegatronBridge;
    }
    let numbers: Vec<u64> = job.steps.iter().map(|s| s.number).collect();
    job.averaged = skips(&numbers);
    Some(job)
}

/// One iteration line: its number, its time, and what else it states.
fn iteration(t: &str, line: usize, rank: Option<u32>, job: &mut Job) {
    let number = t.match_indices("iteration").find_map(|(at, _)| {
        let rest = t[at + "iteration".len()..].trim_start();
        let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
        let after = rest[digits.len()..].trim_start();
        (!digits.is_empty() && after.starts_with('/'))
            .then(|| digits.parse::<u64>().ok())
            .flatten()
    });
    let Some(number) = number else {
        job.skipped
            .push(format!("line {line}: no iteration number before '{MARK}'"));
        return;
    };
    let Some(ms) = number_after(t, MARK) else {
        job.skipped.push(format!(
            "line {line}: iteration {number} without its time (the line is cut short)"
        ));
        return;
    };
    if ms <= 0.0 {
        job.skipped
            .push(format!("line {line}: iteration {number} takes {ms} ms"));
        return;
    }
    let tflops = number_after(t, "throughput per GPU (TFLOP/s/GPU)").or_else(|| {
        let v = number_after(t, "TFLOPs:")?;
        job.tflops_kind.get_or_insert(
            "Megatron-DeepSpeed's own count (throughput_calculator), as its log prints it",
        );
        Some(v)
    });
    if tflops.is_some() {
        job.tflops_kind.get_or_insert(
            "Megatron-LM's own count (num_floating_point_operations), as its log prints it",
        );
    }
    let batch = number_after(t, "global batch size:").and_then(count);
    if let Some(b) = batch.filter(|&b| b > 0) {
        state(&mut job.layout.global_batch_size, b, line);
    }
    job.steps.push(Step {
        number,
        value: ms / 1000.0,
        line,
        rank,
        tflops: tflops.filter(|v| *v > 0.0),
        batch,
    });
}

/// `using world size: 8, data-parallel-size: 8, tensor-model-parallel size: 1, ...`: the
/// sizes Megatron resolved, for logs whose arguments block is missing.
fn world_size_line(t: &str, line: usize, job: &mut Job) {
    let get = |keys: &[&str]| keys.iter().find_map(|k| count_after(t, k));
    if let Some(n) = get(&["world size:"]) {
        state(&mut job.cluster.gpus, n, line);
    }
    if let Some(n) = get(&["data-parallel-size:", "data-parallel size:"]) {
        state(&mut job.layout.dp, n, line);
    }
    if let Some(n) = get(&["tensor-model-parallel size:"]) {
        state(&mut job.layout.tp, n, line);
    }
    if let Some(n) = get(&["pipeline-model-parallel size:"]) {
        state(&mut job.layout.pp, n, line);
    }
    if let Some(n) = get(&["context-parallel size:"]) {
        state(&mut job.layout.cp, n, line);
    }
}

/// An argument's value: `None` when absent or printed as `None`.
fn raw<'a>(args: &'a Args, key: &str) -> Option<(&'a str, usize)> {
    args.get(key)
        .map(|(v, n)| (v.as_str(), *n))
        .filter(|(v, _)| *v != "None")
}

fn int(args: &Args, key: &str) -> Option<(u32, usize)> {
    let (v, n) = raw(args, key)?;
    // `[1]` is Megatron-DeepSpeed's list of expert counts per stage.
    let v = v.trim_start_matches('[');
    Some((leading_number(v).and_then(count)?, n))
}

fn positive(args: &Args, key: &str) -> Option<(u32, usize)> {
    int(args, key).filter(|(v, _)| *v > 0)
}

fn flag(args: &Args, key: &str) -> Option<(bool, usize)> {
    let (v, n) = args.get(key)?;
    match v.as_str() {
        "True" | "true" => Some((true, *n)),
        "False" | "false" | "None" => Some((false, *n)),
        _ => None,
    }
}

/// The model and layout the arguments state, and what follows from the ones a Megatron of
/// that age did not have yet.
fn apply_args(args: &Args, job: &mut Job) {
    sizes(args, job);
    attention_heads(args, job);
    mlp_and_embeddings(args, job);
    moe(args, job);
    virtual_stages(args, job);
    data_parallel(args, job);
    recomputation(args, job);
    precision(args, job);
    attention(args, job);
    if let Some((r, n)) = raw(args, "rampup_batch_size") {
        job.notes.push(format!(
            "the global batch ramps up (rampup_batch_size = {r}, line {n})"
        ));
    }
}

/// The sizes the arguments give as plain counts.
fn sizes(args: &Args, job: &mut Job) {
    let m = &mut job.model;
    let l = &mut job.layout;
    let put = |slot: &mut Option<super::Stated<u32>>, key: &str| {
        if let Some((v, n)) = positive(args, key) {
            state(slot, v, n);
        }
    };
    put(&mut m.layers, "num_layers");
    put(&mut m.hidden, "hidden_size");
    put(&mut m.heads, "num_attention_heads");
    put(&mut m.ffn_hidden, "ffn_hidden_size");
    put(&mut m.seq_len, "seq_length");
    put(&mut m.vocab, "padded_vocab_size");
    put(&mut m.vocab, "vocab_size");
    put(&mut l.tp, "tensor_model_parallel_size");
    put(&mut l.pp, "pipeline_model_parallel_size");
    put(&mut l.dp, "data_parallel_size");
    put(&mut l.microbatch_size, "micro_batch_size");
    put(&mut l.global_batch_size, "global_batch_size");
    put(&mut job.cluster.gpus, "world_size");

    // Context and expert parallelism came to Megatron-Core in 2023; arguments without them
    // are from a Megatron that had neither.
    for (slot, key) in [
        (&mut l.cp, "context_parallel_size"),
        (&mut l.ep, "expert_model_parallel_size"),
    ] {
        match positive(args, key) {
            Some((v, n)) => state(slot, v, n),
            None if !args.contains_key(key) => {
                if let Some((_, n)) = args.get("tensor_model_parallel_size") {
                    state(slot, 1, *n);
                }
            }
            None => {}
        }
    }
}

/// Grouped-query attention: `group_query_attention` with `num_query_groups` (Megatron-LM),
/// `num_key_value_heads` (Megatron-DeepSpeed); neither key means a Megatron from before it.
fn attention_heads(args: &Args, job: &mut Job) {
    let m = &mut job.model;
    let heads = m.heads.as_ref().map(|h| h.value);
    match (
        flag(args, "group_query_attention"),
        positive(args, "num_key_value_heads"),
    ) {
        (Some((true, _)), _) => {
            if let Some((g, n)) = positive(args, "num_query_groups") {
                state(&mut m.kv_heads, g, n);
            }
        }
        (_, Some((kv, n))) => state(&mut m.kv_heads, kv, n),
        (Some((false, n)), None) => {
            if let Some(h) = heads {
                state(&mut m.kv_heads, h, n);
            }
        }
        (None, None) => {
            if let (Some(h), Some((_, n))) = (heads, args.get("num_attention_heads")) {
                state(&mut m.kv_heads, h, *n);
                job.notes.push(
                    "kv_heads = heads: these arguments predate grouped-query attention".into(),
                );
            }
        }
    }
    if let Some((kv, n)) = positive(args, "kv_channels") {
        m.state_head_dim(kv, n);
    }
    if let Some((on, n)) = flag(args, "qk_layernorm") {
        state(&mut m.qk_norm, on, n);
    }
}

/// The MLP's activation and whether the embeddings are tied. Arguments that lack the switch
/// are from a Megatron that had only GELU and only tied embeddings.
fn mlp_and_embeddings(args: &Args, job: &mut Job) {
    let m = &mut job.model;
    let notes = &mut job.notes;
    match flag(args, "swiglu") {
        Some((on, n)) => state(
            &mut m.ffn_act,
            if on { FfnAct::Swiglu } else { FfnAct::Gelu },
            n,
        ),
        None => {
            if let Some((_, n)) = args.get("hidden_size") {
                state(&mut m.ffn_act, FfnAct::Gelu, *n);
                notes.push("ffn_act = gelu: these arguments have no swiglu, so the MLP is Megatron's GELU one".into());
            }
        }
    }
    match flag(args, "untie_embeddings_and_output_weights") {
        Some((untie, n)) => state(&mut m.tied_embeddings, !untie, n),
        None => {
            if let Some((_, n)) = args.get("hidden_size") {
                state(&mut m.tied_embeddings, true, *n);
                notes.push("tied_embeddings = true: these arguments have no untie_embeddings_and_output_weights, so this Megatron predates the option and ties them".into());
            }
        }
    }
}

/// Virtual stages: given, or layers per virtual stage; 1 where a pipeline has neither.
fn virtual_stages(args: &Args, job: &mut Job) {
    let l = &mut job.layout;
    let pp = l.pp.as_ref().map(|p| p.value);
    if let Some((v, n)) = positive(args, "virtual_pipeline_model_parallel_size") {
        state(&mut l.virtual_stages, v, n);
    } else if let (Some((per, n)), Some(p), Some(layers)) = (
        positive(args, "num_layers_per_virtual_pipeline_stage"),
        pp,
        job.model.layers.as_ref().map(|x| x.value),
    ) {
        if let Some(stage) = p.checked_mul(per).filter(|&s| s > 0 && layers % s == 0) {
            state(&mut l.virtual_stages, layers / stage, n);
        }
    } else if let Some((_, n)) = args.get("pipeline_model_parallel_size") {
        state(&mut l.virtual_stages, 1, *n);
    }
}

/// How the data-parallel ranks share the optimizer and reduce gradients: DeepSpeed's ZeRO
/// stage where the arguments run DeepSpeed (which makes the log Megatron-DeepSpeed's), else
/// Megatron's distributed optimizer, ZeRO-1's split.
fn data_parallel(args: &Args, job: &mut Job) {
    let l = &mut job.layout;
    let deepspeed = flag(args, "deepspeed").is_some_and(|(on, _)| on);
    if deepspeed {
        job.family = Family::MegatronDeepspeed;
        if let Some((z, n)) = int(args, "zero_stage") {
            state(&mut l.zero_stage, z.min(3) as u8, n);
        }
    } else if let Some((on, n)) = flag(args, "use_distributed_optimizer") {
        state(&mut l.zero_stage, u8::from(on), n);
    }
    if let Some((on, n)) = flag(args, "overlap_grad_reduce") {
        state(&mut l.overlap_grad_reduce, on, n);
    }
}

/// Recomputation: `recompute_granularity` (2022 on), before it `checkpoint_activations`
/// (full) and `recompute_activations` (selective). Sequence parallelism came with Korthikanti
/// et al.'s selective recomputation (2022): arguments without it are from before it.
fn recomputation(args: &Args, job: &mut Job) {
    let l = &mut job.layout;
    let granularity = raw(args, "recompute_granularity");
    let rc = match granularity {
        Some((g, n)) if g.contains("full") => Some((Recompute::Full, n)),
        Some((g, n)) if g.contains("selective") => Some((Recompute::Selective, n)),
        _ => match (
            flag(args, "checkpoint_activations"),
            flag(args, "recompute_activations"),
        ) {
            (Some((true, n)), _) => Some((Recompute::Full, n)),
            (_, Some((true, n))) => Some((Recompute::Selective, n)),
            (Some((false, n)), _) | (_, Some((false, n))) => Some((Recompute::None, n)),
            _ => args
                .get("recompute_granularity")
                .map(|(_, n)| (Recompute::None, *n)),
        },
    };
    if let Some((r, n)) = rc {
        state(&mut l.recompute, r, n);
    }
    match flag(args, "sequence_parallel") {
        Some((on, n)) => state(&mut l.sequence_parallel, on, n),
        None => {
            if let Some((_, n)) = args.get("tensor_model_parallel_size") {
                state(&mut l.sequence_parallel, false, *n);
            }
        }
    }
}

/// Precision: `fp8` names a format when on; `bf16`; `fp16`, which format 1 has no value for.
fn precision(args: &Args, job: &mut Job) {
    let l = &mut job.layout;
    if let Some((f, n)) = raw(args, "fp8") {
        state(&mut l.precision, Precision::Fp8, n);
        job.notes
            .push(format!("precision = fp8: the arguments give fp8 = {f}"));
    } else if let Some((true, n)) = flag(args, "bf16") {
        state(&mut l.precision, Precision::Bf16, n);
    } else if let Some((true, n)) = flag(args, "fp16") {
        job.notes.push(format!(
            "precision null: the arguments train in fp16 (line {n}), which format 1 has no value for; its GEMMs run at the bf16 rate, which validate prices for null"
        ));
    }
}

/// The attention kernel: flash (or fused) against unfused, as `validate` prices them.
fn attention(args: &Args, job: &mut Job) {
    let l = &mut job.layout;
    match (flag(args, "use_flash_attn"), raw(args, "attention_backend")) {
        (Some((true, n)), _) => state(&mut l.attention, Attention::Flash, n),
        (_, Some((b, n))) if b.contains("flash") || b.contains("fused") => {
            state(&mut l.attention, Attention::Flash, n)
        }
        (_, Some((b, n))) if b.contains("unfused") || b.contains("local") => {
            state(&mut l.attention, Attention::Unfused, n)
        }
        _ => {}
    }
}

/// Mixture of experts: `num_experts`, `moe_router_topk`, `moe_ffn_hidden_size`,
/// `moe_shared_expert_intermediate_size`, `moe_layer_freq`, `moe_expert_capacity_factor` and
/// `moe_pad_expert_input_to_capacity`; `None` experts (or
/// Megatron-DeepSpeed's `[1]`) is dense.
fn moe(args: &Args, job: &mut Job) {
    let m = &mut job.model;
    let Some((_, line)) = args.get("num_experts") else {
        if let Some((_, n)) = args.get("num_layers") {
            state(&mut m.moe, None, *n);
        }
        return;
    };
    let experts = int(args, "num_experts").map(|e| e.0).unwrap_or(0);
    if experts <= 1 {
        state(&mut m.moe, None, *line);
        return;
    }
    let ffn = m.ffn_hidden.as_ref().map(|f| f.value).unwrap_or(0);
    let expert_ffn = positive(args, "moe_ffn_hidden_size").map_or(ffn, |v| v.0);
    let top_k = positive(args, "moe_router_topk").map_or(2, |v| v.0);
    let shared = positive(args, "moe_shared_expert_intermediate_size")
        .and_then(|(s, _)| s.checked_div(expert_ffn))
        .unwrap_or(0);
    // `moe_layer_freq` as a list (`[0, 0, 1, ...]`): leading zeros are dense layers.
    let dense = raw(args, "moe_layer_freq").map_or(0, |(f, _)| {
        if f.starts_with('[') {
            f.trim_start_matches('[')
                .split(',')
                .take_while(|x| x.trim() == "0")
                .count() as u32
        } else {
            0
        }
    });
    if expert_ffn == 0 {
        job.notes
            .push("moe null: num_experts is set but no expert FFN size is stated".into());
        return;
    }
    // A capacity (`moe_expert_capacity_factor`, None when dropless) and the padding to it,
    // which Megatron applies only where a capacity is set.
    let capacity_factor = raw(args, "moe_expert_capacity_factor")
        .and_then(|(v, _)| v.parse::<f64>().ok())
        .filter(|c| c.is_finite() && *c > 0.0);
    let pad_to_capacity = capacity_factor.is_some()
        && flag(args, "moe_pad_expert_input_to_capacity").is_some_and(|(on, _)| on);
    state(
        &mut m.moe,
        Some(Moe {
            experts,
            top_k,
            shared_experts: shared,
            expert_ffn_hidden: expert_ffn,
            dense_layers: dense,
            n_group: None,
            topk_group: None,
            capacity_factor,
            pad_to_capacity,
        }),
        *line,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::job::value;

    /// Megatron-LM's line shape, with an arguments block (`training.py`, `arguments.py`).
    const LOG: &str = "\
using world size: 16, data-parallel size: 2, context-parallel size: 1 tensor-model-parallel size: 8, pipeline-model-parallel size: 1
------------------------ arguments ------------------------
  context_parallel_size ........................... 1
  expert_model_parallel_size ...................... 8
  ffn_hidden_size ................................. 14336
  fp8 ............................................. None
  global_batch_size ............................... 128
  group_query_attention ........................... True
  hidden_size ..................................... 4096
[rank3]: some other rank's line
  micro_batch_size ................................ 1
  moe_router_topk ................................. 2
  num_attention_heads ............................. 32
  num_experts ..................................... 8
  num_layers ...................................... 32
  num_query_groups ................................ 8
  pipeline_model_parallel_size .................... 1
  recompute_granularity ........................... None
  seq_length ...................................... 4096
  sequence_parallel ............................... True
  swiglu .......................................... True
  tensor_model_parallel_size ...................... 8
  untie_embeddings_and_output_weights ............. True
  use_distributed_optimizer ....................... True
  bf16 ............................................ True
  world_size ...................................... 16
-------------------- end of arguments ---------------------
 > padded vocab (size: 32000) with 0 dummy tokens (new size: 32000)
 [2024-04-06 02:59:36] iteration       43/     100 | consumed samples:         5504 | elapsed time per iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 | global batch size:   128 |
 [2024-04-06 02:59:41] iteration       44/     100 | consumed samples:         5632 | elapsed time per iteration (ms): 5533.8 | global batch size:   128 |
 [2024-04-06 02:59:52] iteration       46/     100 | consumed samples:         5888 | elapse";

    #[test]
    fn arguments_and_iterations() {
        let job = read(LOG).unwrap();
        assert_eq!(job.family, Family::MegatronLm);
        assert_eq!(value(&job.model.layers), Some(32));
        assert_eq!(value(&job.model.qk_norm), None);
        let normed = LOG.replace(
            "  recompute_granularity",
            "  qk_layernorm .... True\n  recompute_granularity",
        );
        assert_eq!(value(&read(&normed).unwrap().model.qk_norm), Some(true));
        assert_eq!(value(&job.model.kv_heads), Some(8));
        assert_eq!(value(&job.model.vocab), Some(32000));
        assert_eq!(value(&job.layout.tp), Some(8));
        assert_eq!(value(&job.layout.dp), Some(2));
        assert_eq!(value(&job.layout.ep), Some(8));
        assert_eq!(value(&job.cluster.gpus), Some(16));
        assert_eq!(job.layout.zero_stage.as_ref().unwrap().value, 1);
        assert_eq!(
            job.layout.recompute.as_ref().unwrap().value,
            Recompute::None
        );
        assert_eq!(
            job.layout.precision.as_ref().unwrap().value,
            Precision::Bf16
        );
        assert!(!job.model.tied_embeddings.as_ref().unwrap().value);
        let moe = job.model.moe.as_ref().unwrap().value.clone().unwrap();
        assert_eq!(
            (moe.experts, moe.top_k, moe.expert_ffn_hidden),
            (8, 2, 14336)
        );
        assert_eq!((moe.capacity_factor, moe.pad_to_capacity), (None, false));
        assert_eq!(
            job.steps
                .iter()
                .map(|s| (s.number, s.value))
                .collect::<Vec<_>>(),
            [(43, 5.4449), (44, 5.5338)]
        );
        assert_eq!(job.steps[0].tflops, Some(239.8));
        assert_eq!(job.skipped.len(), 1, "{:?}", job.skipped);
        assert!(job.skipped[0].starts_with("line 31: iteration 46 without its time"));
    }

    #[test]
    fn a_capacity_and_its_padding_are_read_from_the_arguments() {
        let capped = |factor: &str, pad: &str| {
            let log = LOG.replace(
                "  moe_router_topk",
                &format!(
                    "  moe_expert_capacity_factor ...... {factor}\n  moe_pad_expert_input_to_capacity ... {pad}\n  moe_router_topk"
                ),
            );
            let moe = read(&log).unwrap().model.moe.unwrap().value.unwrap();
            (moe.capacity_factor, moe.pad_to_capacity)
        };
        assert_eq!(capped("1.25", "True"), (Some(1.25), true));
        assert_eq!(capped("1.0", "False"), (Some(1.0), false));
        // Megatron pads only where a capacity is set.
        assert_eq!(capped("None", "True"), (None, false));
    }

    #[test]
    fn old_megatron_ties_embeddings_and_has_no_gqa() {
        let log = "------------------------ arguments ------------------------\n  hidden_size ...... 768\n  num_attention_heads ... 12\n  num_layers ... 12\n  checkpoint_activations ... True\n  deepspeed ... True\n  zero_stage ... 1.0\n-------------------- end of arguments ---------------------\n iteration       10/  171661 | elapsed time per iteration (ms): 1001.5 |\n";
        let job = read(log).unwrap();
        assert_eq!(job.family, Family::MegatronDeepspeed);
        assert!(job.model.tied_embeddings.as_ref().unwrap().value);
        assert_eq!(job.model.kv_heads.as_ref().unwrap().value, 12);
        assert_eq!(job.model.ffn_act.as_ref().unwrap().value, FfnAct::Gelu);
        assert_eq!(
            job.layout.recompute.as_ref().unwrap().value,
            Recompute::Full
        );
        assert_eq!(job.layout.zero_stage.as_ref().unwrap().value, 1);
        assert_eq!(job.layout.cp, None);
    }
}
