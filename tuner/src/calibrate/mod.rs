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

mod fit;
pub mod profile;

use std::rc::Rc;

use serde::Serialize;

use crate::catalog::efficiency::FITTED;
use crate::catalog::Efficiency;
use crate::cost::Scenario;
use crate::fit::Fits;
use crate::mesh::Mesh;
use crate::validate::fitting::{fitted_values, from_unit, to_unit};
use crate::validate::measured::Serving;
use crate::validate::{self, RunsFile, Skipped};

/// The model's typical |log error| on runs it was not fitted to, the scale of a job's
/// residual: the median over sources of leave-one-source-out (4.1%, `docs/validation.md`,
/// "Each source held out of the fit"), rounded up.
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
    /// How it is priced: from which measurements, or the catalog and why.
    pub pricing: Pricing,
}

/// How a job is priced.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pricing {
    /// From these measurement sets where they price a term, the catalog elsewhere.
    Measured(Vec<String>),
    /// From the catalog alone, and why (no measurements given, none of the job's GPU, ...).
    Nominal(String),
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
            let found = match (&mut serving, &nominal) {
                (Some(s), Ok((p, _, _))) => s.fits_for(file, run, &p.gpu, p.precision),
                _ => Err("no measurements given".to_string()),
            };
            let (fits, pricing) = match found {
                Ok((f, sets)) => (Some(f), Pricing::Measured(sets)),
                Err(why) => (None, Pricing::Nominal(why)),
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
                    pricing,
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

impl Job {
    /// The job's log error in units of [`ERROR_SCALE`].
    fn residual(&self, u: &[f64]) -> f64 {
        self.log_error(u) / ERROR_SCALE
    }
}

/// The scaled residuals of `jobs` at `u`.
fn residuals<'a>(jobs: &'a [&'a Job]) -> impl Fn(&[f64]) -> Vec<f64> + 'a {
    move |u: &[f64]| jobs.iter().map(|j| j.residual(u)).collect()
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
    /// How it was priced.
    pub pricing: Pricing,
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
    /// Jobs priced from their measurements.
    pub fn measured_jobs(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| matches!(j.pricing, Pricing::Measured(_)))
            .count()
    }

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

/// Up to this many jobs each leave-one-job-out fit is a fit of its own; past it, one
/// Gauss-Newton step from the full fit without the job's residual (the approximate
/// leave-one-out of Rad and Maleki 2020, exact to first order), which keeps the cost linear in
/// the jobs: 720 of vTrain's runs priced from their lookup tables take 5 minutes refitted,
/// seconds stepped.
pub const EXACT_LEAVE_ONE_OUT: usize = 100;

/// The knobs (unit scale) fitted without each job in turn, from the fit `fit` of all `jobs`.
fn leave_one_out(jobs: &[&Job], prior: &[f64], fit: &[f64]) -> Vec<Vec<f64>> {
    let f = residuals(jobs);
    if jobs.len() <= EXACT_LEAVE_ONE_OUT {
        fit::refits(&f, jobs.len(), prior, fit)
    } else {
        fit::steps(&f, prior, fit)
    }
}

/// Calibrates the fitted knobs to `jobs`, starting from and pulled toward `prior`.
pub fn calibrate(jobs: &[Job], skipped: Vec<Skipped>, prior: &Efficiency) -> Calibration {
    let u0 = to_unit(prior);
    let all: Vec<&Job> = jobs.iter().collect();
    let fit = fit::minimize(&residuals(&all), &u0, &u0);
    let sigma = fit::posterior_sigma(&residuals(&all), &fit);
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
            pricing: j.pricing.clone(),
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
