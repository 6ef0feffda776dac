//! The few efficiencies that no measurement of a kernel or a link pins down are fitted once,
//! globally, to every published run; leave-one-source-out refits them without each source in
//! turn and scores that source, which says how the model does on runs it has never seen.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{median, predict_all, RunPrediction, RunsFile};
use crate::catalog::efficiency::{Knob, FITTED};
use crate::catalog::Efficiency;

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

/// Initial simplex of the refinement, as a share of each knob's range.
const SIMPLEX_SIZE: f64 = 0.15;
/// Objective evaluations the refinement may spend (each prices every run once).
const SIMPLEX_BUDGET: usize = 400;

/// Where every knob also starts, as a share of its range: the objective has more than one
/// minimum, and starts that depend on no run keep a held-out source out of its own fit.
const SPREAD: [f64; 3] = [0.25, 0.5, 0.75];

/// `prior` and the same with every knob at each share of [`SPREAD`]: where a fit starts.
pub fn starts(prior: &Efficiency) -> Vec<Efficiency> {
    std::iter::once(prior.clone())
        .chain(SPREAD.map(|u| from_unit(prior, &[u; FITTED.len()])))
        .collect()
}

/// Fits [`FITTED`] from each of `starts` (from the priors when there are none), scoring the
/// runs whose source is not `held_out`; the lowest objective wins.
pub fn fit(files: &[RunsFile], starts: &[Efficiency], held_out: Option<&str>) -> Efficiency {
    let objective = |e: &Efficiency| {
        let (runs, _) = predict_all(files, e);
        let kept: Vec<&RunPrediction> = runs
            .iter()
            .filter(|r| Some(r.source.as_str()) != held_out)
            .collect();
        score(&kept)
    };
    let priors = [crate::catalog::PRIOR];
    let starts = if starts.is_empty() { &priors } else { starts };
    starts
        .iter()
        .map(|s| fit_from(&objective, s))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(crate::catalog::PRIOR, |(e, _)| e)
}

