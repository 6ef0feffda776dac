//! The run being assembled from a job: the log's facts, the flags where it is silent, the
//! mesh identity, the steady-state time and the notes that say how each was read.

use super::error::JobError;
use super::job::{value, Job, LayoutFacts, ModelFacts};
use super::notes::{self, missing_fields, unstated};
use super::overrides::Overrides;
use super::runs_file::{LayoutOut, ModelOut, ObservedOut, RunOut};
use super::steady_state::{select, Selection, StepShape};
use crate::validate::median;

/// A run and what to tell the user about it.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// The run.
    pub run: RunOut,
    /// Notes for stderr, one per fact.
    pub notes: Vec<String>,
    /// Fields format 1 needs that are still `null` (`cluster.gpu`, ...).
    pub missing: Vec<&'static str>,
}

/// The run for `job`, read from `file` (`stem` names it), with the flags filling what the log
/// lacks.
pub fn to_run(job: &Job, file: &str, stem: &str, o: &Overrides) -> Result<JobRun, JobError> {
    let mut notes: Vec<String> = Vec::new();
    let mut cluster = o.cluster(job, file)?;
    let global_batch = o.global_batch(job, file)?;
    let mesh = Mesh::complete(&job.layout, &mut cluster.gpus, &mut notes);
    let shape = StepShape {
        global_batch,
        seq_len: value(&job.model.seq_len),
        gpus: cluster.gpus,
    };
    let selection = select(job, file, o.warmup, &shape, &mut notes)?;
    notes.insert(
        0,
        notes::iteration_time(job, &selection, &shape, o.warmup.is_some()),
    );
    let observed = observed(job, &selection, &shape);
    notes.extend(job.notes.iter().cloned());
    let run = RunOut {
        id: stem.to_string(),
        group: o.group.clone().unwrap_or_else(|| format!("jobs-{stem}")),
        source: source(job, file),
        model: model_out(&job.model, stem, &mut notes),
        cluster,
        layout: layout_out(&job.layout, &mesh, global_batch),
        observed,
        notes: String::new(),
    };
    Ok(finish(run, job, stem, notes))
}

/// The parallel sizes of a run. tp x pp x dp x cp = GPUs, the identity format 1 holds every run
/// to, gives either side from the other where the log states one.
struct Mesh {
    tp: Option<u32>,
    pp: Option<u32>,
    dp: Option<u32>,
    cp: Option<u32>,
}

impl Mesh {
    /// The sizes `l` states, dp or `gpus` derived where only one of them is known, each
    /// derivation noted so that the user can check it against the job.
    fn complete(l: &LayoutFacts, gpus: &mut Option<u32>, notes: &mut Vec<String>) -> Mesh {
        let (tp, pp, cp) = (value(&l.tp), value(&l.pp), value(&l.cp));
        let mut dp = value(&l.dp);
        let model_parallel = match (tp, pp) {
            (Some(t), Some(p)) => u64::from(t)
                .checked_mul(u64::from(p))
                .and_then(|x| x.checked_mul(u64::from(cp.unwrap_or(1)))),
            _ => None,
        };
        match (*gpus, dp, model_parallel) {
            (Some(g), None, Some(mp)) if mp > 0 && u64::from(g) % mp == 0 => {
                dp = u32::try_from(u64::from(g) / mp).ok();
                notes.push(format!(
                    "dp = {} derived: GPUs / (tp x pp x cp)",
                    dp.unwrap_or(0)
                ));
            }
            (None, Some(d), Some(mp)) => {
                *gpus = mp
                    .checked_mul(u64::from(d))
                    .and_then(|g| u32::try_from(g).ok());
                if let Some(g) = *gpus {
                    notes.push(format!("cluster.gpus = {g} derived: tp x pp x dp x cp"));
                }
            }
            _ => {}
        }
        Mesh { tp, pp, dp, cp }
    }
}

/// Rounds `x` to 6 significant digits, so the file does not print a float's noise.
fn sig6(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap_or(x)
}

