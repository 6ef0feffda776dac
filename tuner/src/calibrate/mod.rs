//! Calibration from a cluster's own jobs: the fitted knobs ([`FITTED`]) refitted to the jobs'
//! measured step times with the catalog as the prior, each knob reported with its uncertainty,
//! and the jobs' leave-one-job-out error, written as a [`profile::Profile`].
//!
//! The fit maximizes a posterior. Each job's log error ln(predicted / measured) counts
//! through a Huber loss at the model's own error scale ([`ERROR_SCALE`]), so a job pulls on a
//! knob with a bounded force however far off it is (a mislabelled job, a slow node that day);
//! the catalog pulls each knob back to its value with a spring ([`PRIOR_WIDTH`] of its range).
//! A handful of jobs therefore moves a knob part of the way, and only many that agree move it
//! far: three jobs that all want a knob at the end of its range move it by at most about a
//! quarter of the range, thirty across it.
//!
//! Each job's unpublished knobs (microbatch, ZeRO stage, recomputation where the runs file
//! leaves them null) are chosen once, at the catalog's values, as `validate` chooses them, and
//! held while the knobs move: a job ran one layout, and the fit explains its time, not which
//! layout it might have run.

pub mod profile;

use std::rc::Rc;

use serde::Serialize;

use crate::catalog::Efficiency;
use crate::cost::Scenario;
use crate::fit::Fits;
use crate::mesh::Mesh;
use crate::validate::fitting::{fitted_values, from_unit, to_unit, FITTED};
use crate::validate::measured::Serving;
use crate::validate::{self, RunsFile, Skipped};

/// The model's typical |log error| on runs it was not fitted to, the scale of a job's
/// residual: the median over sources of leave-one-source-out (4.1%, README "Leave-one-source-
/// out"), rounded up.
pub const ERROR_SCALE: f64 = 0.05;

/// A job's residual, in units of [`ERROR_SCALE`], past which its pull stops growing.
pub const HUBER: f64 = 1.5;

/// Width of the catalog prior on each knob, as a share of the knob's range (one sigma).
pub const PRIOR_WIDTH: f64 = 0.08;

/// One job, ready to price at any knob values.
pub struct Job {
    /// Run id.
    pub id: String,
    /// Runs file it came from.
    pub file: String,
    /// Measured seconds per step.
    pub observed_s: f64,
    /// The scenario it was priced in at the catalog's knobs.
    scenario: Scenario,
    /// The layout chosen for it then.
    mesh: Mesh,
    /// Its measurements' fits, when it has measurements.
    fits: Option<Rc<Fits>>,
}

impl Job {
    /// Seconds per step with the fitted knobs at `knobs` (in [`FITTED`] order, unit scale).
    fn step_s(&self, knobs: &[f64]) -> f64 {
        let s = &self.scenario;
        let efficiency = from_unit(&s.efficiency, knobs);
        let (m, t, c) = (s.model.clone(), s.training.clone(), s.cluster.clone());
        let scenario = match &self.fits {
            Some(f) => Scenario::measured(m, t, c, s.gpus, efficiency, f),
            None => Scenario::nominal(m, t, c, s.gpus, efficiency),
        };
        scenario.evaluate(&self.mesh).step_time_s
    }

    fn log_error(&self, knobs: &[f64]) -> f64 {
        (self.step_s(knobs) / self.observed_s).ln()
    }
}

/// The jobs of `files`, priced once at `prior` (from their measurements where `serving` has
/// them) to choose their layouts; jobs that cannot be priced are returned with the reason.
pub fn jobs(
    files: &[RunsFile],
    prior: &Efficiency,
    mut serving: Option<&mut Serving>,
) -> (Vec<Job>, Vec<Skipped>) {
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    for file in files {
        for run in &file.runs {
            let nominal = validate::price(run, prior, &Scenario::nominal);
            let fits = match (&mut serving, &nominal) {
                (Some(s), Ok((p, _, _))) => {
                    s.fits_for(file, run, &p.gpu, p.precision).ok().map(|f| f.0)
                }
                _ => None,
            };
            let priced = match &fits {
                Some(f) => validate::price(run, prior, &|m, t, c, g, e| {
                    Scenario::measured(m, t, c, g, e, f)
                }),
                None => nominal,
            };
            match priced {
                Ok((p, scenario, mesh)) => jobs.push(Job {
                    id: p.id,
                    file: file.origin.clone(),
                    observed_s: p.observed_iteration_time_s,
                    scenario,
                    mesh,
                    fits,
                }),
                Err(e) => skipped.push(Skipped {
                    id: run.id.clone(),
                    file: file.origin.clone(),
                    reason: e.to_string(),
                }),
            }
        }
    }
    (jobs, skipped)
}

