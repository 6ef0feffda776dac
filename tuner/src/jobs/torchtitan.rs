//! torchtitan's log (`torchtitan/components/metrics.py`, `trainer.py`,
//! `distributed/parallel_dims.py`): step lines (`step: 10  loss:  7.9  memory:
//! 30.21GiB(31.8%)  tps: 6,123  tflops: 355.2  mfu: 35.9%`, coloured or not), and what it says
//! while it builds the job:
//!
//! - the mesh: `Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1,
//!   tp=1, ep=1` (2025-12 on), before it `Building 2-D device mesh with ['dp_shard', 'tp'],
//!   [4, 2]`;
//! - the batch: `Trainer is initialized with local batch size 160, global batch size 1280,
//!   gradient accumulation steps 1, sequence length 128, ...` (2025-06 to 2026-08), before it
//!   `Training starts at step 1, with local batch size 8, global batch size 64, sequence length
//!   8192, ...`, after it `... with 20480 tokens per DP rank, 163840 tokens per train step, ...,
//!   maximum context length 128, ...`;
//! - the GPU (`CUDA capacity: NVIDIA H100 80GB HBM3 with 79.10GiB memory`), the model
//!   (`Building llama3 8B`, before 2025-04 with its `ModelArgs(dim=4096, n_layers=32, ...)`),
//!   and `Applied FSDP`, `Applied full activation checkpointing`, `Compiling each
//!   TransformerBlock with torch.compile`, `Float8 training active with recipe rowwise`.
//!
//! `tps` is tokens per second per GPU (`ntokens_since_last_log / (time_delta x
//! non_data_parallel_size)`), averaged since the previous step line, not a step time: a step
//! takes global batch tokens / (tps x GPUs), which needs the batch and the GPU count.
//!
//! Cannot read: the model shape of a newer log (it prints the flavor, not the arguments), the
//! pipeline microbatch size (not printed), the network.

use super::job::skips;
use super::lines::{count, leading_number, lines, number_after, number_after_word};
use super::{state, Family, Job, Measure, Step};
use crate::mesh::{Precision, Recompute};
use crate::model::FfnAct;

/// Reads a torchtitan log; `None` when no line is a step line (`step:` with `tps:`).
pub fn read(text: &str) -> Option<Job> {
    if !text.contains("tps:") {
        return None;
    }
    let mut job = Job::new(
        Family::Torchtitan,
        Measure::TokensPerGpuPerSecond,
        "tps (tokens per second per GPU)",
    );
    job.tflops_kind =
        Some("torchtitan's own count (num_flops_per_token x tps), as its log prints it");
    let mut any = false;
    let mut batch = Batch::default();
    for line in lines(text) {
        let t: &str = &line.text;
        let n = line.number;
        if t.contains("tps:") && t.contains("step:") && !t.contains("validate step") {
            any = true;
            step(t, n, line.rank, &mut job);
        } else if t.contains("Building device mesh with parallelism:") {
            mesh_named(t, n, &mut job);
        } else if t.contains("device mesh with [") {
            mesh_lists(t, n, &mut job);
        } else if t.contains("global batch size") || t.contains("tokens per train step") {
            batch.read(t, n, &mut job);
        } else if let Some((at, key)) = ["CUDA capacity: ", "GPU capacity: "]
            .iter()
            .find_map(|k| t.find(k).map(|at| (at, *k)))
        {
            device(&t[at + key.len()..], n, &mut job);
        } else {
            setup(t, n, &mut job);
        }
    }
    if !any {
        return None;
    }
    batch.apply(&mut job);
    // Ranks print each step again, not always in order: the gaps are between distinct steps.
    let mut numbers: Vec<u64> = job.steps.iter().map(|s| s.number).collect();
    numbers.sort_unstable();
    numbers.dedup();
    job.averaged = skips(&numbers);
    Some(job)
}

/// What the batch lines say beyond the global batch and the sequence length, kept until the
/// whole log is read: the tokens per step give the global batch only once the sequence length
/// is known, and the local batch is the microbatch only once the pipeline size is.
#[derive(Default)]
struct Batch {
    tokens_per_step: Option<(u32, usize)>,
    local: Option<(u32, usize)>,
}

