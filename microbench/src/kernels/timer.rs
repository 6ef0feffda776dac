//! CUDA-event timing shared by the kernels: events recorded on each stream around each
//! iteration, so every iteration has its own time and the median, min and max are real.

use crate::error::{Error, Result};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaStream, DriverError};
use std::sync::Arc;

/// Converts a CUDA driver error on `gpu` into ours.
pub(super) fn cuda(call: &'static str, gpu: u32) -> impl Fn(DriverError) -> Error {
    move |e| Error::Cuda {
        call,
        gpu,
        message: e.to_string(),
    }
}

/// Runs `step` `warmup` times untimed, then `iters` times between events on every stream.
/// An iteration's time is the longest of its streams' (one stream per GPU or direction;
/// events on different GPUs cannot be compared, their durations can).
pub(super) fn time_iterations(
    streams: &[(u32, Arc<CudaStream>)],
    iters: u32,
    warmup: u32,
    mut step: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        step()?;
    }
    let mut marks = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        let record = |(gpu, s): &(u32, Arc<CudaStream>)| {
            s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda("cuEventRecord", *gpu))
        };
        let starts = streams.iter().map(record).collect::<Result<Vec<_>>>()?;
        step()?;
        let ends = streams.iter().map(record).collect::<Result<Vec<_>>>()?;
        marks.push((starts, ends));
    }
    for (gpu, s) in streams {
        s.synchronize().map_err(cuda("cuStreamSynchronize", *gpu))?;
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
