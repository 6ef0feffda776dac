//! When a GEMM's warm-up may end. A cold GPU boosts, then lowers its clock as power and
//! temperature rise; timing before that reads high (issue 10). Two equal readings come within
//! a few milliseconds of a cold start, long before the clock has come down, so the warm-up
//! runs on a budget of time and iterations, as nccl-tests (a fixed warm-up count) and
//! PyTorch's and Triton's benchmarks (`do_bench`: a warm-up time) do, and past it until the
//! clock holds still, read while the GPU runs.

use crate::error::Result;
use std::time::{Duration, Instant};

/// Least warm-up time: what Triton's `do_bench` warms for (25 ms) is too short for the power
/// limit of an 8192^3 GEMM to bite; 200 ms of back-to-back GEMMs is.
const MIN_TIME: Duration = Duration::from_millis(200);

/// Least warm-up iterations, however long each takes (nccl-tests' default warm-up is 5).
const MIN_ITERATIONS: u32 = 10;

/// Most time spent waiting for the clock.
const MAX_TIME: Duration = Duration::from_secs(2);

/// Two readings this close are one clock: Hopper and Ampere step their SM clock by 15 MHz.
const SAME_MHZ: u32 = 15;

/// How long the clock must hold within [`SAME_MHZ`] once the budget is spent: a clock that
/// comes down 15 MHz a step would pass any count of a few readings in a row.
const STEADY_FOR: Duration = Duration::from_millis(100);

/// A warm-up round runs back-to-back iterations for about this long, so the clock is read
/// while kernels are still queued.
const ROUND: Duration = Duration::from_millis(10);

/// Warm-up so far: iterations run and the SM clock readings of the last rounds.
#[derive(Debug, Default)]
pub(super) struct Settle {
    iterations: u32,
    /// Readings since the last one at or before [`STEADY_FOR`] ago, with when each was read.
    recent: std::collections::VecDeque<(Duration, u32)>,
}

impl Settle {
    /// Takes a round of `ran` more iterations, with the SM clock read while they ran,
    /// `elapsed` since the warm-up began; true once the warm-up may end: [`MIN_TIME`] and
    /// [`MIN_ITERATIONS`] spent and the clock within [`SAME_MHZ`] for [`STEADY_FOR`] (or no
    /// clock to read), or [`MAX_TIME`] reached.
    pub(super) fn settled(&mut self, ran: u32, mhz: Option<u32>, elapsed: Duration) -> bool {
        self.iterations = self.iterations.saturating_add(ran);
        let window_start = elapsed.saturating_sub(STEADY_FOR);
        if let Some(mhz) = mhz {
            self.recent.push_back((elapsed, mhz));
            while self
                .recent
                .get(1)
                .is_some_and(|&(at, _)| at <= window_start)
            {
                self.recent.pop_front();
            }
        }
        let budget = elapsed >= MIN_TIME && self.iterations >= MIN_ITERATIONS;
        let steady = match mhz {
            None => true,
            Some(_) => {
                let spans = self
                    .recent
                    .front()
                    .is_some_and(|&(at, _)| at <= window_start);
                let (lo, hi) = self
                    .recent
                    .iter()
                    .fold((u32::MAX, 0), |(lo, hi), &(_, m)| (lo.min(m), hi.max(m)));
                spans && hi - lo <= SAME_MHZ
            }
        };
        (budget && steady) || elapsed >= MAX_TIME
    }

    /// Warm-up iterations taken.
    pub(super) fn iterations(&self) -> u32 {
        self.iterations
    }
}

/// Runs `batch` iterations back to back, reads `clock` while they are still queued on the
/// GPU, then waits for them (`sync`): the clock under this load, not an idle GPU's.
fn round<T>(
    batch: u32,
    step: &mut dyn FnMut() -> Result<()>,
    clock: &dyn Fn() -> T,
    sync: &dyn Fn() -> Result<()>,
) -> Result<T> {
    for _ in 0..batch {
        step()?;
    }
    let read = clock();
    sync()?;
    Ok(read)
}

/// Warms `step` up until [`Settle`] says the clock has settled, in rounds that grow until one
/// takes [`ROUND`]; gives the warm-up.
pub(super) fn warm_up(
    step: &mut dyn FnMut() -> Result<()>,
    mhz: &dyn Fn() -> Option<u32>,
    sync: &dyn Fn() -> Result<()>,
) -> Result<Settle> {
    let (mut settle, began, mut batch) = (Settle::default(), Instant::now(), 1u32);
    loop {
        let started = Instant::now();
        let read = round(batch, step, mhz, sync)?;
        if settle.settled(batch, read, began.elapsed()) {
            return Ok(settle);
        }
        if started.elapsed() < ROUND {
            batch = batch.saturating_mul(2).min(1 << 16);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Rounds of `ran` iterations `step` apart, until settled: the iterations taken.
    fn run(readings: &[Option<u32>], ran: u32, step: Duration) -> u32 {
        let mut settle = Settle::default();
        let mut elapsed = Duration::ZERO;
        for &mhz in readings {
            elapsed += step;
            if settle.settled(ran, mhz, elapsed) {
                return settle.iterations();
            }
        }
        panic!("not settled after {readings:?}");
    }

    /// Two equal readings 2 ms in used to end the warm-up at once; now the warm-up runs its
    /// 200 ms and 10 iterations first.
    #[test]
    fn two_equal_readings_do_not_end_the_warm_up_before_its_budget() {
        let steady = vec![Some(1980); 400];
        assert_eq!(run(&steady, 1, Duration::from_millis(1)), 200);
        // Slow iterations: 10 of them at 50 ms still make the budget at 500 ms.
        assert_eq!(run(&steady, 1, Duration::from_millis(50)), 10);
    }

    /// An H100 boosting to 1980 MHz and coming down 5 MHz every 10 ms round for 400 ms, then
    /// holding at 1755 under its power cap: the warm-up ends once 1755 has held for 100 ms
    /// (the 51st round), not while the clock is still coming down.
    #[test]
    fn the_warm_up_waits_for_the_clock_to_come_down() {
        let mut readings: Vec<Option<u32>> = (0..40).map(|i| Some(1980 - i * 5)).collect();
        readings.extend([Some(1755); 20]);
        assert_eq!(run(&readings, 8, Duration::from_millis(10)), 51 * 8);
    }

    #[test]
    fn without_a_clock_the_budget_is_enough_and_a_moving_clock_stops_at_2_s() {
        assert_eq!(run(&[None; 300], 1, Duration::from_millis(1)), 200);
        let moving: Vec<Option<u32>> = (0..100).map(|i| Some(1000 + 100 * (i % 2))).collect();
        assert_eq!(run(&moving, 1, Duration::from_millis(100)), 20);
    }

    /// The clock is read after a round's iterations are queued and before it is waited for,
    /// so it is the clock under load (a fake GPU queue records the order).
    #[test]
    fn the_clock_is_read_while_the_kernels_run() {
        let log = RefCell::new(Vec::new());
        let mut step = || {
            log.borrow_mut().push("step");
            Ok(())
        };
        let read = round(3, &mut step, &|| log.borrow_mut().push("clock"), &|| {
            log.borrow_mut().push("sync");
            Ok(())
        });
        assert!(read.is_ok());
        assert_eq!(*log.borrow(), ["step", "step", "step", "clock", "sync"]);
    }
}