impl Batch {
    /// `Trainer is initialized with local batch size 160, global batch size 1280, ...` and its
    /// older and newer forms.
    fn read(&mut self, t: &str, n: usize, job: &mut Job) {
        if let Some(b) = number_after(t, "global batch size").and_then(count) {
            state(&mut job.layout.global_batch_size, b, n);
        }
        if let Some(s) = number_after(t, "sequence length")
            .or_else(|| number_after(t, "maximum context length"))
            .and_then(count)
        {
            state(&mut job.model.seq_len, s, n);
        }
        if let Some(l) = number_after(t, "local batch size").and_then(count) {
            self.local.get_or_insert((l, n));
        }
        if let Some(at) = t.find(" tokens per train step") {
            let head = t[..at].rsplit([' ', ',']).next().unwrap_or("");
            if let Some(tok) = leading_number(head).and_then(count) {
                self.tokens_per_step.get_or_insert((tok, n));
            }
        }
    }

    /// The global batch from the tokens per step where no line states it, and the microbatch.
    fn apply(self, job: &mut Job) {
        if let (None, Some((tok, n)), Some(s)) = (
            &job.layout.global_batch_size,
            self.tokens_per_step,
            job.model.seq_len.as_ref().map(|s| s.value),
        ) {
            if s > 0 && tok % s == 0 {
                state(&mut job.layout.global_batch_size, tok / s, n);
            }
        }
        // The local batch is one forward's without a pipeline; a pipeline splits it into
        // microbatches it does not print.
        if let (Some((b, n)), Some(1)) = (self.local, job.layout.pp.as_ref().map(|p| p.value)) {
            state(&mut job.layout.microbatch_size, b, n);
        }
    }
}

/// `NVIDIA B200 with 178.35GiB memory`, after `CUDA capacity: `: the catalog GPU of that name,
/// or a note that there is none, so that the user knows to pass `--gpu`.
fn device(name: &str, n: usize, job: &mut Job) {
    let name = name.split(" with ").next().unwrap_or(name);
    let name = name.split(" (").next().unwrap_or(name);
    match crate::catalog::gpu_for_model_name(name) {
        Some(g) => {
            state(&mut job.cluster.gpu, g.id.to_string(), n);
            job.notes.push(format!(
                "cluster.gpu = {} from the device name `{}`",
                g.id,
                name.trim()
            ));
        }
        None => job.notes.push(format!(
            "the device `{}` is no catalog GPU: pass --gpu",
            name.trim()
        )),
    }
}

/// What torchtitan says as it builds the job: the data-parallel wrapper, activation
/// checkpointing, compilation, float8 and the model.
fn setup(t: &str, n: usize, job: &mut Job) {
    if t.contains("Applied FSDP to the model")
        || t.contains("Applied HSDP to the model")
        || t.contains("Applied fully_shard to the model")
    {
        state(&mut job.layout.zero_stage, 3, n);
    } else if t.contains("Applied DDP to the model") {
        state(&mut job.layout.zero_stage, 0, n);
    } else if t.contains("activation checkpointing") && t.contains("Applied") {
        if t.contains("full") {
            state(&mut job.layout.recompute, Recompute::Full, n);
        } else if t.contains("selective") || t.contains("SAC") {
            state(&mut job.layout.recompute, Recompute::Selective, n);
        }
    } else if t.contains("with torch.compile") || t.contains("Applied JIT compilation") {
        state(&mut job.layout.torch_compile, true, n);
    } else if t.contains("Float8 training active") || t.contains("Float8Linear") {
        let p = if t.contains("rowwise") {
            Precision::Fp8Rowwise
        } else {
            Precision::Fp8
        };
        state(&mut job.layout.precision, p, n);
    } else if t.contains("MXFP8Linear") {
        state(&mut job.layout.precision, Precision::Fp8, n);
        job.notes
            .push("precision = fp8 for MXFP8 linears (format 1 has no mxfp8)".into());
    } else if let Some(at) = t.find(" - Building ") {
        let what = &t[at + " - Building ".len()..];
        model(what.trim_end_matches(" on meta device"), n, job);
    }
}

