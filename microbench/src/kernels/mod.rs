//! Timing kernels: the [`Backend`] trait that the real GPU backend and the sim share, and the
//! [`Point`]s a plan is made of.

mod collective;
mod copy;
mod gemm;
mod gpu;
mod loader;
mod timer;

use crate::discovery::{Activity, Topology};
use crate::error::{Error, Result};
use crate::sweep::Plan;
use record::{Clock, Dtype, Gemm, Kind, Record, Timing};
use std::fmt;

pub use gpu::GpuBackend;
pub use loader::{check_libraries, Library};

/// One timed point of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Point {
    /// An NCCL collective over `gpus` (one rank each) with a per-rank buffer of `bytes`.
    Collective {
        /// all_reduce, all_gather, reduce_scatter, all_to_all or send_recv.
        kind: Kind,
        /// Device indices, in rank order.
        gpus: Vec<u32>,
        /// Per-rank buffer, nccl-tests convention.
        bytes: u64,
        /// Element type.
        dtype: Dtype,
    },
    /// A GEMM on one GPU.
    Gemm {
        /// Device index.
        gpu: u32,
        /// Shape.
        shape: Gemm,
        /// Operand type (accumulation in fp32).
        dtype: Dtype,
    },
    /// A copy of `bytes`.
    Copy {
        /// Between what.
        path: CopyPath,
        /// Buffer size.
        bytes: u64,
    },
}

/// What a copy moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyPath {
    /// GPU to GPU; with `bidirectional`, both copy to each other at once.
    P2p {
        /// Source GPU.
        src: u32,
        /// Destination GPU.
        dst: u32,
        /// Both directions at once.
        bidirectional: bool,
    },
    /// Pinned host memory to a GPU.
    H2d {
        /// Device index.
        gpu: u32,
    },
    /// A GPU to pinned host memory.
    D2h {
        /// Device index.
        gpu: u32,
    },
    /// Within one GPU's memory.
    Hbm {
        /// Device index.
        gpu: u32,
    },
}

impl CopyPath {
    /// The record kind of this copy.
    pub fn kind(self) -> Kind {
        match self {
            CopyPath::P2p { .. } => Kind::P2pCopy,
            CopyPath::H2d { .. } => Kind::H2d,
            CopyPath::D2h { .. } => Kind::D2h,
            CopyPath::Hbm { .. } => Kind::HbmCopy,
        }
    }

    /// GPUs taking part, source first.
    pub fn gpus(self) -> Vec<u32> {
        match self {
            CopyPath::P2p { src, dst, .. } => vec![src, dst],
            CopyPath::H2d { gpu } | CopyPath::D2h { gpu } | CopyPath::Hbm { gpu } => vec![gpu],
        }
    }

    /// The record's `ranks`: GPUs that send (see [`record::busbw_factor`]).
    pub fn senders(self) -> u32 {
        match self {
            CopyPath::P2p {
                bidirectional: true,
                ..
            } => 2,
            _ => 1,
        }
    }
}

impl Point {
    /// GPUs taking part.
    pub fn gpus(&self) -> Vec<u32> {
        match self {
            Point::Collective { gpus, .. } => gpus.clone(),
            Point::Gemm { gpu, .. } => vec![*gpu],
            Point::Copy { path, .. } => path.gpus(),
        }
    }

    /// The record kind.
    pub fn kind(&self) -> Kind {
        match self {
            Point::Collective { kind, .. } => *kind,
            Point::Gemm { .. } => Kind::Gemm,
            Point::Copy { path, .. } => path.kind(),
        }
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gpus = |g: &[u32]| g.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        match self {
            Point::Collective {
                kind,
                gpus: g,
                bytes,
                dtype,
            } => write!(f, "{kind} {dtype} {bytes} B on GPUs {}", gpus(g)),
            Point::Gemm { gpu, shape, dtype } => write!(
                f,
                "gemm {dtype} {}x{}x{} on GPU {gpu}",
                shape.m, shape.n, shape.k
            ),
            Point::Copy { path, bytes } => match path {
                CopyPath::P2p {
                    src,
                    dst,
                    bidirectional,
                } => {
                    write!(
                        f,
                        "p2p_copy {bytes} B GPU {src} {} GPU {dst}",
                        if *bidirectional { "<->" } else { "->" }
                    )
                }
                other => write!(
                    f,
                    "{} {bytes} B on GPU {}",
                    other.kind(),
                    gpus(&other.gpus())
                ),
            },
        }
    }
}

/// Progress through a plan, reported after each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Points finished.
    pub done: usize,
    /// Points in the plan.
    pub total: usize,
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
    /// an out-of-place and an in-place record, like nccl-tests.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent shares a backend between its HTTP handlers and its scheduler.
    #[test]
    fn backends_can_be_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
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
}
