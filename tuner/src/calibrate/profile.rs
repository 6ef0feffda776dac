//! The calibration profile: versioned YAML with the knobs a cluster's jobs calibrated, the jobs
//! they came from and how well the knobs price them, which `recommend`, `explain`, `compare`
//! and `validate` read with `--profile`.

use serde::{Deserialize, Serialize};

use super::{
    Calibration, JobFit, KnobFit, Pricing, ERROR_SCALE, EXACT_LEAVE_ONE_OUT, HUBER, PRIOR_WIDTH,
};
use crate::catalog::efficiency::FITTED;
use crate::catalog::Efficiency;
use crate::error::{bad_input, TunerError};

/// The profile format this tuner writes and the newest it reads.
pub const PROFILE_VERSION: u32 = 1;

/// How the knobs were fitted, so that a reader can weigh them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Method {
    /// The prior: the catalog's values.
    pub prior: String,
    /// Log error a job's residual is measured in ([`ERROR_SCALE`]).
    pub error_scale: f64,
    /// Residual, in those units, past which a job's pull stops growing ([`HUBER`]).
    pub huber: f64,
    /// Prior width, a share of each knob's range ([`PRIOR_WIDTH`]).
    pub prior_width: f64,
    /// How each job was held out: a fit of the others, or one Gauss-Newton step from the fit
    /// of all (past [`EXACT_LEAVE_ONE_OUT`] jobs).
    pub leave_one_out: String,
    /// How the jobs were priced: how many from their measurements, the rest from the catalog.
    pub pricing: String,
}

/// Median |error| of the jobs three ways.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scores {
    /// Jobs calibrated on.
    pub jobs: usize,
    /// At the catalog's knobs.
    pub prior_median_abs_error: f64,
    /// At the calibrated knobs (in sample).
    pub calibrated_median_abs_error: f64,
    /// Each job at knobs calibrated without it.
    pub leave_one_job_out_median_abs_error: f64,
}

/// A calibration profile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Format version ([`PROFILE_VERSION`]).
    pub profile_version: u32,
    /// What wrote it.
    pub created_by: String,
    /// The jobs files calibrated on.
    pub jobs_files: Vec<String>,
    /// The measurement files the jobs were priced from, if any.
    pub measurements: Vec<String>,
    /// How the knobs were fitted.
    pub method: Method,
    /// The scores.
    pub scores: Scores,
    /// The calibrated knobs.
    pub knobs: Vec<KnobFit>,
    /// Every job, with its errors.
    pub jobs: Vec<JobFit>,
}

/// The version field alone, read before the rest so that a newer profile is named as such.
#[derive(Deserialize)]
struct VersionOnly {
    profile_version: Option<u32>,
}

impl Profile {
    /// The profile of a calibration of `jobs_files` priced from `measurements`.
    pub fn new(c: &Calibration, jobs_files: Vec<String>) -> Profile {
        let (prior, calibrated, held_out) = c.medians();
        let mut measurements: Vec<String> = c
            .jobs
            .iter()
            .filter_map(|j| match &j.pricing {
                Pricing::Measured(sets) => Some(sets.iter().cloned()),
                Pricing::Nominal(_) => None,
            })
            .flatten()
            .collect();
        measurements.sort();
        measurements.dedup();
        Profile {
            profile_version: PROFILE_VERSION,
            created_by: format!("tuner {} calibrate", env!("CARGO_PKG_VERSION")),
            jobs_files,
            measurements,
            method: Method {
                prior: "catalog".into(),
                error_scale: ERROR_SCALE,
                huber: HUBER,
                prior_width: PRIOR_WIDTH,
                leave_one_out: if c.jobs.len() <= EXACT_LEAVE_ONE_OUT {
                    "each job's knobs fitted to the other jobs".into()
                } else {
                    "one Gauss-Newton step from the fit of every job, without the job".into()
                },
                pricing: format!(
                    "{} of {} jobs priced from their measurements, the rest from the catalog",
                    c.measured_jobs(),
                    c.jobs.len()
                ),
            },
            scores: Scores {
                jobs: c.jobs.len(),
                prior_median_abs_error: prior,
                calibrated_median_abs_error: calibrated,
                leave_one_job_out_median_abs_error: held_out,
            },
            knobs: c.knobs.clone(),
            jobs: c.jobs.clone(),
        }
    }

