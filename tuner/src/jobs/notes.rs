//! What a run's notes say: how its time was read, what the log left out, and which of those
//! fields format 1 needs, so that the user knows what to check and what to supply.

use super::job::{Job, Measure};
use super::runs_file::RunOut;
use super::steady_state::{Selection, SteadyState, StepShape};

/// The names whose test holds, in order: each note lists the fields that are null in one line.
fn those<const N: usize>(tests: [(bool, &'static str); N]) -> Vec<&'static str> {
    tests
        .into_iter()
        .filter(|(holds, _)| *holds)
        .map(|(_, name)| name)
        .collect()
}

/// Iteration numbers as a note names them.
fn range(a: u64, b: u64) -> String {
    if a == b {
        format!("iteration {a}")
    } else {
        format!("iterations {a}-{b}")
    }
}

/// The fields format 1 requires that `run` leaves null.
pub(crate) fn missing_fields(run: &RunOut) -> Vec<&'static str> {
    let m = &run.model;
    let c = &run.cluster;
    let l = &run.layout;
    those([
        (m.name.is_none(), "model.name"),
        (m.layers.is_none(), "model.layers"),
        (m.hidden.is_none(), "model.hidden"),
        (m.heads.is_none(), "model.heads"),
        (m.ffn_act.is_none(), "model.ffn_act"),
        (m.vocab.is_none(), "model.vocab"),
        (m.seq_len.is_none(), "model.seq_len"),
        (m.tied_embeddings.is_none(), "model.tied_embeddings"),
        (c.gpu.is_none(), "cluster.gpu"),
        (c.gpus.is_none(), "cluster.gpus"),
        (c.gpus_per_node.is_none(), "cluster.gpus_per_node"),
        (c.nics_per_node.is_none(), "cluster.nics_per_node"),
        (c.nic_gbps.is_none(), "cluster.nic_gbps"),
        (l.tp.is_none(), "layout.tp"),
        (l.pp.is_none(), "layout.pp"),
        (l.dp.is_none(), "layout.dp"),
        (l.global_batch_size.is_none(), "layout.global_batch_size"),
        (
            run.observed.iteration_time_s.is_none(),
            "observed.iteration_time_s",
        ),
    ])
}

/// What the log did not state, with the flag that fills it where there is one; fields a flag
/// filled are not listed.
pub(crate) fn unstated(run: &RunOut, job: &Job) -> Vec<String> {
    let m = &run.model;
    let c = &run.cluster;
    let l = &run.layout;
    let mut out = Vec::new();
    let shape = those([
        (m.layers.is_none(), "layers"),
        (m.hidden.is_none(), "hidden"),
        (m.heads.is_none(), "heads"),
        (m.kv_heads.is_none(), "kv_heads (null reads as heads)"),
        (
            m.ffn_hidden.is_none(),
            "ffn_hidden (null reads as 4 x hidden)",
        ),
        (m.ffn_act.is_none(), "ffn_act"),
        (m.vocab.is_none(), "vocab"),
        (m.seq_len.is_none(), "seq_len"),
        (m.tied_embeddings.is_none(), "tied_embeddings"),
        (job.model.moe.is_none(), "moe (null reads as dense)"),
    ]);
    if !shape.is_empty() {
        out.push(format!("model {}", shape.join(", ")));
    }
    out.extend(
        those([
            (c.gpu.is_none(), "gpu (pass --gpu)"),
            (c.gpus.is_none(), "GPU count (pass --gpus)"),
            (
                c.gpus_per_node.is_none(),
                "gpus_per_node (pass --gpus-per-node)",
            ),
            (
                c.nics_per_node.is_none(),
                "nics_per_node (pass --nics-per-node)",
            ),
            (c.nic_gbps.is_none(), "nic_gbps (pass --nic-gbps)"),
            (
                l.global_batch_size.is_none(),
                "global batch (pass --global-batch)",
            ),
        ])
        .into_iter()
        .map(str::to_string),
    );
    let knobs = those([
        (l.tp.is_none(), "tp"),
        (l.pp.is_none(), "pp"),
        (l.dp.is_none(), "dp"),
        (l.ep.is_none(), "ep"),
        (l.cp.is_none(), "cp"),
        (l.microbatch_size.is_none(), "microbatch_size"),
        (l.zero_stage.is_none(), "zero_stage"),
        (l.recompute.is_none(), "recompute"),
        (l.sequence_parallel.is_none(), "sequence_parallel"),
        (l.precision.is_none(), "precision"),
        (l.attention.is_none(), "attention"),
        (l.overlap_grad_reduce.is_none(), "overlap_grad_reduce"),
    ]);
    if !knobs.is_empty() {
        out.push(format!(
            "layout {} (validate chooses these as a careful user would)",
            knobs.join(", ")
        ));
    }
    out
}

/// The note that leads a run's notes: how `iteration_time_s` was read from `job`'s lines, or,
/// where it is null, what the log would have had to state, so that the user knows which flag
/// fills it.
pub(crate) fn iteration_time(
    job: &Job,
    selection: &Selection,
    shape: &StepShape,
    warmup_given: bool,
) -> String {
    let dedup = repeated(selection.duplicates);
    match &selection.steady {
        Some(s) => {
            let interval = if job.averaged {
                "; each line averages the iterations since the line before"
            } else {
                ""
            };
            format!(
                "iteration_time_s: median of {} logged iteration{} ({}; {}){interval}; {}{dedup}",
                s.kept,
                if s.kept == 1 { "" } else { "s" },
                range(s.kept_range.0, s.kept_range.1),
                warmup(s, warmup_given),
                how_read(job, shape),
            )
        }
        None => format!(
            "iteration_time_s: null: {} is a rate, not a step time, and the log does not state {}{dedup}",
            job.figure,
            lacks(job.measure, shape).join(" or ")
        ),
    }
}

/// Repeated lines dropped, said where there were any: a log whose ranks all print would
/// otherwise look like one with many more iterations.
fn repeated(duplicates: usize) -> String {
    if duplicates > 0 {
        format!(
            "; {duplicates} repeated lines for an iteration already seen dropped (rank 0's kept where a launcher prefix names ranks, else the first printed)"
        )
    } else {
        String::new()
    }
}

/// The lines dropped as warm-up, and whether the rule or `--warmup` chose them.
fn warmup(s: &SteadyState, warmup_given: bool) -> String {
    match (s.dropped, s.dropped_range) {
        (0, _) | (_, None) => "none dropped as warm-up (too few lines)".to_string(),
        (d, Some((a, b))) => format!(
            "the first {d} line{} ({}) dropped as warm-up{}",
            if d == 1 { "" } else { "s" },
            range(a, b),
            if warmup_given {
                ", as --warmup says"
            } else {
                ""
            }
        ),
    }
}

/// How a line's figure became seconds, with the numbers a rate was divided by, so that a wrong
/// batch or GPU count shows in the note.
fn how_read(job: &Job, shape: &StepShape) -> String {
    match job.measure {
        Measure::Seconds => format!("{} as the log prints it", job.figure),
        Measure::TokensPerGpuPerSecond => format!(
            "derived from {}: global batch {} x {} tokens / (tps x {} GPUs)",
            job.figure,
            shape.global_batch.unwrap_or(0),
            shape.seq_len.unwrap_or(0),
            shape.gpus.unwrap_or(0)
        ),
        Measure::SamplesPerSecond => format!(
            "derived from {}: train_batch_size {} / samples per second",
            job.figure,
            shape.global_batch.unwrap_or(0)
        ),
    }
}

/// What a rate needs to become a step time that the log does not state, with the flag that
/// gives it where there is one.
fn lacks(measure: Measure, shape: &StepShape) -> Vec<&'static str> {
    those([
        (
            shape.global_batch.is_none(),
            "the global batch (pass --global-batch)",
        ),
        (
            shape.seq_len.is_none() && measure == Measure::TokensPerGpuPerSecond,
            "the sequence length",
        ),
        (
            shape.gpus.is_none() && measure == Measure::TokensPerGpuPerSecond,
            "the GPU count (pass --gpus)",
        ),
    ])
}