fn step(t: &str, line: usize, rank: Option<u32>, job: &mut Job) {
    let Some(number) = number_after(t, "step:").and_then(count) else {
        job.skipped
            .push(format!("line {line}: a step line without its step number"));
        return;
    };
    let s = Step {
        number: u64::from(number),
        value: 0.0,
        line,
        rank,
        tflops: number_after(t, "tflops:").filter(|v| *v > 0.0),
        batch: None,
    };
    job.step(s, number_after(t, "tps:"), "tps");
}

/// `pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=1`.
fn mesh_named(t: &str, n: usize, job: &mut Job) {
    let get = |k: &str| number_after_word(t, k).and_then(count).filter(|&v| v > 0);
    let (Some(pp), Some(rep), Some(shard), Some(cp), Some(tp)) = (
        get("pp="),
        get("dp_replicate="),
        get("dp_shard="),
        get("cp="),
        get("tp="),
    ) else {
        return;
    };
    sizes(job, n, pp, rep, shard, cp, tp, get("ep="));
}

/// `Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]`: names and sizes of the mesh
/// dimensions larger than 1.
fn mesh_lists(t: &str, n: usize, job: &mut Job) {
    let Some(at) = t.find("device mesh with [") else {
        return;
    };
    let rest = &t[at + "device mesh with [".len()..];
    let Some((names, rest)) = rest.split_once(']') else {
        return;
    };
    let Some(dims) = rest
        .split_once('[')
        .and_then(|(_, d)| d.split_once(']'))
        .map(|d| d.0)
    else {
        return;
    };
    let names: Vec<&str> = names
        .split(',')
        .map(|s| s.trim().trim_matches(['\'', '"']))
        .collect();
    let dims: Vec<Option<u32>> = dims.split(',').map(|d| d.trim().parse().ok()).collect();
    if names.len() != dims.len() {
        return;
    }
    let size = |k: &str| {
        names
            .iter()
            .position(|x| *x == k)
            .map_or(Some(1), |i| dims[i].filter(|&v| v > 0))
    };
    let (Some(pp), Some(rep), Some(shard), Some(cp), Some(tp)) = (
        size("pp"),
        size("dp_replicate"),
        size("dp_shard").and_then(|s| size("dp").and_then(|d| s.checked_mul(d))),
        size("cp"),
        size("tp"),
    ) else {
        return;
    };
    sizes(job, n, pp, rep, shard, cp, tp, None);
}

#[allow(clippy::too_many_arguments)]
fn sizes(
    job: &mut Job,
    n: usize,
    pp: u32,
    rep: u32,
    shard: u32,
    cp: u32,
    tp: u32,
    ep: Option<u32>,
) {
    let l = &mut job.layout;
    state(&mut l.pp, pp, n);
    state(&mut l.tp, tp, n);
    state(&mut l.cp, cp, n);
    let dp = rep.checked_mul(shard);
    if let Some(dp) = dp {
        state(&mut l.dp, dp, n);
    }
    state(&mut l.ep, ep.unwrap_or(1), n);
    // FSDP2 shards parameters, gradients and optimizer state over dp_shard: ZeRO-3's split.
    if shard > 1 {
        state(&mut l.zero_stage, 3, n);
    } else if rep > 1 {
        state(&mut l.zero_stage, 0, n);
    }
    let gpus = [pp, cp, tp]
        .into_iter()
        .try_fold(dp.unwrap_or(0), |a, b| a.checked_mul(b));
    if let Some(g) = gpus.filter(|&g| g > 0) {
        state(&mut job.cluster.gpus, g, n);
    }
}