/// What the run measured: the steady-state time, the tokens per second that follow from it,
/// and the framework's own TFLOP/s over the same lines, so that both describe one stretch of
/// the job.
fn observed(job: &Job, selection: &Selection, shape: &StepShape) -> ObservedOut {
    let iteration_time_s = selection.steady.as_ref().map(|s| sig6(s.median_s));
    let tokens_per_s = match (iteration_time_s, shape.global_batch, shape.seq_len) {
        (Some(t), Some(b), Some(s)) => Some((f64::from(b) * f64::from(s) / t).round() as u64),
        _ => None,
    };
    let kept_tflops: Vec<f64> = match &selection.steady {
        Some(s) => selection
            .steps
            .iter()
            .filter(|st| st.number >= s.kept_range.0)
            .filter_map(|st| st.tflops)
            .collect(),
        None => Vec::new(),
    };
    let tflops_per_gpu = (!kept_tflops.is_empty()).then(|| sig6(median(kept_tflops)));
    ObservedOut {
        iteration_time_s,
        tokens_per_s,
        tflops_per_gpu,
        tflops_kind: tflops_per_gpu.and(job.tflops_kind).map(str::to_string),
    }
}

/// The run's `source`: the family first, since `tuner validate` reads it there to price the
/// framework.
fn source(job: &Job, file: &str) -> String {
    format!(
        "{} log {file}{}, read by tuner jobs-from-logs",
        job.family.name(),
        job.date
            .as_deref()
            .map(|d| format!(" (dated {d})"))
            .unwrap_or_default()
    )
}

/// The model as the log states it. Format 1 needs a name, so a log that names none is named
/// by its file stem, with a note saying so.
fn model_out(m: &ModelFacts, stem: &str, notes: &mut Vec<String>) -> ModelOut {
    ModelOut {
        name: Some(value(&m.name).unwrap_or_else(|| {
            notes.push("model.name is the file stem: the log names no model".into());
            stem.to_string()
        })),
        layers: value(&m.layers),
        hidden: value(&m.hidden),
        heads: value(&m.heads),
        kv_heads: value(&m.kv_heads),
        head_dim: value(&m.head_dim),
        ffn_hidden: value(&m.ffn_hidden),
        ffn_act: value(&m.ffn_act),
        vocab: value(&m.vocab),
        seq_len: value(&m.seq_len),
        tied_embeddings: value(&m.tied_embeddings),
        qk_norm: value(&m.qk_norm).unwrap_or(false),
        moe: value(&m.moe).flatten(),
    }
}

/// The layout as the log states it, with the mesh completed and the batch a flag may give.
fn layout_out(l: &LayoutFacts, mesh: &Mesh, global_batch: Option<u32>) -> LayoutOut {
    let v = value(&l.virtual_stages);
    LayoutOut {
        tp: mesh.tp,
        pp: mesh.pp,
        dp: mesh.dp,
        ep: value(&l.ep),
        cp: mesh.cp,
        virtual_stages: v,
        microbatch_size: value(&l.microbatch_size),
        global_batch_size: global_batch,
        zero_stage: value(&l.zero_stage),
        recompute: value(&l.recompute),
        sequence_parallel: value(&l.sequence_parallel),
        schedule: schedule(mesh.pp, v),
        precision: value(&l.precision),
        attention: value(&l.attention),
        overlap_grad_reduce: value(&l.overlap_grad_reduce),
        torch_compile: value(&l.torch_compile),
    }
}

/// The schedule format 1 names: interleaved with virtual stages, plain 1F1B with a pipeline;
/// none without a pipeline, which has no schedule to price.
fn schedule(pp: Option<u32>, virtual_stages: Option<u32>) -> Option<String> {
    match (pp, virtual_stages) {
        (Some(p), Some(v)) if p > 1 && v > 1 => Some("interleaved".to_string()),
        (Some(p), _) if p > 1 => Some("1f1b".to_string()),
        _ => None,
    }
}

/// `run` with its notes: how each figure was read and what the log left out go into the run;
/// the lines skipped and the fields still null go to stderr only, as things for the user to
/// act on rather than facts of the run.
fn finish(mut run: RunOut, job: &Job, stem: &str, mut notes: Vec<String>) -> JobRun {
    let missing = missing_fields(&run);
    let unstated = unstated(&run, job);
    if !unstated.is_empty() {
        notes.push(format!("not stated in the log: {}", unstated.join(", ")));
    }
    run.notes = notes.join(". ") + ".";
    notes.extend(job.skipped.iter().map(|s| format!("skipped {s}")));
    if !missing.is_empty() {
        notes.push(format!(
            "{stem}: null where format 1 needs a value ({}): fill them in before `tuner validate --runs` reads it",
            missing.join(", ")
        ));
    }
    JobRun {
        run,
        notes,
        missing,
    }
}
