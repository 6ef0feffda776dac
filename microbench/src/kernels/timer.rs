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

/// What the timed loops ask of one stream: on a GPU, a CUDA stream of `gpu`, its events and
/// the driver's calls on them (`(gpu, stream)`); in tests, a fake that logs them.
pub(super) trait Timed {
    /// A point on the stream's work (`CUevent`).
    type Event;
    /// The stream's GPU, for errors.
    fn gpu(&self) -> u32;
    /// `cuEventRecord`: an event after the work enqueued so far.
    fn record(&self) -> Result<Self::Event>;
    /// `cuStreamSynchronize`: waits until the stream's work is done.
    fn synchronize(&self) -> Result<()>;
    /// `cuEventQuery`: whether the work before `event` is done.
    fn is_done(&self, event: &Self::Event) -> Result<bool>;
    /// `cuEventElapsedTime`, in seconds.
    fn elapsed_s(&self, start: &Self::Event, end: &Self::Event) -> Result<f64>;
}

impl Timed for (u32, Arc<CudaStream>) {
    type Event = CudaEvent;

    fn gpu(&self) -> u32 {
        self.0
    }

    fn record(&self) -> Result<CudaEvent> {
        self.1
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda("cuEventRecord", self.0))
    }

    fn synchronize(&self) -> Result<()> {
        self.1
            .synchronize()
            .map_err(cuda("cuStreamSynchronize", self.0))
    }

    fn is_done(&self, event: &CudaEvent) -> Result<bool> {
        event
            .try_is_complete()
            .map_err(cuda("cuEventQuery", self.0))
    }

    fn elapsed_s(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f64> {
        let ms = start
            .elapsed_ms(end)
            .map_err(cuda("cuEventElapsedTime", self.0))?;
        Ok(f64::from(ms) * 1e-3)
    }
}

/// Runs `step` `warmup` times untimed, then `iters` times between events on every stream;
/// gives each iteration's time.
pub(super) fn time_iterations<S: Timed>(
    streams: &[S],
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
pub(super) fn time_loops<S: Timed>(
    streams: &[S],
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
fn time_spans<S: Timed>(
    streams: &[S],
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
        let starts = streams.iter().map(S::record).collect::<Result<Vec<_>>>()?;
        for _ in 0..per_span {
            step()?;
        }
        let ends = streams.iter().map(S::record).collect::<Result<Vec<_>>>()?;
        marks.push((starts, ends));
    }
    match wait {
        Wait::Block(sample) | Wait::Watch(sample, _) => sample(),
    }
    match wait {
        Wait::Block(_) => {
            for s in streams {
                s.synchronize()?;
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
            for ((start, end), s) in starts.iter().zip(ends).zip(streams) {
                longest = longest.max(s.elapsed_s(start, end)?);
            }
            Ok(longest)
        })
        .collect()
}

/// Waits until every event of `ends` (one per stream) has completed, calling `check` between
/// polls; an error of `check`, or no completion within [`HUNG_AFTER`], ends the wait.
fn watch<S: Timed>(streams: &[S], ends: &[S::Event], check: &dyn Fn() -> Result<()>) -> Result<()> {
    let start = Instant::now();
    loop {
        let mut done = true;
        for (end, s) in ends.iter().zip(streams) {
            done &= s.is_done(end)?;
        }
        if done {
            return Ok(());
        }
        check()?;
        if start.elapsed() > HUNG_AFTER {
            let gpu = streams.first().map(S::gpu).ok_or_else(|| Error::BadValue {
                field: "streams",
                value: "[]".into(),
                expected: "at least one stream to wait on".into(),
            })?;
            return Err(Error::Cuda {
                call: "cuEventQuery (end of the timed loop)",
                gpu,
                message: format!("not complete after {HUNG_AFTER:?}: given up as hung"),
            });
        }
        std::thread::sleep(POLL);
    }
}

/// A stream for tests: logs the timed loop's calls on it, with its GPU, to a log it shares
/// with the test's other fakes (steps, clock readings); every event is done at once, and
/// every span takes 1 ms.
#[cfg(test)]
pub(super) mod fake {
    use super::*;
    use std::cell::RefCell;

    /// One logged call: its name and its stream's GPU (0 for the test's own).
    pub(crate) type Logged = (&'static str, u32);

    pub(crate) struct Stream<'a> {
        pub gpu: u32,
        pub log: &'a RefCell<Vec<Logged>>,
    }

    impl Stream<'_> {
        fn log(&self, call: &'static str) {
            self.log.borrow_mut().push((call, self.gpu));
        }
    }

    impl Timed for Stream<'_> {
        type Event = ();

        fn gpu(&self) -> u32 {
            self.gpu
        }

        fn record(&self) -> Result<()> {
            self.log("record");
            Ok(())
        }

        fn synchronize(&self) -> Result<()> {
            self.log("sync");
            Ok(())
        }

        fn is_done(&self, _: &()) -> Result<bool> {
            self.log("query");
            Ok(true)
        }

        fn elapsed_s(&self, _: &(), _: &()) -> Result<f64> {
            Ok(1e-3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// The SM clock is read once every timed span is enqueued on every stream and before
    /// any is waited for, by blocking (GEMMs, copies) or by polling the spans' end events
    /// (collectives), so it is the clock of GPUs running the timed work, not of idle ones
    /// (issue 29, item 6).
    #[test]
    fn the_clock_is_read_after_the_timed_spans_are_enqueued_and_before_the_wait() {
        let log = RefCell::new(Vec::new());
        let streams = [
            fake::Stream { gpu: 1, log: &log },
            fake::Stream { gpu: 2, log: &log },
        ];
        let sample = || log.borrow_mut().push(("clock", 0));
        let step = || {
            log.borrow_mut().push(("step", 0));
            Ok(())
        };
        let span = [
            ("record", 1),
            ("record", 2),
            ("step", 0),
            ("record", 1),
            ("record", 2),
        ];
        let times = time_iterations(&streams, 2, 1, Wait::Block(&sample), step).unwrap();
        assert_eq!(times, [1e-3, 1e-3]);
        let mut blocked = vec![("step", 0)];
        blocked.extend(span);
        blocked.extend(span);
        blocked.extend([("clock", 0), ("sync", 1), ("sync", 2)]);
        assert_eq!(*log.borrow(), blocked);

        log.borrow_mut().clear();
        let check = || Ok(());
        let times = time_loops(&streams, (2, 1), 0, Wait::Watch(&sample, &check), step).unwrap();
        assert_eq!(times, [1e-3, 1e-3]);
        let mut watched = span.to_vec();
        watched.extend(span);
        watched.extend([("clock", 0), ("query", 1), ("query", 2)]);
        watched.extend([("query", 1), ("query", 2)]);
        assert_eq!(*log.borrow(), watched);
    }
}
