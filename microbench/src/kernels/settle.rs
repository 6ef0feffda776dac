//! When a GEMM's warm-up may end: once the SM clock has settled. A cold GPU boosts, then
//! lowers its clock as power and temperature rise; timing before that reads high (issue 10).

use std::time::Duration;

/// Most warm-up iterations spent waiting for the clock.
const MAX_ITERATIONS: u32 = 50;

/// Most time spent waiting for the clock.
const MAX_TIME: Duration = Duration::from_secs(2);

/// Two readings this close are one clock: Hopper and Ampere step their SM clock by 15 MHz.
const SAME_MHZ: u32 = 15;

/// Warm-up readings of the SM clock so far.
#[derive(Debug, Default)]
pub(super) struct Settle {
    iterations: u32,
    last_mhz: Option<u32>,
}

impl Settle {
    /// Takes the SM clock read after one more warm-up iteration, `elapsed` since the warm-up
    /// began; true once the warm-up may end: two readings in a row at the same clock, no clock
    /// to read, or [`MAX_ITERATIONS`] or [`MAX_TIME`] reached.
    pub(super) fn settled(&mut self, mhz: Option<u32>, elapsed: Duration) -> bool {
        self.iterations += 1;
        let steady = match (self.last_mhz, mhz) {
            (_, None) => true,
            (Some(before), Some(now)) => before.abs_diff(now) <= SAME_MHZ,
            (None, Some(_)) => false,
        };
        self.last_mhz = mhz;
        steady || self.iterations >= MAX_ITERATIONS || elapsed >= MAX_TIME
    }

    /// Warm-up iterations taken.
    pub(super) fn iterations(&self) -> u32 {
        self.iterations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(readings: &[Option<u32>], step: Duration) -> u32 {
        let mut settle = Settle::default();
        let mut elapsed = Duration::ZERO;
        for &mhz in readings {
            elapsed += step;
            if settle.settled(mhz, elapsed) {
                return settle.iterations();
            }
        }
        panic!("not settled after {readings:?}");
    }

    /// An H100 boosting to 1980 MHz and settling at 1755 under a power cap.
    #[test]
    fn ends_when_two_readings_agree() {
        let ms = Duration::from_millis(1);
        let readings = [1980, 1980 - 90, 1830, 1770, 1755, 1755].map(Some);
        assert_eq!(run(&readings, ms), 5);
        assert_eq!(run(&[Some(1980), Some(1980)], ms), 2);
    }

    #[test]
    fn without_a_clock_one_iteration_is_enough() {
        assert_eq!(run(&[None], Duration::from_millis(1)), 1);
    }

    #[test]
    fn a_clock_that_keeps_moving_is_waited_for_at_most_50_iterations_or_2_s() {
        let moving: Vec<Option<u32>> = (0..100).map(|i| Some(1000 + 100 * (i % 2))).collect();
        assert_eq!(run(&moving, Duration::from_millis(1)), 50);
        assert_eq!(run(&moving, Duration::from_millis(500)), 4);
    }
}
