//! Which iteration lines a run's time is the median of: one line per iteration, the warm-up
//! dropped.

use std::collections::BTreeMap;

use super::job::Step;
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
