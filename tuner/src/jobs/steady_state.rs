//! Which iteration lines a run's time is the median of: one line per iteration, at the final
//! batch, the warm-up dropped, each figure in seconds, so that one rule holds for every family.

use std::collections::BTreeMap;

use super::error::JobError;
use super::job::{Job, Measure, Step};
use crate::validate::median;

/// The warm-up rule: of `n` logged iterations, drop the first 10% (rounded up) and at least
/// the first 2, but keep at least one. The first iterations of a job compile kernels, tune
/// NCCL channels, fill allocator caches and (under fp16) skip steps on overflow; two lines
/// cover that in every log read so far, and a tenth covers a longer ramp in a long log
/// without throwing away a short one. 1 line: none dropped; 2: the first; 3: the first 2.
pub fn warmup_lines(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        n.div_ceil(10).max(2).min(n - 1)
    }
}

/// The steady state of a job: the median seconds per iteration over the lines kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    /// Median seconds per iteration.
    pub median_s: f64,
    /// Lines kept.
    pub kept: usize,
    /// Lines dropped as warm-up.
    pub dropped: usize,
    /// Iteration numbers of the first and last line kept.
    pub kept_range: (u64, u64),
    /// Iteration numbers of the first and last line dropped, if any.
    pub dropped_range: Option<(u64, u64)>,
}

/// Drops the warm-up from `times` (iteration number, seconds; sorted by iteration) and takes
/// the median of the rest: the median, not the mean, because checkpoint saves, evaluations and
/// stragglers put a few long iterations into every log. `warmup` replaces
/// [`warmup_lines`]'s count; `None` when nothing would be left.
pub fn steady_state(times: &[(u64, f64)], warmup: Option<usize>) -> Option<SteadyState> {
    let dropped = warmup.unwrap_or_else(|| warmup_lines(times.len()));
    let kept = times.get(dropped..).filter(|k| !k.is_empty())?;
    Some(SteadyState {
        median_s: median(kept.iter().map(|t| t.1).collect()),
        kept: kept.len(),
        dropped,
        kept_range: (kept[0].0, kept[kept.len() - 1].0),
        dropped_range: (dropped > 0).then(|| (times[0].0, times[dropped - 1].0)),
    })
}

/// One line per iteration number: rank 0's where a launcher prefix names ranks, else the
/// first printed. Ranks print the same iteration (torchtitan without `--local-ranks-filter`,
/// every NeMo rank's progress bar); a restarted job prints it again.
pub(crate) fn one_per_iteration(steps: &[Step]) -> (Vec<Step>, usize) {
    let mut by: BTreeMap<u64, Step> = BTreeMap::new();
    let mut duplicates = 0;
    for s in steps {
        match by.get_mut(&s.number) {
            None => {
                by.insert(s.number, s.clone());
            }
            Some(kept) => {
                duplicates += 1;
                if kept.rank != Some(0) && s.rank == Some(0) {
                    *kept = s.clone();
                }
            }
        }
    }
    (by.into_values().collect(), duplicates)
}

/// What a step holds and where it runs: what turns a rate (tokens or samples per second) into a
/// step time. A log that prints a rate but not these has no step time.
pub(crate) struct StepShape {
    /// Sequences per step.
    pub global_batch: Option<u32>,
    /// Tokens per sequence.
    pub seq_len: Option<u32>,
    /// GPUs of the job.
    pub gpus: Option<u32>,
}

impl StepShape {
    /// Seconds per step for a figure `v` measured as `measure`; `None` where the shape lacks
    /// what the conversion needs or the result is no duration.
    pub(crate) fn seconds(&self, measure: Measure, v: f64) -> Option<f64> {
        let t = match measure {
            Measure::Seconds => v,
            Measure::TokensPerGpuPerSecond => {
                f64::from(self.global_batch?) * f64::from(self.seq_len?)
                    / (v * f64::from(self.gpus?))
            }
            Measure::SamplesPerSecond => f64::from(self.global_batch?) / v,
        };
        (t.is_finite() && t > 0.0).then_some(t)
    }
}

/// The iteration lines a run is read from, and the steady state over them.
pub(crate) struct Selection {
    /// One line per iteration, at the final global batch.
    pub steps: Vec<Step>,
    /// Lines dropped for repeating an iteration already seen.
    pub duplicates: usize,
    /// `None` where no line converts to seconds, or none is left after the warm-up.
    pub steady: Option<SteadyState>,
}

/// The steady state of `job`'s lines, from `file`, with `warmup` lines dropped where the flag
/// gives a count. A count that drops every line is refused rather than written as a run
/// without a time: the flag asked for a time the log cannot give.
pub(crate) fn select(
    job: &Job,
    file: &str,
    warmup: Option<usize>,
    shape: &StepShape,
    notes: &mut Vec<String>,
) -> Result<Selection, JobError> {
    let (mut steps, duplicates) = one_per_iteration(&job.steps);
    final_batch_only(&mut steps, notes);
    let times: Vec<(u64, f64)> = steps
        .iter()
        .filter_map(|s| shape.seconds(job.measure, s.value).map(|t| (s.number, t)))
        .collect();
    if let Some(w) = warmup {
        if w >= steps.len() {
            return Err(JobError::Warmup {
                file: file.to_string(),
                warmup: w,
                lines: steps.len(),
            });
        }
    }
    let steady = steady_state(&times, warmup);
    Ok(Selection {
        steps,
        duplicates,
        steady,
    })
}

/// Keeps the lines at the last global batch the lines state: under a batch ramp-up (Megatron's
/// `rampup_batch_size`) the earlier, smaller steps are faster and would pull the median down.
fn final_batch_only(steps: &mut Vec<Step>, notes: &mut Vec<String>) {
    let Some(last) = steps.last().and_then(|s| s.batch) else {
        return;
    };
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
