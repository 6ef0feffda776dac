//! The real backend: NVML for discovery, CUDA, cuBLAS and NCCL (through cudarc, loaded at run
//! time) for timing.

use super::collective::Communicators;
use super::loader::{check_libraries, Library};
use super::ordinals::{cuda_buses, same_gpu};
use super::timer::cuda;
use super::{
    check_iters, check_point, collective, collective_records, copy, gemm, node_group, point_record,
    Backend, DEBUG_LINE,
};
use crate::discovery::{self, Activity, SmClock, Topology};
use crate::error::{Error, Result};
use crate::plan::{CopyPath, Point};
use cudarc::driver::CudaContext;
use record::{Backend as Source, Dtype, Gemm, GemmLayout, Record};
use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// The GPUs of this node.
pub struct GpuBackend {
    topology: Topology,
    /// CUDA context per GPU, by NVML index (CUDA may number devices differently).
    contexts: Vec<Option<Arc<CudaContext>>>,
    /// NCCL communicators per GPU group, made on first use.
    communicators: Mutex<Vec<Communicators>>,
    /// NVML kept loaded for the SM clock GEMMs wait on and every record carries; `None` where
    /// it would not load.
    live: Option<discovery::LiveReader>,
}

impl GpuBackend {
    /// Loads the driver and discovers the node. Fails with one clear error when there is no
    /// driver or no GPU.
    pub fn new() -> Result<GpuBackend> {
        GpuBackend::with_contexts(None)
    }

    /// As [`GpuBackend::new`], with a CUDA context on GPU `gpu` only: one rank of a job
    /// (issue 12), whose context must not show on the GPUs of the other ranks of its node,
    /// where they would read as someone else's work (the idle rule).
    pub fn for_gpu(gpu: u32) -> Result<GpuBackend> {
        GpuBackend::with_contexts(Some(gpu))
    }

    fn with_contexts(only: Option<u32>) -> Result<GpuBackend> {
        check_libraries(&[Library::Cuda])?;
        // The driver first: a driver without a usable GPU (none visible, a container without
        // the device files) says so as itself, before NVML's view of the node.
        cudarc::driver::result::init().map_err(init_error)?;
        let topology = discovery::discover()?;
        if topology.gpus.is_empty() {
            return Err(Error::TooFewGpus {
                what: "microbench".into(),
                needed: 1,
                found: 0,
            });
        }
        if let Some(gpu) = only.filter(|&g| g as usize >= topology.gpus.len()) {
            return Err(Error::NoSuchGpu {
                field: "gpu",
                gpu,
                count: topology.gpus.len(),
            });
        }
        let contexts = cuda_contexts(&topology, only)?;
        Ok(GpuBackend {
            topology,
            contexts,
            communicators: Mutex::new(Vec::new()),
            live: discovery::LiveReader::new().ok(),
        })
    }

    /// Runs `f` on the communicators of `gpus`, creating them on first use; a group `f`
    /// aborted is dropped, so the next point builds a new one.
    fn with_communicators<T>(
        &self,
        gpus: &[u32],
        f: impl FnOnce(&mut Communicators) -> Result<T>,
    ) -> Result<T> {
        // A panic while the lock was held cannot leave a communicator half made: entries are
        // pushed whole. So a poisoned lock is still a usable cache.
        let mut cache = self
            .communicators
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = match cache.iter().position(|c| c.gpus() == gpus) {
            Some(at) => at,
            None => {
                let contexts = gpus
                    .iter()
                    .map(|&g| self.context(g))
                    .collect::<Result<Vec<_>>>()?;
                cache.push(Communicators::new(gpus, contexts)?);
                cache.len() - 1
            }
        };
        let result = f(&mut cache[at]);
        if cache[at].aborted() {
            cache.remove(at);
        }
        result
    }

    /// GPU `gpu`'s SM clock and throttle reasons now; unknown where NVML did not load.
    fn sm_clock(&self, gpu: u32) -> SmClock {
        self.live
            .as_ref()
            .map_or_else(SmClock::default, |l| l.sm_clock(gpu))
    }

    /// GPU `gpu`'s CUDA context (by NVML index).
    pub(crate) fn context(&self, gpu: u32) -> Result<Arc<CudaContext>> {
        self.contexts
            .get(gpu as usize)
            .cloned()
            .flatten()
            .ok_or(Error::Cuda {
                call: "cuDeviceGet",
                gpu,
                message: "not visible to CUDA (check CUDA_VISIBLE_DEVICES)".into(),
            })
    }
}

/// Where cudarc keeps the errors of a context's drop guards (each buffer's guard records an
/// event on its stream when released, and cannot return the error): until the next call on
/// the context that checks, which then fails with it under its own name.
trait KeptErrors {
    /// Takes the kept error, if any, as the driver's message (`CudaContext::check_err`).
    fn take_kept(&self) -> Option<String>;
}