/// Huber's loss at `c`: quadratic inside, linear outside.
fn huber(x: f64, c: f64) -> f64 {
    let a = x.abs();
    if a <= c {
        0.5 * a * a
    } else {
        c * (a - 0.5 * c)
    }
}

/// The negative log posterior of `knobs` (unit scale) given `jobs` and the prior at `prior`.
fn objective(jobs: &[&Job], prior: &[f64], knobs: &[f64]) -> f64 {
    let data: f64 = jobs
        .iter()
        .map(|j| huber(j.log_error(knobs) / ERROR_SCALE, HUBER))
        .sum();
    let spring: f64 = knobs
        .iter()
        .zip(prior)
        .map(|(u, u0)| ((u - u0) / PRIOR_WIDTH).powi(2) / 2.0)
        .sum();
    data + spring
}

/// Iterations of the damped Gauss-Newton fit, and its finite-difference step (unit scale).
const ITERATIONS: usize = 30;
const STEP: f64 = 0.005;

/// The jobs' scaled residuals ln(predicted / measured) / [`ERROR_SCALE`] at `u`.
fn residuals(jobs: &[&Job], u: &[f64]) -> Vec<f64> {
    jobs.iter().map(|j| j.log_error(u) / ERROR_SCALE).collect()
}

/// d residual / d knob by forward differences at `u`, one column per knob.
fn jacobian(jobs: &[&Job], u: &[f64], r: &[f64]) -> Vec<Vec<f64>> {
    (0..u.len())
        .map(|k| {
            let mut v = u.to_vec();
            // Step inward at the top of the range.
            let h = if v[k] + STEP <= 1.0 { STEP } else { -STEP };
            v[k] += h;
            residuals(jobs, &v)
                .iter()
                .zip(r)
                .map(|(a, b)| (a - b) / h)
                .collect()
        })
        .collect()
}

/// Huber's weights: 1 inside the knee, c / |r| outside, so that a far-off job pulls with a
/// fixed force.
fn weights(r: &[f64]) -> Vec<f64> {
    r.iter()
        .map(|x| {
            if x.abs() <= HUBER {
                1.0
            } else {
                HUBER / x.abs()
            }
        })
        .collect()
}

/// J^T W J plus the prior's 1 / width^2 on the diagonal: the objective's curvature.
fn curvature(jac: &[Vec<f64>], w: &[f64]) -> Vec<Vec<f64>> {
    let n = jac.len();
    let mut a = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..n {
            a[i][j] = (0..w.len()).map(|t| jac[i][t] * w[t] * jac[j][t]).sum();
        }
        a[i][i] += 1.0 / PRIOR_WIDTH.powi(2);
    }
    a
}

/// Solves a x = b for symmetric positive definite a, by Cholesky; `None` where it is not.
fn solve(a: &[Vec<f64>], b: &[f64]) -> Option<Vec<f64>> {
    let l = cholesky(a)?;
    let n = b.len();
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = (y[i] - (i + 1..n).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
    }
    Some(x)
}

