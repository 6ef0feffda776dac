//! Timing kernels: the [`Backend`] trait that the real GPU backend and the sim share, and
//! with the `cuda` feature the real one, [`GpuBackend`] (CUDA, cuBLAS, NCCL through cudarc).
//! The agent builds without that feature: it never loads the GPU libraries (issue 10).

#[cfg(feature = "cuda")]
mod collective;
#[cfg(feature = "cuda")]
mod copy;
#[cfg(feature = "cuda")]
mod cublaslt;
#[cfg(feature = "cuda")]
mod fill;
#[cfg(feature = "cuda")]
mod gemm;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "cuda")]
mod loader;
#[cfg(feature = "cuda")]
mod nccl;
#[cfg(feature = "cuda")]
mod nonblocking;
#[cfg(feature = "cuda")]
mod ordinals;
#[cfg(feature = "cuda")]
mod settle;
#[cfg(feature = "cuda")]
pub mod survey;
#[cfg(feature = "cuda")]
mod timer;

use crate::discovery::{Activity, Topology};
use crate::error::{Error, Result};
use crate::plan::{gemm_layouts, Plan, Point};
use record::{Clock, Dtype, GemmLayout, Group, Record, Scope, Timing};

/// The communicators and loops a job's rank on real GPUs (the fabric's `JobRank`) joins and
/// runs its steps on.
#[cfg(feature = "cuda")]
pub(crate) use collective::{measure_loops, Communicators};
#[cfg(feature = "cuda")]
pub use cublaslt::cublaslt_version;
#[cfg(feature = "cuda")]
pub use gpu::GpuBackend;
#[cfg(feature = "cuda")]
pub use loader::{check_libraries, Library};
#[cfg(feature = "cuda")]
pub use nccl::{nccl_unique_id, nccl_version};
#[cfg(feature = "cuda")]
pub use ordinals::rank_gpu;