/// `Building llama3 8B` and, before 2025-04, `... with TransformerModelArgs(dim=4096,
/// n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024,
/// ffn_dim_multiplier=1.3, ...)`.
fn model(t: &str, n: usize, job: &mut Job) {
    let (name, args) = match t.split_once(" with ") {
        Some((name, args)) => (name.trim(), Some(args)),
        None => (t.trim(), None),
    };
    if name.is_empty() || name.len() > 80 {
        return;
    }
    state(&mut job.model.name, name.to_string(), n);
    let Some(args) = args else { return };
    let get = |k: &str| number_after_word(args, k);
    let m = &mut job.model;
    let dim = get("dim=").and_then(count).filter(|&v| v > 0);
    for (slot, k) in [
        (&mut m.layers, "n_layers="),
        (&mut m.heads, "n_heads="),
        (&mut m.kv_heads, "n_kv_heads="),
        (&mut m.vocab, "vocab_size="),
    ] {
        if let Some(v) = get(k).and_then(count).filter(|&v| v > 0) {
            state(slot, v, n);
        }
    }
    let Some(dim) = dim else { return };
    state(&mut m.hidden, dim, n);
    // Llama's MLP width (torchtitan models/llama3/model.py FeedForward): 2/3 of 4 x dim,
    // times ffn_dim_multiplier, rounded up to multiple_of (8B: 14336).
    if let Some(multiple) = get("multiple_of=").and_then(count).filter(|&v| v > 0) {
        let mut hidden = (2 * 4 * u64::from(dim)) / 3;
        if let Some(mult) = get("ffn_dim_multiplier=") {
            hidden = (mult * hidden as f64) as u64;
        }
        let multiple = u64::from(multiple);
        let ffn = hidden.div_ceil(multiple).checked_mul(multiple);
        if let Some(ffn) = ffn.and_then(|f| u32::try_from(f).ok()) {
            state(&mut m.ffn_hidden, ffn, n);
            state(&mut m.ffn_act, FfnAct::Swiglu, n);
            state(&mut m.tied_embeddings, false, n);
            job.notes.push("ffn_hidden from multiple_of and ffn_dim_multiplier as torchtitan's Llama FeedForward sizes it; swiglu and untied embeddings are that model's".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::job::value;

    #[test]
    fn old_lines_name_the_mesh_batch_and_model() {
        let log = "\
[rank0]:2024-10-01 10:00:00,000 - root - INFO - Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]
[rank0]:2024-10-01 10:00:01,000 - root - INFO - Building llama3 8B with TransformerModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.3, norm_eps=1e-05)
[rank0]:2024-10-01 10:00:02,000 - root - INFO - GPU capacity: NVIDIA H100 80GB HBM3 (0) with 79.10GiB memory
[rank0]:2024-10-01 10:00:03,000 - root - INFO - Applied selective activation checkpointing to the model
[rank0]:2024-10-01 10:00:04,000 - root - INFO - Training starts at step 1, with local batch size 2, global batch size 8, sequence length 8192, total steps 100 (warmup 20)
[rank0]:2024-10-01 10:00:20,000 - root - INFO - step:  1  loss: 12.2  memory: 30.2GiB(38%)  tps: 1,022  tflops: 59.2  mfu: 6.0%
[rank0]:2024-10-01 10:00:40,000 - root - INFO - step: 10  loss:  9.1  memory: 33.0GiB(41%)  tps: 6,123  tflops: 355.2  mfu: 35.9%
";
        let job = read(log).unwrap();
        assert_eq!(value(&job.layout.dp), Some(4));
        assert_eq!(value(&job.layout.tp), Some(2));
        assert_eq!(value(&job.cluster.gpus), Some(8));
        assert_eq!(value(&job.model.ffn_hidden), Some(14336));
        assert_eq!(value(&job.model.kv_heads), Some(8));
        assert_eq!(value(&job.layout.global_batch_size), Some(8));
        assert_eq!(value(&job.model.seq_len), Some(8192));
        assert_eq!(job.cluster.gpu.as_ref().unwrap().value, "h100-sxm");
        assert_eq!(job.layout.zero_stage.as_ref().unwrap().value, 3);
        assert_eq!(
            job.layout.recompute.as_ref().unwrap().value,
            Recompute::Selective
        );
        assert_eq!(
            job.steps.iter().map(|s| s.value).collect::<Vec<_>>(),
            [1022.0, 6123.0]
        );
        assert!(job.averaged);
    }

    #[test]
    fn newest_lines_give_tokens_per_step() {
        let log = "Building device mesh with parallelism: pp=2, dp_replicate=1, dp_shard=4, cp=1, tp=2, ep=1\nTrainer is initialized with 20480 tokens per DP rank, 163840 tokens per train step, gradient accumulation steps 1, maximum context length 128, total steps 10 (warmup 2)\nstep:  1  loss: 1  tps: 100\n";
        let job = read(log).unwrap();
        assert_eq!(value(&job.cluster.gpus), Some(16));
        assert_eq!(value(&job.layout.global_batch_size), Some(1280));
        assert_eq!(value(&job.layout.microbatch_size), None);
    }
}