/// The knobs (unit scale) that minimize the objective over `jobs`, from `start`: damped
/// Gauss-Newton on Huber's reweighted residuals (Levenberg-Marquardt with iteratively
/// reweighted least squares), kept inside the ranges. A knob no job's time depends on has no
/// pull but the prior's and stays at the catalog's value.
fn minimize(jobs: &[&Job], prior: &[f64], start: &[f64]) -> Vec<f64> {
    let mut u = start.to_vec();
    let mut best = objective(jobs, prior, &u);
    let mut damping = 1.0;
    for _ in 0..ITERATIONS {
        let r = residuals(jobs, &u);
        let w = weights(&r);
        let jac = jacobian(jobs, &u, &r);
        let mut a = curvature(&jac, &w);
        let g: Vec<f64> = (0..u.len())
            .map(|k| {
                -((0..r.len()).map(|t| jac[k][t] * w[t] * r[t]).sum::<f64>()
                    + (u[k] - prior[k]) / PRIOR_WIDTH.powi(2))
            })
            .collect();
        let mut moved = false;
        while damping < 1e8 {
            for (k, row) in a.iter_mut().enumerate() {
                row[k] *= 1.0 + damping;
            }
            let step = solve(&a, &g);
            for (k, row) in a.iter_mut().enumerate() {
                row[k] /= 1.0 + damping;
            }
            let Some(step) = step else {
                damping *= 10.0;
                continue;
            };
            let trial: Vec<f64> = u
                .iter()
                .zip(&step)
                .map(|(x, d)| (x + d).clamp(0.0, 1.0))
                .collect();
            let score = objective(jobs, prior, &trial);
            if score < best {
                let size: f64 = trial.iter().zip(&u).map(|(a, b)| (a - b).abs()).sum();
                best = score;
                u = trial;
                damping = (damping / 10.0).max(1e-6);
                moved = size > 1e-6;
                break;
            }
            damping *= 10.0;
        }
        if !moved {
            break;
        }
    }
    u
}

/// One sigma per knob (unit scale): the inverse curvature of the objective at `u` (Laplace's
/// approximation of the posterior).
fn posterior_sigma(jobs: &[&Job], u: &[f64]) -> Vec<f64> {
    let r = residuals(jobs, u);
    let a = curvature(&jacobian(jobs, u, &r), &weights(&r));
    let inverse_diagonal = (0..u.len()).map(|c| {
        let e: Vec<f64> = (0..u.len()).map(|i| f64::from(u8::from(i == c))).collect();
        solve(&a, &e).map_or(PRIOR_WIDTH.powi(2), |x| x[c])
    });
    inverse_diagonal.map(f64::sqrt).collect()
}

/// One fitted knob in the profile.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct KnobFit {
    /// The knob's name ([`FITTED`]).
    pub name: String,
    /// Its calibrated value.
    pub value: f64,
    /// One sigma of the posterior (Laplace: the inverse curvature of the objective at the
    /// fit), in the knob's units.
    pub uncertainty: f64,
    /// The catalog's value, the prior.
    pub prior: f64,
    /// The lowest and highest value the leave-one-job-out refits gave it.
    pub leave_one_out: (f64, f64),
    /// The range the fit may move it within.
    pub range: (f64, f64),
}

/// One job's errors.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct JobFit {
    /// Run id.
    pub id: String,
    /// Runs file.
    pub file: String,
    /// Measured seconds per step.
    pub observed_s: f64,
    /// predicted / observed - 1 at the catalog's knobs.
    pub prior_error: f64,
    /// The same at the calibrated knobs.
    pub calibrated_error: f64,
    /// The same at knobs calibrated without this job.
    pub held_out_error: f64,
}

/// What calibration found.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// The knobs.
    pub knobs: Vec<KnobFit>,
    /// The jobs.
    pub jobs: Vec<JobFit>,
    /// Jobs that could not be priced.
    pub skipped: Vec<Skipped>,
    /// The calibrated efficiencies.
    #[serde(skip)]
    pub efficiency: Efficiency,
}

impl Calibration {
    /// Median |error| of the jobs: at the prior, calibrated, and held out one at a time.
    pub fn medians(&self) -> (f64, f64, f64) {
        let m = |f: fn(&JobFit) -> f64| {
            validate::median(self.jobs.iter().map(|j| f(j).abs()).collect())
        };
        (
            m(|j| j.prior_error),
            m(|j| j.calibrated_error),
            m(|j| j.held_out_error),
        )
    }
}

/// The Cholesky factor L (a = L L^T) of a symmetric positive definite matrix; `None` where it
/// is not positive definite.
fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if !(d > 0.0 && d.is_finite()) {
                    return None;
                }
                l[i][i] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Up to this many jobs each leave-one-job-out fit is a fit of its own; past it, one
/// Gauss-Newton step from the full fit without the job's residual (the approximate
/// leave-one-out of Rad and Maleki 2020, exact to first order), which keeps the cost linear in
/// the jobs: 720 of vTrain's runs priced from their lookup tables take 5 minutes refitted,
/// seconds stepped.
pub const EXACT_LEAVE_ONE_OUT: usize = 100;

