//! The few efficiencies that no measurement of a kernel or a link pins down are fitted once,
//! globally, to every published run; leave-one-source-out refits them without each source in
//! turn and scores that source, which says how the model does on runs it has never seen.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{median, validate, RunPrediction, RunsFile};
use crate::catalog::Efficiency;

/// One fitted efficiency: its name, where it lives and the range it may take.
pub struct Knob {
    /// Field name in [`Efficiency`].
    pub name: &'static str,
    /// The field.
    pub field: fn(&mut Efficiency) -> &mut f64,
    /// Lowest and highest value the fit may choose.
    pub range: (f64, f64),
}

/// The fitted efficiencies; every other figure of the catalog cites a measurement.
pub const FITTED: &[Knob] = &[
    Knob {
        name: "host_s_per_kernel",
        field: |e| &mut e.host_s_per_kernel,
        range: (2e-6, 80e-6),
    },
    Knob {
        name: "overlap_hbm_factor",
        field: |e| &mut e.overlap_hbm_factor,
        range: (0.0, 6.0),
    },
    Knob {
        name: "recompute_pass",
        field: |e| &mut e.recompute_pass,
        range: (0.6, 1.0),
    },
    Knob {
        name: "network_busbw",
        field: |e| &mut e.network_busbw,
        range: (0.4, 0.9),
    },
    Knob {
        name: "tier_contention",
        field: |e| &mut e.tier_contention,
        range: (0.0, 0.5),
    },
    Knob {
        name: "straggler_sigma",
        field: |e| &mut e.straggler_sigma,
        range: (0.0, 0.05),
    },
];

/// The objective: the mean over sources of each source's median |error|, so that a source
/// with 720 runs weighs no more than one with 9.
pub fn score(runs: &[&RunPrediction]) -> f64 {
    let sources: BTreeSet<&str> = runs.iter().map(|r| r.source.as_str()).collect();
    if sources.is_empty() {
        return 0.0;
    }
    sources
        .iter()
        .map(|s| {
            median(
                runs.iter()
                    .filter(|r| r.source == *s)
                    .map(|r| r.error.abs())
                    .collect(),
            )
        })
        .sum::<f64>()
        / sources.len() as f64
}

/// Fits [`FITTED`] from `start`, scoring the runs whose source is not `held_out`: two rounds
/// of a 16-point scan over each knob's range (the objective has plateaus: a host bound does
/// nothing until it passes the GPU time), then multiplicative steps from 10% down to 1%.
pub fn fit(files: &[RunsFile], start: &Efficiency, held_out: Option<&str>) -> Efficiency {
    let objective = |e: &Efficiency| {
        let v = validate(files, e);
        let kept: Vec<&RunPrediction> = v
            .runs
            .iter()
            .filter(|r| Some(r.source.as_str()) != held_out)
            .collect();
        score(&kept)
    };
    let mut best = start.clone();
    let mut best_score = objective(&best);
    let try_value = |best: &mut Efficiency, best_score: &mut f64, knob: &Knob, value: f64| {
        let mut trial = best.clone();
        *(knob.field)(&mut trial) = value.clamp(knob.range.0, knob.range.1);
        let s = objective(&trial);
        if s < *best_score - 1e-9 {
            *best_score = s;
            *best = trial;
            true
        } else {
            false
        }
    };
    const SCAN: u32 = 16;
    for _ in 0..2 {
        for knob in FITTED {
            let (lo, hi) = knob.range;
            for i in 0..=SCAN {
                let value = lo + (hi - lo) * f64::from(i) / f64::from(SCAN);
                try_value(&mut best, &mut best_score, knob, value);
            }
        }
    }
    let mut step = 0.1;
    while step >= 0.01 {
        let mut improved = false;
        for knob in FITTED {
            for dir in [1.0 + step, 1.0 / (1.0 + step)] {
                let value = *(knob.field)(&mut best.clone()) * dir;
                improved |= try_value(&mut best, &mut best_score, knob, value);
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    best
}

/// The fitted knobs' values in `e`, in [`FITTED`] order.
pub fn fitted_values(e: &Efficiency) -> Vec<(String, f64)> {
    let mut e = e.clone();
    FITTED
        .iter()
        .map(|k| (k.name.to_string(), *(k.field)(&mut e)))
        .collect()
}

/// One source held out.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    /// The source.
    pub source: String,
    /// Its runs.
    pub runs: usize,
    /// Median |error| on it with the efficiencies fitted without it.
    pub median_abs_error: f64,
    /// Mean signed error on it.
    pub mean_signed_error: f64,
    /// The fitted values without it, in [`FITTED`] order.
    pub fitted: Vec<(String, f64)>,
}

/// Leave-one-source-out: for each source, fit without it and score it.
pub fn leave_one_source_out(files: &[RunsFile], start: &Efficiency) -> Vec<HeldOut> {
    let sources: BTreeSet<String> = files
        .iter()
        .flat_map(|f| f.runs.iter().map(|r| r.source_key()))
        .collect();
    sources
        .into_iter()
        .map(|source| {
            let e = fit(files, start, Some(&source));
            let v = validate(files, &e);
            let errors: Vec<f64> = v
                .runs
                .iter()
                .filter(|r| r.source == source)
                .map(|r| r.error)
                .collect();
            HeldOut {
                runs: errors.len(),
                median_abs_error: median(errors.iter().map(|x| x.abs()).collect()),
                mean_signed_error: errors.iter().sum::<f64>() / errors.len().max(1) as f64,
                fitted: fitted_values(&e),
                source,
            }
        })
        .collect()
}