/// One start of the fit: three rounds of a 16-point scan over each knob's range (the objective
/// has plateaus: a host bound does nothing until it passes the GPU time), multiplicative steps
/// from 10% down to 1%, then a Nelder-Mead simplex from there, kept where it scores lower.
fn fit_from(objective: &impl Fn(&Efficiency) -> f64, start: &Efficiency) -> (Efficiency, f64) {
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
    for _ in 0..3 {
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
    // The knobs trade against each other (a slower network against a larger straggler
    // spread, host time against recomputation), and coordinate steps stall on those ridges:
    // a simplex moves along them.
    let (simplex, simplex_score) = nelder_mead(objective, &best, SIMPLEX_SIZE, SIMPLEX_BUDGET);
    if simplex_score < best_score {
        (simplex, simplex_score)
    } else {
        (best, best_score)
    }
}

/// The knobs of `e` as fractions of their ranges.
pub(crate) fn to_unit(e: &Efficiency) -> Vec<f64> {
    let mut e = e.clone();
    FITTED
        .iter()
        .map(|k| (*(k.field)(&mut e) - k.range.0) / (k.range.1 - k.range.0))
        .collect()
}

/// `base` with the knobs set from fractions of their ranges, clamped into them.
pub(crate) fn from_unit(base: &Efficiency, x: &[f64]) -> Efficiency {
    let mut e = base.clone();
    for (k, u) in FITTED.iter().zip(x) {
        *(k.field)(&mut e) = k.range.0 + (k.range.1 - k.range.0) * u.clamp(0.0, 1.0);
    }
    e
}

/// Nelder-Mead over the knobs' unit cube from `start`, with an initial simplex `size` of each
/// range wide, for at most `budget` evaluations of `f`.
pub(crate) fn nelder_mead(
    f: &impl Fn(&Efficiency) -> f64,
    start: &Efficiency,
    size: f64,
    budget: usize,
) -> (Efficiency, f64) {
    let n = FITTED.len();
    let eval = |x: &[f64]| f(&from_unit(start, x));
    let x0 = to_unit(start);
    let mut simplex: Vec<(Vec<f64>, f64)> = vec![(x0.clone(), eval(&x0))];
    for i in 0..n {
        let mut x = x0.clone();
        x[i] = if x[i] + size <= 1.0 {
            x[i] + size
        } else {
            x[i] - size
        };
        let fx = eval(&x);
        simplex.push((x, fx));
    }
    let mut used = n + 1;
    while used < budget {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let centroid: Vec<f64> = (0..n)
            .map(|j| simplex[..n].iter().map(|p| p.0[j]).sum::<f64>() / n as f64)
            .collect();
        let toward = |t: f64| -> Vec<f64> {
            (0..n)
                .map(|j| (centroid[j] + t * (simplex[n].0[j] - centroid[j])).clamp(0.0, 1.0))
                .collect()
        };
        let reflected = toward(-1.0);
        let fr = eval(&reflected);
        used += 1;
        if fr < simplex[0].1 {
            let expanded = toward(-2.0);
            let fe = eval(&expanded);
            used += 1;
            simplex[n] = if fe < fr {
                (expanded, fe)
            } else {
                (reflected, fr)
            };
        } else if fr < simplex[n - 1].1 {
            simplex[n] = (reflected, fr);
        } else {
            let contracted = toward(0.5);
            let fc = eval(&contracted);
            used += 1;
            if fc < simplex[n].1 {
                simplex[n] = (contracted, fc);
            } else {
                let best = simplex[0].0.clone();
                for p in simplex.iter_mut().skip(1) {
                    p.0 = (0..n).map(|j| best[j] + 0.5 * (p.0[j] - best[j])).collect();
                    p.1 = eval(&p.0);
                    used += 1;
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (x, fx) = simplex.swap_remove(0);
    (from_unit(start, &x), fx)
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
            let e = fit(files, &starts(start), Some(&source));
            let (runs, _) = predict_all(files, &e);
            let errors: Vec<f64> = runs
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::PRIOR;

    /// A bowl with its bottom at known knob values inside the ranges: the simplex must find
    /// it from the priors, in the knobs' own units.
    #[test]
    fn simplex_finds_the_bottom_of_a_bowl_across_coupled_knobs() {
        let target = [30e-6, 0.7, 0.85, 0.6, 0.2, 0.02];
        let bowl = |e: &Efficiency| {
            let x = to_unit(e);
            let mut t = PRIOR.clone();
            for (k, v) in FITTED.iter().zip(target) {
                *(k.field)(&mut t) = v;
            }
            let y = to_unit(&t);
            // A ridge: the first two knobs only matter through their sum and difference.
            let (s, d) = (x[0] + x[1] - y[0] - y[1], x[0] - x[1] - y[0] + y[1]);
            s * s
                + 0.01 * d * d
                + x[2..]
                    .iter()
                    .zip(&y[2..])
                    .map(|(a, b)| (a - b).powi(2))
                    .sum::<f64>()
        };
        let (e, score) = nelder_mead(&bowl, &PRIOR, SIMPLEX_SIZE, 2000);
        assert!(score < 1e-6, "objective {score}");
        for (k, (got, want)) in FITTED
            .iter()
            .zip(fitted_values(&e).iter().map(|v| v.1).zip(target))
        {
            let span = k.range.1 - k.range.0;
            assert!(
                (got - want).abs() < 0.01 * span,
                "{}: {got} vs {want}",
                k.name
            );
        }
    }

    #[test]
    fn unit_coordinates_round_trip_and_clamp_to_the_ranges() {
        let x = to_unit(&PRIOR);
        assert_eq!(fitted_values(&from_unit(&PRIOR, &x)), fitted_values(&PRIOR));
        let low = from_unit(&PRIOR, &[-1.0; 6]);
        for ((_, v), k) in fitted_values(&low).into_iter().zip(FITTED) {
            assert_eq!(v, k.range.0);
        }
    }
}