impl KeptErrors for Arc<CudaContext> {
    fn take_kept(&self) -> Option<String> {
        self.check_err().err().map(|e| e.to_string())
    }
}

/// The call a kept error is reported under: the release of the point's buffers.
const RELEASING: &str = "cuEventRecord (releasing this point's buffers)";

/// Runs a point's `work` (its buffers released by the time it returns), then takes the
/// errors `contexts` (the point's GPUs') kept from it: they fail this point, which caused
/// them, under [`RELEASING`] and their GPU, rather than the next point's first call under
/// that call's name. The point's own error comes first; the kept ones are taken either way.
fn released<T, C: KeptErrors>(
    contexts: &[(u32, C)],
    work: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let measured = work();
    let kept = contexts
        .iter()
        .try_for_each(|(gpu, ctx)| match ctx.take_kept() {
            None => Ok(()),
            Some(message) => Err(Error::Cuda {
                call: RELEASING,
                gpu: *gpu,
                message,
            }),
        });
    let out = measured?;
    kept?;
    Ok(out)
}

/// `cuInit`'s failure as one line: the driver's code, and what it usually means.
fn init_error(e: cudarc::driver::DriverError) -> Error {
    use cudarc::driver::sys::cudaError_enum as Cu;
    let meaning = match e.0 {
        Cu::CUDA_ERROR_NO_DEVICE => {
            ": no CUDA-capable GPU is visible to this process (check CUDA_VISIBLE_DEVICES, and \
             that a container was given the GPUs)"
        }
        Cu::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH => {
            ": the kernel module and the user-space driver are of different releases"
        }
        _ => "",
    };
    Error::CudaInit(format!(
        "cuInit returned {:?} ({}){meaning}",
        e.0, e.0 as u32
    ))
}

/// Records the SM clock and throttle reasons a point's timed loop ended under (issue 10).
fn set_conditions(record: &mut Record, clock: SmClock) {
    record.detail.sm_clock_hz = clock.hz();
    record.detail.throttle_reasons = clock.reason_names();
}

/// Matches CUDA ordinals to NVML indices by PCI address (see [`super::ordinals`]), and makes a context on each GPU, or
/// on `only`.
fn cuda_contexts(topology: &Topology, only: Option<u32>) -> Result<Vec<Option<Arc<CudaContext>>>> {
    let buses = cuda_buses()?;
    topology
        .gpus
        .iter()
        .enumerate()
        .map(|(index, g)| {
            let wanted = only.is_none_or(|o| o as usize == index);
            match buses.iter().position(|bus| same_gpu(&g.pci_bus_id, bus)) {
                Some(ordinal) if wanted => CudaContext::new(ordinal)
                    .map(Some)
                    .map_err(cuda("cuCtxCreate (CUDA ordinal)", ordinal as u32)),
                _ => Ok(None),
            }
        })
        .collect()
}

impl Backend for GpuBackend {
    fn topology(&self) -> Result<Topology> {
        Ok(self.topology.clone())
    }

    fn activity(&self) -> Result<Vec<Activity>> {
        discovery::activity()
    }

