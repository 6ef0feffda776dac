//! One term of the step time: its full time and the part the step waits for.

use serde::Serialize;

/// One term of the step time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Term {
    /// Time the work takes, seconds.
    pub time_s: f64,
    /// Part of it not hidden behind other work, seconds.
    pub exposed_s: f64,
}

impl Term {
    pub(super) fn exposed(time_s: f64) -> Term {
        Term {
            time_s,
            exposed_s: time_s,
        }
    }

    /// A collective of which `window` seconds of compute can hide all but `floor`; the compute
    /// that runs beside the hidden part loses `slowdown` of its throughput meanwhile, which the
    /// step pays.
    pub(super) fn overlapped(time_s: f64, window: f64, floor: f64, slowdown: f64) -> Term {
        if time_s <= 0.0 {
            return Term::default();
        }
        let exposed = (time_s - window).max(floor.min(time_s));
        let hidden = time_s - exposed;
        Term {
            time_s,
            exposed_s: exposed + hidden * slowdown,
        }
    }
}