    /// Reads a profile; `origin` names it in errors. A newer version, an unknown knob or a
    /// value outside its range is refused by name.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, TunerError> {
        let version: VersionOnly = crate::input::yaml(text, origin, crate::input::PROFILE)?;
        match version.profile_version {
            Some(v) if v > PROFILE_VERSION => {
                return Err(bad_input(
                    &format!("{origin}: profile_version"),
                    v,
                    &format!(
                        "{PROFILE_VERSION} or older: the profile was written by a newer tuner"
                    ),
                ))
            }
            Some(v) if v >= 1 => {}
            other => {
                return Err(bad_input(
                    &format!("{origin}: profile_version"),
                    other.map_or("none".to_string(), |v| v.to_string()),
                    &format!("1 to {PROFILE_VERSION} (a file `tuner calibrate -o` wrote)"),
                ))
            }
        }
        let p: Profile = crate::input::yaml(text, origin, crate::input::PROFILE)?;
        for k in &p.knobs {
            let Some(knob) = FITTED.iter().find(|f| f.name == k.name) else {
                return Err(bad_input(
                    &format!("{origin}: knobs.{}", k.name),
                    &k.name,
                    &format!(
                        "one of {}",
                        FITTED.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
                    ),
                ));
            };
            let (lo, hi) = knob.range;
            if !(k.value.is_finite() && (lo..=hi).contains(&k.value)) {
                return Err(bad_input(
                    &format!("{origin}: knobs.{}.value", k.name),
                    k.value,
                    &format!("{lo:e} to {hi:e}"),
                ));
            }
        }
        Ok(p)
    }

    /// `base` with the profile's knobs.
    pub fn apply(&self, base: &Efficiency) -> Efficiency {
        let mut e = base.clone();
        for k in &self.knobs {
            if let Some(knob) = FITTED.iter().find(|f| f.name == k.name) {
                *(knob.field)(&mut e) = k.value;
            }
        }
        e
    }

    /// Jobs priced from their measurements.
    pub fn measured_jobs(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| matches!(j.pricing, Pricing::Measured(_)))
            .count()
    }

    /// The note that says a price used it.
    pub fn note(&self, origin: &str) -> String {
        let moved: Vec<String> = self
            .knobs
            .iter()
            .filter(|k| (k.value - k.prior).abs() > 1e-12 * k.prior.abs().max(1e-30))
            .map(|k| format!("{} {:.4e} (catalog {:.4e})", k.name, k.value, k.prior))
            .collect();
        format!(
            "priced with profile {origin}: knobs calibrated to {} jobs of {} ({}; held out one at a time, median |error| {:.1}% where the catalog's is {:.1}%)",
            self.scores.jobs,
            self.jobs_files.join(", "),
            if moved.is_empty() {
                "none moved from the catalog".to_string()
            } else {
                moved.join(", ")
            },
            100.0 * self.scores.leave_one_job_out_median_abs_error,
            100.0 * self.scores.prior_median_abs_error
        ) + &match self.measured_jobs() {
            0 => String::new(),
            n => format!(
                "; {n} of its {} jobs were priced from their measurements ({}), so its knobs \
                 fit those figures: price with the same measurements",
                self.jobs.len(),
                self.measurements.join(", ")
            ),
        }
    }
}

/// Reads the profile at `path`.
pub fn load(path: &std::path::Path) -> Result<Profile, TunerError> {
    let text = crate::input::read_text(path, crate::input::PROFILE)?;
    Profile::parse(&text, &path.display().to_string())
}