/// The knobs (unit scale) fitted without each job in turn, from the fit `fit` of all `jobs`.
fn leave_one_out(jobs: &[&Job], prior: &[f64], fit: &[f64]) -> Vec<Vec<f64>> {
    if jobs.len() <= EXACT_LEAVE_ONE_OUT {
        refits(jobs, prior, fit)
    } else {
        steps(jobs, fit)
    }
}

/// Each job left out and the rest fitted again, from `fit`.
fn refits(jobs: &[&Job], prior: &[f64], fit: &[f64]) -> Vec<Vec<f64>> {
    (0..jobs.len())
        .map(|i| {
            let rest: Vec<&Job> = jobs
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != i)
                .map(|(_, j)| *j)
                .collect();
            if rest.is_empty() {
                prior.to_vec()
            } else {
                minimize(&rest, prior, fit)
            }
        })
        .collect()
}

/// Each job left out by one Gauss-Newton step from `fit`, the fit of all of them.
fn steps(jobs: &[&Job], fit: &[f64]) -> Vec<Vec<f64>> {
    let r = residuals(jobs, fit);
    let w = weights(&r);
    let jac = jacobian(jobs, fit, &r);
    let full = curvature(&jac, &w);
    (0..jobs.len())
        .map(|i| {
            // At the fit the gradient is zero, so without job i it is minus that job's term.
            let ji: Vec<f64> = jac.iter().map(|col| col[i]).collect();
            let mut a = full.clone();
            for (p, row) in a.iter_mut().enumerate() {
                for (q, v) in row.iter_mut().enumerate() {
                    *v -= w[i] * ji[p] * ji[q];
                }
            }
            let g: Vec<f64> = ji.iter().map(|j| w[i] * r[i] * j).collect();
            match solve(&a, &g) {
                Some(step) => fit
                    .iter()
                    .zip(step)
                    .map(|(u, d)| (u + d).clamp(0.0, 1.0))
                    .collect(),
                None => fit.to_vec(),
            }
        })
        .collect()
}

/// Calibrates the fitted knobs to `jobs`, starting from and pulled toward `prior`.
pub fn calibrate(jobs: &[Job], skipped: Vec<Skipped>, prior: &Efficiency) -> Calibration {
    let u0 = to_unit(prior);
    let all: Vec<&Job> = jobs.iter().collect();
    let fit = minimize(&all, &u0, &u0);
    let sigma = posterior_sigma(&all, &fit);
    let mut lo = fit.clone();
    let mut hi = fit.clone();
    let refits = leave_one_out(&all, &u0, &fit);
    let mut held_out = Vec::with_capacity(jobs.len());
    for (job, refit) in jobs.iter().zip(&refits) {
        for k in 0..refit.len() {
            lo[k] = lo[k].min(refit[k]);
            hi[k] = hi[k].max(refit[k]);
        }
        held_out.push(job.step_s(refit) / job.observed_s - 1.0);
    }
    let efficiency = from_unit(prior, &fit);
    let value = |u: &[f64]| fitted_values(&from_unit(prior, u));
    let (values, lows, highs, priors) = (value(&fit), value(&lo), value(&hi), fitted_values(prior));
    let knobs = FITTED
        .iter()
        .enumerate()
        .map(|(k, knob)| KnobFit {
            name: knob.name.to_string(),
            value: values[k].1,
            uncertainty: sigma[k] * (knob.range.1 - knob.range.0),
            prior: priors[k].1,
            leave_one_out: (lows[k].1, highs[k].1),
            range: knob.range,
        })
        .collect();
    let jobs = jobs
        .iter()
        .zip(held_out)
        .map(|(j, held)| JobFit {
            id: j.id.clone(),
            file: j.file.clone(),
            observed_s: j.observed_s,
            prior_error: j.step_s(&u0) / j.observed_s - 1.0,
            calibrated_error: j.step_s(&fit) / j.observed_s - 1.0,
            held_out_error: held,
        })
        .collect();
    Calibration {
        knobs,
        jobs,
        skipped,
        efficiency,
    }
}

#[cfg(test)]
mod tests;
