//! Timing kernels: the [`Backend`] trait that the real GPU backend and the sim share, and
//! with the `cuda` feature the real one, [`GpuBackend`] (CUDA, cuBLAS, NCCL through cudarc).
//! The agent builds without that feature: it never loads the GPU libraries (issue 10).

#[cfg(feature = "cuda")]
mod collective;
#[cfg(feature = "cuda")]
mod copy;
#[cfg(feature = "cuda")]
mod fill;
#[cfg(feature = "cuda")]
mod gemm;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "cuda")]
mod loader;
#[cfg(feature = "cuda")]
mod settle;
#[cfg(feature = "cuda")]
mod timer;

use crate::discovery::{Activity, Topology};
use crate::error::{Error, Result};
use crate::plan::{Plan, Point};
use record::{Clock, Record, Timing};

#[cfg(feature = "cuda")]
pub use gpu::GpuBackend;
#[cfg(feature = "cuda")]
pub use loader::{check_libraries, Library};

/// How microbench begins a stderr line that is for a debug log, not a warning: what the
/// record has no field for, such as the SM clock a GEMM ran at. The agent logs its child's
/// such lines at debug level.
pub const DEBUG_LINE: &str = "microbench: debug: ";

/// Progress through a plan, reported after each point with what that point gave, so a caller
/// can stream records as they come (`microbench calibrate --json`, read by the agent).
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Points finished.
    pub done: usize,
    /// Points in the plan.
    pub total: usize,
    /// The records of the point just finished.
    pub records: &'a [Record],
    /// Why the point just finished could not be measured, when it could not.
    pub failure: Option<&'a Failure>,
}

/// A point that could not be measured while the rest of the plan went on.
#[derive(Debug)]
pub struct Failure {
    /// The point, as text.
    pub point: String,
    /// Why.
    pub error: Error,
}

/// The records of a run, and the points that failed.
#[derive(Debug, Default)]
pub struct Outcome {
    /// One or more records per measured point.
    pub records: Vec<Record>,
    /// Points that failed; the run went on without them.
    pub failures: Vec<Failure>,
}

/// Something that can describe a node and time points on it: the real GPUs or the sim.
pub trait Backend {
    /// What the node looks like.
    fn topology(&self) -> Result<Topology>;

    /// What runs on each GPU now; the agent measures only idle GPUs.
    fn activity(&self) -> Result<Vec<Activity>>;

    /// Times one point, `warmup` untimed then `iters` timed iterations. A collective gives
    /// an out-of-place and an in-place record, like nccl-tests, each timed as nccl-tests
    /// does: one timer around the back-to-back loop, the average per iteration.
    fn measure(&self, point: &Point, iters: u32, warmup: u32) -> Result<Vec<Record>>;

    /// Runs a plan point by point. GPUs the plan names must exist; a point that fails
    /// because of the point itself (say, fp8 on a GPU without it) is recorded as a failure
    /// and the run goes on, while a missing driver or library ends it.
    fn run(&self, plan: &Plan, progress: &mut dyn FnMut(Progress)) -> Result<Outcome> {
        check_iters(plan.iters)?;
        let count = self.topology()?.gpus.len();
        for point in &plan.points {
            check_point(point, count)?;
        }
        let mut outcome = Outcome::default();
        for (done, point) in plan.points.iter().enumerate() {
            let (records_before, failures_before) = (outcome.records.len(), outcome.failures.len());
            match self.measure(point, plan.iters, plan.warmup) {
                Ok(records) => outcome.records.extend(records),
                Err(
                    e @ (Error::NoDriver(_) | Error::CudaInit(_) | Error::MissingLibrary { .. }),
                ) => return Err(e),
                Err(error) => outcome.failures.push(Failure {
                    point: point.to_string(),
                    error,
                }),
            }
            progress(Progress {
                done: done + 1,
                total: plan.points.len(),
                records: &outcome.records[records_before..],
                failure: outcome.failures.get(failures_before),
            });
        }
        Ok(outcome)
    }
}

/// The point names at least one GPU, and its GPUs exist on a node of `count` and are distinct.
pub(crate) fn check_point(point: &Point, count: usize) -> Result<()> {
    let gpus = point.gpus();
    if gpus.is_empty() {
        return Err(Error::BadValue {
            field: "gpus",
            value: "[]".into(),
            expected: "at least one GPU".into(),
        });
    }
    if let Some(&gpu) = gpus.iter().find(|&&g| g as usize >= count) {
        return Err(Error::NoSuchGpu {
            field: "gpu",
            gpu,
            count,
        });
    }
    let mut distinct = gpus.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != gpus.len() {
        return Err(Error::BadValue {
            field: "gpus",
            value: format!("{gpus:?}"),
            expected: "distinct GPU indices".into(),
        });
    }
    Ok(())
}

/// At least one timed iteration, so a median exists.
pub(crate) fn check_iters(iters: u32) -> Result<()> {
    if iters == 0 {
        return Err(Error::BadValue {
            field: "iters (-n)",
            value: "0".into(),
            expected: "at least 1".into(),
        });
    }
    Ok(())
}

/// Median, fastest and slowest of per-iteration times (at least one; see [`check_iters`]).
pub(crate) fn summarize(samples: &mut [f64], clock: Clock) -> Timing {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    };
    Timing {
        time_s: median,
        time_min_s: samples.first().copied(),
        time_max_s: samples.last().copied(),
        iters: u32::try_from(n).ok(),
        clock,
    }
}

/// A collective's timing as nccl-tests reports it: one timer around `iters` back-to-back
/// iterations and the average per iteration, with no per-iteration spread to report.
pub(crate) fn loop_average(elapsed_s: f64, iters: u32, clock: Clock) -> Timing {
    Timing {
        time_s: elapsed_s / f64::from(iters.max(1)),
        time_min_s: None,
        time_max_s: None,
        iters: Some(iters),
        clock,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent shares a backend between its HTTP handlers and its scheduler.
    #[test]
    fn backends_can_be_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        #[cfg(feature = "cuda")]
        shared::<GpuBackend>();
        shared::<crate::SimBackend>();
    }

    #[test]
    fn summary_is_median_min_max() {
        let t = summarize(&mut [3.0, 1.0, 2.0, 10.0], Clock::Host);
        assert_eq!(
            (t.time_s, t.time_min_s, t.time_max_s, t.iters),
            (2.5, Some(1.0), Some(10.0), Some(4))
        );
        assert_eq!(summarize(&mut [5.0, 4.0, 6.0], Clock::Host).time_s, 5.0);
    }

    /// nccl-tests prints elapsed / iterations: 20 iterations in 1 ms are 50 us each.
    #[test]
    fn a_loop_gives_its_average_and_no_spread() {
        let t = loop_average(1e-3, 20, Clock::CudaEvent);
        assert_eq!(
            (t.time_s, t.time_min_s, t.time_max_s, t.iters),
            (50e-6, None, None, Some(20))
        );
    }
}