/// How microbench begins a stderr line that is for a debug log, not a warning: what the
/// record has no field for, such as how long a GEMM waited for its SM clock to settle. The
/// agent logs its child's such lines at debug level.
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
    /// does (one timer around a back-to-back loop, the mean per iteration), [`LOOPS`] times:
    /// the median loop mean (see [`loop_timing`]).
    fn measure(&self, point: &Point, iters: u32, warmup: u32) -> Result<Vec<Record>>;

    /// Runs a plan point by point. GPUs the plan names must exist; a point that fails
    /// because of the point itself (say, fp8 on a GPU without it) is recorded as a failure
    /// and the run goes on, while a missing driver or library ends it.
    fn run(&self, plan: &Plan, progress: &mut dyn FnMut(Progress)) -> Result<Outcome> {
        check_iters(plan.iters, plan.warmup)?;
        let topology = self.topology()?;
        for point in &plan.points {
            check_point(point, &topology)?;
        }
        let mut outcome = Outcome::default();
        for (done, point) in plan.points.iter().enumerate() {
            let (records_before, failures_before) = (outcome.records.len(), outcome.failures.len());
            match self.measure(point, plan.iters, plan.warmup) {
                Ok(records) => outcome.records.extend(records),
                Err(
                    e @ (Error::NoDriver(_)
                    | Error::CudaInit(_)
                    | Error::MissingLibrary { .. }
                    | Error::MissingSymbols { .. }),
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

/// The group of `point` measured inside `topology`'s node: its GPUs, and as ranks every GPU
/// of a collective, the one of a GEMM or a copy's senders. Both backends write it so, the sim
/// only widening its collectives across nodes.
pub(crate) fn node_group(topology: &Topology, point: &Point) -> Group {
    let ranks = match point {
        Point::Collective { gpus, .. } => gpus.len() as u32,
        Point::Gemm { .. } => 1,
        Point::Copy { path, .. } => path.senders(),
    };
    Group {
        node: Some(topology.node.clone()),
        gpus: point.gpus(),
        scope: Scope::IntraNode,
        ranks,
    }
}

/// The record of one timing of `point` by `source` over `group`, as both backends write it:
/// a collective's out-of-place one (the caller marks the in-place one), a GEMM's with its
/// layout. The caller adds what only it knows, such as the clocks the GPUs ran at.
pub(crate) fn point_record(
    source: record::Backend,
    group: Group,
    point: &Point,
    timing: Timing,
) -> Record {
    match point {
        Point::Collective {
            kind, bytes, dtype, ..
        } => Record::transfer(*kind, source, group, *bytes, *dtype, timing),
        Point::Gemm {
            shape,
            dtype,
            layout,
            ..
        } => {
            let mut r = Record::gemm(source, group, *shape, *dtype, timing);
            r.detail.layout = Some(*layout);
            r
        }
        Point::Copy { path, bytes } => {
            Record::transfer(path.kind(), source, group, *bytes, Dtype::Uint8, timing)
        }
    }
}

/// A collective's out-of-place and in-place records from their timings, as a real backend
/// writes them. On one rank an in-place collective has nothing to move and NCCL enqueues no
/// kernel, so its loop times two adjacent events: it gets no record (the out-of-place one is
/// a copy through NCCL, with busbw 0 as nccl-tests prints). A record that would still hold a
/// time of 0 or a rate that is not finite fails the point instead of being written.
#[cfg(feature = "cuda")]
pub(crate) fn collective_records(
    source: record::Backend,
    topology: &Topology,
    point: &Point,
    [out_of_place, in_place]: [Timing; 2],
) -> Result<Vec<Record>> {
    let group = node_group(topology, point);
    let mut records = vec![point_record(source, group.clone(), point, out_of_place)];
    if group.ranks > 1 {
        let mut r = point_record(source, group, point, in_place);
        r.in_place = true;
        records.push(r);
    }
    for r in &records {
        r.validate().map_err(|source| Error::Unrecordable {
            point: format!("{point}{}", if r.in_place { " in place" } else { "" }),
            source,
        })?;
    }
    Ok(records)
}

/// The point names at least one GPU, its GPUs exist on `topology`'s node and are distinct, and
/// its buffers fit in each GPU's memory (a sim asked for 2^64 - 1 bytes once accepted it).
pub(crate) fn check_point(point: &Point, topology: &Topology) -> Result<()> {
    let count = topology.gpus.len();
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
    let need = point.device_bytes();
    if let Some(g) = gpus
        .iter()
        .filter_map(|&g| topology.gpus.get(g as usize))
        .find(|g| g.memory_bytes < need)
    {
        return Err(Error::BadValue {
            field: "size",
            value: format!("{point} ({need} bytes of buffers per GPU)"),
            expected: format!(
                "buffers that fit GPU {}'s {} bytes of memory",
                g.index, g.memory_bytes
            ),
        });
    }
    Ok(())
}

/// Most timed (and untimed) iterations a point takes: nccl-tests runs 20; a million is hours
/// of the smallest kernels and bounds a mistyped `-n 4294967295`.
pub const MAX_ITERS: u32 = 1_000_000;

/// At least one timed iteration, so a median exists, and neither count past [`MAX_ITERS`].
pub(crate) fn check_iters(iters: u32, warmup: u32) -> Result<()> {
    let bad = |field: &'static str, value: u32| Error::BadValue {
        field,
        value: value.to_string(),
        expected: format!("1 to {MAX_ITERS}"),
    };
    if iters == 0 || iters > MAX_ITERS {
        return Err(bad("iters (-n)", iters));
    }
    if warmup > MAX_ITERS {
        return Err(Error::BadValue {
            field: "warmup iters (-w)",
            value: warmup.to_string(),
            expected: format!("0 to {MAX_ITERS}"),
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

/// Timed loops per collective point. nccl-tests times one loop of `-n` back-to-back
/// iterations and prints its mean; one loop gives no spread and a single slow loop (a clock
/// step, another process's burst) moves the figure. So each point runs this many such loops
/// and records the median loop mean, with the fastest and slowest loop means as its spread:
/// each figure is still an nccl-tests mean, and five loops give a median that one outlier
/// cannot move (issue 10).
pub const LOOPS: u32 = 5;

/// A collective's timing from the elapsed times of [`LOOPS`] loops of `iters` back-to-back
/// iterations each (see [`LOOPS`]): `time_s` is the median of the loop means (elapsed /
/// iters, as nccl-tests prints), `time_min_s` and `time_max_s` the fastest and slowest loop
/// means, and `iters` the iterations of one loop (nccl-tests' `-n`).
pub(crate) fn loop_timing(loop_elapsed_s: &[f64], iters: u32, clock: Clock) -> Timing {
    let mut means: Vec<f64> = loop_elapsed_s
        .iter()
        .map(|elapsed| elapsed / f64::from(iters.max(1)))
        .collect();
    Timing {
        iters: Some(iters),
        ..summarize(&mut means, clock)
    }
}

/// Refuses a GEMM layout that `dtype` has no kernel for (see
/// [`crate::plan::gemm_layouts`]): one point fails, with the reason, and the run goes on.
pub(crate) fn check_gemm_layout(dtype: Dtype, layout: GemmLayout, gpu: u32) -> Result<()> {
    let allowed = gemm_layouts(dtype);
    if allowed.contains(&layout) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|l| l.as_str()).collect();
    Err(Error::Unsupported {
        what: format!("{dtype} GEMM in layout {layout}"),
        gpu,
        reason: format!(
            "cuBLASLt's {dtype} kernels on Ada and Hopper take only layout {}",
            names.join(", ")
        ),
    })
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

    #[cfg(feature = "cuda")]
    fn node() -> Topology {
        crate::sim::SimBackend::new(crate::sim::profile("dgx-h100").unwrap(), vec![], 1)
            .unwrap()
            .topology()
            .unwrap()
    }

    #[cfg(feature = "cuda")]
    fn all_reduce(gpus: Vec<u32>) -> Point {
        Point::Collective {
            kind: record::Kind::AllReduce,
            gpus,
            bytes: 1 << 20,
            dtype: Dtype::Bf16,
        }
    }

    /// One rank: the in-place all-reduce, which NCCL skips, timed 0 s; only the out-of-place
    /// record is written, and it is finite (busbw 0).
    #[cfg(feature = "cuda")]
    #[test]
    fn a_one_rank_collective_writes_no_in_place_record_and_nothing_non_finite() {
        let node = node();
        let t = |s| Timing::without_spread(s, Some(20), Clock::CudaEvent);
        let records = collective_records(
            record::Backend::Nccl,
            &node,
            &all_reduce(vec![0]),
            [t(10e-6), t(0.0)],
        )
        .unwrap();
        assert_eq!(records.len(), 1);
        assert!(!records[0].in_place);
        assert_eq!(records[0].busbw, Some(0.0));
        assert!(records[0].algbw.is_some_and(f64::is_finite));
        // Two ranks whose in-place loop still reads 0 s: the point fails, naming it.
        let err = collective_records(
            record::Backend::Nccl,
            &node,
            &all_reduce(vec![0, 1]),
            [t(10e-6), t(0.0)],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("in place: not recorded, time_s 0"), "{err}");
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

    /// Five loops of 20 iterations taking 1.0, 1.2, 0.9, 5.0 and 1.1 ms: loop means of 50,
    /// 60, 45, 250 and 55 us; the median is 55 us and the one slow loop only sets the max.
    #[test]
    fn loops_give_the_median_loop_mean_and_its_spread() {
        let t = loop_timing(
            &[1.0e-3, 1.2e-3, 0.9e-3, 5.0e-3, 1.1e-3],
            20,
            Clock::CudaEvent,
        );
        let us = |s: f64| (s * 1e6 * 1e6).round() / 1e6;
        assert_eq!(
            (
                us(t.time_s),
                t.time_min_s.map(us),
                t.time_max_s.map(us),
                t.iters
            ),
            (55.0, Some(45.0), Some(250.0), Some(20))
        );
        assert_eq!(t.clock, Clock::CudaEvent);
        // One loop is exactly what nccl-tests prints: elapsed / iterations.
        let one = loop_timing(&[1e-3], 20, Clock::Model);
        assert_eq!((one.time_s, one.time_min_s), (50e-6, Some(50e-6)));
    }

    #[test]
    fn fp8_gemms_are_refused_outside_tn_and_bf16_takes_all_three() {
        for layout in [GemmLayout::Tn, GemmLayout::Nn, GemmLayout::Nt] {
            assert!(check_gemm_layout(Dtype::Bf16, layout, 0).is_ok());
        }
        assert!(check_gemm_layout(Dtype::Fp8E4m3, GemmLayout::Tn, 0).is_ok());
        assert_eq!(
            check_gemm_layout(Dtype::Fp8E4m3, GemmLayout::Nn, 3)
                .unwrap_err()
                .to_string(),
            "fp8_e4m3 GEMM in layout nn is not supported on GPU 3 (cuBLASLt's fp8_e4m3 \
             kernels on Ada and Hopper take only layout tn)"
        );
    }
}