    fn measure(&self, point: &Point, iters: u32, warmup: u32) -> Result<Vec<Record>> {
        check_iters(iters, warmup)?;
        check_point(point, &self.topology)?;

        let mut versions = self.topology.versions.clone();
        // Collectives and copies: the clocks read while their loops run (two NVML calls per
        // GPU, far below a point's time), the slowest GPU standing for the group.
        let during = Cell::new(SmClock::default());
        let gpus_of_point = point.gpus();
        let sample = || {
            let clocks: Vec<SmClock> = gpus_of_point.iter().map(|&g| self.sm_clock(g)).collect();
            during.set(SmClock::slowest(&clocks));
        };
        let contexts: Vec<(u32, Arc<CudaContext>)> = gpus_of_point
            .iter()
            .filter_map(|&g| Some((g, self.context(g).ok()?)))
            .collect();
        let mut records = released(&contexts, || {
            self.measure_point(point, (iters, warmup), &mut versions, &sample)
        })?;
        if !matches!(point, Point::Gemm { .. }) {
            for r in &mut records {
                set_conditions(r, during.get());
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .ok();
        for r in &mut records {
            r.timestamp = now;
            r.versions = versions.clone();
        }
        Ok(records)
    }
}

/// The steps of [`Backend::measure`], one per kind of point.
impl GpuBackend {
    /// One point's records, noting the library versions it ran with in `versions`;
    /// `sample` runs while a collective's or a copy's timed loops run.
    fn measure_point(
        &self,
        point: &Point,
        (iters, warmup): (u32, u32),
        versions: &mut record::Versions,
        sample: &dyn Fn(),
    ) -> Result<Vec<Record>> {
        Ok(match point {
            Point::Collective {
                kind,
                gpus,
                bytes,
                dtype,
            } => {
                check_libraries(&[Library::Nccl])?;
                versions.nccl = super::nccl::nccl_version();
                let timings = self.with_communicators(gpus, |group| {
                    collective::measure(group, (*kind, *bytes, *dtype), (iters, warmup), sample)
                })?;
                collective_records(Source::Nccl, &self.topology, point, timings)?
            }
            Point::Gemm {
                gpu,
                shape,
                dtype,
                layout,
            } => {
                let gemm =
                    self.measure_gemm(point, *gpu, (*shape, *dtype, *layout), (iters, warmup))?;
                versions.cublaslt = super::cublaslt::cublaslt_version();
                vec![gemm]
            }
            Point::Copy { path, bytes } => {
                vec![self.measure_copy(point, *path, *bytes, (iters, warmup), sample)?]
            }
        })
    }

    /// A GEMM on `gpu` once its SM clock has settled, with its layout and the clock its timed
    /// loop ended under.
    fn measure_gemm(
        &self,
        point: &Point,
        gpu: u32,
        (shape, dtype, layout): (Gemm, Dtype, GemmLayout),
        (iters, warmup): (u32, u32),
    ) -> Result<Record> {
        let cc = self.topology.gpus[gpu as usize].compute_capability;
        let clock = || self.sm_clock(gpu);
        let (timing, warmed) = gemm::measure(
            &self.context(gpu)?,
            gpu,
            cc,
            (shape, dtype, layout),
            (iters, warmup),
            &clock,
        )?;
        // The record has no field for the warm-up; the agent logs these lines at
        // debug level.
        eprintln!(
            "{DEBUG_LINE}{point}: {} warm-up iterations until the SM clock settled",
            warmed.settle_iterations
        );
        let mut r = point_record(
            Source::Cuda,
            node_group(&self.topology, point),
            point,
            timing,
        );
        // Read right after the timed loop, before the buffers are freed.
        set_conditions(&mut r, warmed.ended_at);
        Ok(r)
    }

    /// A copy along `path`, in the contexts of the GPUs it touches; `sample` runs while the
    /// timed copies run.
    fn measure_copy(
        &self,
        point: &Point,
        path: CopyPath,
        bytes: u64,
        iterations: (u32, u32),
        sample: &dyn Fn(),
    ) -> Result<Record> {
        let contexts = path
            .gpus()
            .iter()
            .map(|&g| self.context(g))
            .collect::<Result<Vec<_>>>()?;
        let timing = copy::measure(&contexts, path, bytes, iterations, sample)?;
        Ok(point_record(
            Source::Cuda,
            node_group(&self.topology, point),
            point,
            timing,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A context's error slot as cudarc keeps it: a drop guard stores its error there
    /// (`record_err`), and every call that checks takes it first and fails with it.
    #[derive(Default)]
    struct Context(RefCell<Option<String>>);

    impl KeptErrors for Context {
        fn take_kept(&self) -> Option<String> {
            self.0.borrow_mut().take()
        }
    }

    impl Context {
        /// A buffer's guard whose event record failed, as it is dropped.
        fn release_failing(&self) {
            *self.0.borrow_mut() = Some("CUDA_ERROR_LAUNCH_FAILED".into());
        }

        /// A point's first call on the context (`cuStreamCreate`), which checks the slot
        /// first, as cudarc's calls do.
        fn first_call(&self, gpu: u32) -> Result<()> {
            match self.take_kept() {
                None => Ok(()),
                Some(message) => Err(Error::Cuda {
                    call: "cuStreamCreate",
                    gpu,
                    message,
                }),
            }
        }
    }

    /// Point 1 on GPU 5 measures, and one of its buffers' guards fails as it is released:
    /// point 1 fails under the release and GPU 5, and point 2, on the same context, runs
    /// (issue 29, item 8). Unread, the error failed point 2's first call, named
    /// cuStreamCreate. A point's own error comes first, and the kept one is still taken.
    #[test]
    fn an_error_kept_from_a_point_s_buffers_fails_that_point_under_their_release() {
        let contexts = [(5, Context::default())];
        let ctx = &contexts[0].1;
        let point_1 = released(&contexts, || {
            ctx.first_call(5)?;
            ctx.release_failing();
            Ok("point 1's records")
        });
        assert!(
            matches!(
                &point_1,
                Err(Error::Cuda { call, gpu: 5, message })
                    if *call == RELEASING && message == "CUDA_ERROR_LAUNCH_FAILED"
            ),
            "{point_1:?}"
        );
        let point_2 = released(&contexts, || {
            ctx.first_call(5)?;
            Ok("point 2's records")
        });
        assert_eq!(point_2.unwrap(), "point 2's records");

        let own: Result<()> = released(&contexts, || {
            ctx.release_failing();
            Err(Error::Cuda {
                call: "cublasLtMatmul",
                gpu: 5,
                message: "failed".into(),
            })
        });
        assert!(
            matches!(
                own,
                Err(Error::Cuda {
                    call: "cublasLtMatmul",
                    ..
                })
            ),
            "{own:?}"
        );
        assert!(ctx.first_call(5).is_ok());
    }
}
