//! CUDA-event timing shared by the kernels: events recorded on each stream around each
//! iteration ([`time_iterations`]: GEMMs and copies, whose median, min and max are real), or
//! around each of a few loops of back-to-back iterations ([`time_loops`]: collectives, each
//! loop as nccl-tests times its one).

use crate::error::{Error, Result};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream, DriverError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest one timed loop may run before it is given up as hung: far above any calibration
/// point (an 8 GiB all-reduce over PCIe takes about a second per iteration, and a loop has 25).
pub(super) const HUNG_AFTER: Duration = Duration::from_secs(120);

/// Time between polls of a watched loop; the timing itself is on the GPU's events.
const POLL: Duration = Duration::from_micros(200);

/// How the host waits for a timed loop to finish. Either way the first argument, `sample`,
/// runs once every span is enqueued and before the wait, while the GPUs run them: where the
/// SM clock is read, so that it is the clock under load and not an idle GPU's.
pub(super) enum Wait<'a> {
    /// Blocks in the driver: a hung copy or GEMM cannot be stopped from here, only with the
    /// process (the agent's watchdog ends the calibration child).
    Block(&'a dyn Fn()),
    /// Polls the loop's last events, calling `check` (the second argument) in between
    /// (NCCL's asynchronous errors), and gives up after [`HUNG_AFTER`], so the caller can
    /// abort its communicators.
    Watch(&'a dyn Fn(), &'a dyn Fn() -> Result<()>),
}

/// Converts a CUDA driver error on `gpu` into ours.
pub(super) fn cuda(call: &'static str, gpu: u32) -> impl Fn(DriverError) -> Error {
    move |e| Error::Cuda {
        call,
        gpu,
        message: e.to_string(),
    }
}

/// Runs `step` `warmup` times untimed, then `iters` times between events on every stream;
/// gives each iteration's time.
pub(super) fn time_iterations(
    streams: &[(u32, Arc<CudaStream>)],
    iters: u32,
    warmup: u32,
    wait: Wait,
    step: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    time_spans(streams, iters, 1, warmup, wait, step)
}

/// Runs `step` `warmup` times untimed, then `loops` loops of `iters` back-to-back iterations,
/// one pair of events around each loop, as nccl-tests times its one loop; gives each loop's
/// elapsed time. Per-iteration events would put a gap between iterations that the pipelined
/// loop of a training step does not have.
pub(super) fn time_loops(
    streams: &[(u32, Arc<CudaStream>)],
    (loops, iters): (u32, u32),
    warmup: u32,
    wait: Wait,
    step: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    time_spans(streams, loops, iters, warmup, wait, step)
}

/// Runs `step` `warmup` times untimed, then `spans` times `per_span` steps, each span between
/// events on every stream. A span's time is the longest of its streams' (one stream per GPU or
/// direction; events on different GPUs cannot be compared, their durations can).
fn time_spans(
    streams: &[(u32, Arc<CudaStream>)],
    spans: u32,
    per_span: u32,
    warmup: u32,
    wait: Wait,
    mut step: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        step()?;
    }
    let mut marks = Vec::with_capacity(spans as usize);
    for _ in 0..spans {
        let record = |(gpu, s): &(u32, Arc<CudaStream>)| {
            s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda("cuEventRecord", *gpu))
        };
        let starts = streams.iter().map(record).collect::<Result<Vec<_>>>()?;
        for _ in 0..per_span {
            step()?;
        }
        let ends = streams.iter().map(record).collect::<Result<Vec<_>>>()?;
        marks.push((starts, ends));
    }
    match wait {
        Wait::Block(sample) | Wait::Watch(sample, _) => sample(),
    }
    match wait {
        Wait::Block(_) => {
            for (gpu, s) in streams {
                s.synchronize().map_err(cuda("cuStreamSynchronize", *gpu))?;
            }
        }
        // Span by span, so [`HUNG_AFTER`] bounds one span, however many there are.
        Wait::Watch(_, check) => {
            for (_, ends) in &marks {
                watch(streams, ends, check)?;
            }
        }
    }
    marks
        .iter()
        .map(|(starts, ends)| {
            let mut longest = 0.0f64;
            for ((start, end), (gpu, _)) in starts.iter().zip(ends).zip(streams) {
                let ms = start
                    .elapsed_ms(end)
                    .map_err(cuda("cuEventElapsedTime", *gpu))?;
                longest = longest.max(f64::from(ms) * 1e-3);
            }
            Ok(longest)
        })
        .collect()
}

/// Waits until every event of `ends` (one per stream) has completed, calling `check` between
/// polls; an error of `check`, or no completion within [`HUNG_AFTER`], ends the wait.
fn watch(
    streams: &[(u32, Arc<CudaStream>)],
    ends: &[CudaEvent],
    check: &dyn Fn() -> Result<()>,
) -> Result<()> {
    let start = Instant::now();
    loop {
        let mut done = true;
        for (end, (gpu, _)) in ends.iter().zip(streams) {
            done &= end.try_is_complete().map_err(cuda("cuEventQuery", *gpu))?;
        }
        if done {
            return Ok(());
        }
        check()?;
        if start.elapsed() > HUNG_AFTER {
            let (gpu, _) = streams.first().ok_or_else(|| Error::BadValue {
                field: "streams",
                value: "[]".into(),
                expected: "at least one stream to wait on".into(),
            })?;
            return Err(Error::Cuda {
                call: "cuEventQuery (end of the timed loop)",
                gpu: *gpu,
                message: format!("not complete after {HUNG_AFTER:?}: given up as hung"),
            });
        }
        std::thread::sleep(POLL);
    }
}
