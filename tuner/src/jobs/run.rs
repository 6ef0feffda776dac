//! The run being assembled from a job: the log's facts, the flags where it is silent, the
//! mesh identity, the steady-state time and the notes that say how each was read.

use super::error::JobError;
use super::job::{value, Job, Measure};
use super::notes::{missing_fields, range, unstated};
use super::overrides::{pick, Overrides};
use super::runs_file::{ClusterOut, LayoutOut, ModelOut, ObservedOut, RunOut};
use super::steady_state::{one_per_iteration, steady_state};
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

/// Rounds `x` to 6 significant digits, so the file does not print a float's noise.
fn sig6(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap_or(x)
}

/// The run for `job`, read from `file` (`stem` names it), with the flags filling what the log
/// lacks.
pub fn to_run(job: &Job, file: &str, stem: &str, o: &Overrides) -> Result<JobRun, JobError> {
    let mut notes: Vec<String> = Vec::new();
    let mut later: Vec<String> = Vec::new();
    let c = &job.cluster;
    let l = &job.layout;
    let m = &job.model;

    let gpu = match (&c.gpu, &o.gpu) {
        // A flag may name a variant of the part the log names (`h100-sxm-96gb-500w` for a log
        // that says H100): the part's first word must agree.
        (Some(s), Some(g)) if s.value.split('-').next() != g.split('-').next() => {
            return Err(JobError::Contradicts {
                file: file.to_string(),
                flag: "--gpu",
                value: g.clone(),
                line: s.line,
                stated: s.value.clone(),
                what: "cluster.gpu",
            })
        }
        (_, Some(g)) => Some(g.clone()),
        (Some(s), None) => Some(s.value.clone()),
        (None, None) => None,
    };
    let mut gpus = pick(file, "--gpus", "cluster.gpus", &c.gpus, o.gpus)?;
    let gpus_per_node = pick(
        file,
        "--gpus-per-node",
        "cluster.gpus_per_node",
        &c.gpus_per_node,
        o.gpus_per_node,
    )?;
    let nics_per_node = pick(
        file,
        "--nics-per-node",
        "cluster.nics_per_node",
        &c.nics_per_node,
        o.nics_per_node,
    )?;
    let nic_gbps = pick(
        file,
        "--nic-gbps",
        "cluster.nic_gbps",
        &c.nic_gbps,
        o.nic_gbps,
    )?;
    let global_batch = pick(
        file,
        "--global-batch",
        "layout.global_batch_size",
        &l.global_batch_size,
        o.global_batch,
    )?;

    let (tp, pp, cp) = (value(&l.tp), value(&l.pp), value(&l.cp));
    let mut dp = value(&l.dp);
    // tp x pp x dp x cp = GPUs, the identity format 1 holds every run to: either side from
    // the other where the log states one.
    let model_parallel = match (tp, pp) {
        (Some(t), Some(p)) => u64::from(t)
            .checked_mul(u64::from(p))
            .and_then(|x| x.checked_mul(u64::from(cp.unwrap_or(1)))),
        _ => None,
    };
    match (gpus, dp, model_parallel) {
        (Some(g), None, Some(mp)) if mp > 0 && u64::from(g) % mp == 0 => {
            dp = u32::try_from(u64::from(g) / mp).ok();
            notes.push(format!(
                "dp = {} derived: GPUs / (tp x pp x cp)",
                dp.unwrap_or(0)
            ));
        }
        (None, Some(d), Some(mp)) => {
            gpus = mp
                .checked_mul(u64::from(d))
                .and_then(|g| u32::try_from(g).ok());
            if let Some(g) = gpus {
                notes.push(format!("cluster.gpus = {g} derived: tp x pp x dp x cp"));
            }
        }
        _ => {}
    }

    // Steady state.
    let (mut steps, duplicates) = one_per_iteration(&job.steps);
    if let Some(last) = steps.last().and_then(|s| s.batch) {
        let before = steps.len();
        steps.retain(|s| s.batch.is_none_or(|b| b == last));
        if steps.len() < before {
            notes.push(format!(
                "the global batch ramps up: only the {} lines at the final {last} sequences are used, {} earlier ones dropped",
                steps.len(),
                before - steps.len()
            ));
        }
    }
    let seq_len = value(&m.seq_len);
    let to_seconds = |v: f64| -> Option<f64> {
        let t = match job.measure {
            Measure::Seconds => v,
            Measure::TokensPerGpuPerSecond => {
                f64::from(global_batch?) * f64::from(seq_len?) / (v * f64::from(gpus?))
            }
            Measure::SamplesPerSecond => f64::from(global_batch?) / v,
        };
        (t.is_finite() && t > 0.0).then_some(t)
    };
    let times: Vec<(u64, f64)> = steps
        .iter()
        .filter_map(|s| to_seconds(s.value).map(|t| (s.number, t)))
        .collect();
    if let Some(w) = o.warmup {
        if w >= steps.len() {
            return Err(JobError::Warmup {
                file: file.to_string(),
                warmup: w,
                lines: steps.len(),
            });
        }
    }
    let steady = steady_state(&times, o.warmup);
    let dedup = if duplicates > 0 {
        format!(
            "; {duplicates} repeated lines for an iteration already seen dropped (rank 0's kept where a launcher prefix names ranks, else the first printed)"
        )
    } else {
        String::new()
    };
    let interval = if job.averaged {
        "; each line averages the iterations since the line before"
    } else {
        ""
    };
    match &steady {
        Some(s) => {
            let warm = match (s.dropped, s.dropped_range) {
                (0, _) | (_, None) => "none dropped as warm-up (too few lines)".to_string(),
                (d, Some((a, b))) => format!(
                    "the first {d} line{} ({}) dropped as warm-up{}",
                    if d == 1 { "" } else { "s" },
                    range(a, b),
                    if o.warmup.is_some() {
                        ", as --warmup says"
                    } else {
                        ""
                    }
                ),
            };
            let how = match job.measure {
                Measure::Seconds => format!("{} as the log prints it", job.figure),
                Measure::TokensPerGpuPerSecond => format!(
                    "derived from {}: global batch {} x {} tokens / (tps x {} GPUs)",
                    job.figure,
                    global_batch.unwrap_or(0),
                    seq_len.unwrap_or(0),
                    gpus.unwrap_or(0)
                ),
                Measure::SamplesPerSecond => format!(
                    "derived from {}: train_batch_size {} / samples per second",
                    job.figure,
                    global_batch.unwrap_or(0)
                ),
            };
            notes.insert(
                0,
                format!(
                    "iteration_time_s: median of {} logged iteration{} ({}; {warm}){interval}; {how}{dedup}",
                    s.kept,
                    if s.kept == 1 { "" } else { "s" },
                    range(s.kept_range.0, s.kept_range.1),
                ),
            );
        }
        None => {
            let lacks: Vec<&str> = [
                (
                    global_batch.is_none(),
                    "the global batch (pass --global-batch)",
                ),
                (
                    seq_len.is_none() && job.measure == Measure::TokensPerGpuPerSecond,
                    "the sequence length",
                ),
                (
                    gpus.is_none() && job.measure == Measure::TokensPerGpuPerSecond,
                    "the GPU count (pass --gpus)",
                ),
            ]
            .into_iter()
            .filter(|(lack, _)| *lack)
            .map(|(_, what)| what)
            .collect();
            notes.insert(
                0,
                format!(
                    "iteration_time_s: null: {} is a rate, not a step time, and the log does not state {}{dedup}",
                    job.figure,
                    lacks.join(" or ")
                ),
            );
        }
    }
    let iteration_time_s = steady.as_ref().map(|s| sig6(s.median_s));
    let tokens_per_s = match (iteration_time_s, global_batch, seq_len) {
        (Some(t), Some(b), Some(s)) => Some((f64::from(b) * f64::from(s) / t).round() as u64),
        _ => None,
    };
    let kept_tflops: Vec<f64> = match &steady {
        Some(s) => steps
            .iter()
            .filter(|st| st.number >= s.kept_range.0)
            .filter_map(|st| st.tflops)
            .collect(),
        None => Vec::new(),
    };
    let tflops_per_gpu = (!kept_tflops.is_empty()).then(|| sig6(median(kept_tflops)));

    notes.extend(job.notes.iter().cloned());
    for s in &job.skipped {
        later.push(format!("skipped {s}"));
    }

    // The schedule format 1 names: interleaved with virtual stages, plain 1F1B with a pipeline.
    let v = value(&l.virtual_stages);
    let schedule = match (pp, v) {
        (Some(p), Some(v)) if p > 1 && v > 1 => Some("interleaved".to_string()),
        (Some(p), _) if p > 1 => Some("1f1b".to_string()),
        _ => None,
    };

    let run = RunOut {
        id: stem.to_string(),
        group: o.group.clone().unwrap_or_else(|| format!("jobs-{stem}")),
        source: format!(
            "{} log {file}{}, read by tuner jobs-from-logs",
            job.family.name(),
            job.date
                .as_deref()
                .map(|d| format!(" (dated {d})"))
                .unwrap_or_default()
        ),
        model: ModelOut {
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
            seq_len,
            tied_embeddings: value(&m.tied_embeddings),
            moe: value(&m.moe).flatten(),
        },
        cluster: ClusterOut {
            gpu,
            gpus,
            gpus_per_node,
            nics_per_node,
            nic_gbps,
        },
        layout: LayoutOut {
            tp,
            pp,
            dp,
            ep: value(&l.ep),
            cp,
            virtual_stages: v,
            microbatch_size: value(&l.microbatch_size),
            global_batch_size: global_batch,
            zero_stage: value(&l.zero_stage),
            recompute: value(&l.recompute),
            sequence_parallel: value(&l.sequence_parallel),
            schedule,
            precision: value(&l.precision),
            attention: value(&l.attention),
            overlap_grad_reduce: value(&l.overlap_grad_reduce),
            torch_compile: value(&l.torch_compile),
        },
        observed: ObservedOut {
            iteration_time_s,
            tokens_per_s,
            tflops_per_gpu,
            tflops_kind: tflops_per_gpu.and(job.tflops_kind).map(str::to_string),
        },
        notes: String::new(),
    };
    let missing = missing_fields(&run);
    let unstated = unstated(&run, job);
    if !unstated.is_empty() {
        notes.push(format!("not stated in the log: {}", unstated.join(", ")));
    }
    let mut run = run;
    run.notes = notes.join(". ") + ".";
    notes.extend(later);
    if !missing.is_empty() {
        notes.push(format!(
            "{stem}: null where format 1 needs a value ({}): fill them in before `tuner validate --runs` reads it",
            missing.join(", ")
        ));
    }
    Ok(JobRun {
        run,
        notes,
        missing,
    })
}
