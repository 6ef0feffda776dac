//! Pricing runs from their own cluster's measurements beside the catalog's price: the
//! measurement files a run names (`cluster.measurements`, relative to its runs file), else the
//! `--measurements` sets whose GPU is the run's. A run with none says so; nothing measured is
//! presented for a run its measurements do not describe.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Serialize;

use super::{Run, RunPrediction, RunsFile};
use crate::catalog::{self, Efficiency};
use crate::cost::timing::Breakdown;
use crate::cost::Scenario;
use crate::error::{bad_input, TunerError};
use crate::fit::{fit_all, FitOptions, Fits};
use crate::ingest::{files, Measurements};
use crate::mesh::Precision;

/// The measurements of one path (a file or a directory of them).
#[derive(Debug)]
pub struct MeasurementSet {
    /// The path as given, for reports.
    pub origin: String,
    /// The catalog GPUs the set says it measured (by NVML model name or catalog id); empty
    /// when it says none.
    pub gpus: BTreeSet<&'static str>,
    /// Model names the set states that the catalog does not know.
    pub unknown_models: BTreeSet<String>,
    /// The records and the reader's notes.
    pub measurements: Measurements,
}

/// The catalog GPU a name denotes: a catalog id, or an NVML model name.
fn gpu_named(name: &str) -> Option<&'static str> {
    catalog::gpu(name)
        .ok()
        .or_else(|| catalog::gpu_for_model_name(name))
        .map(|g| g.id)
}

impl MeasurementSet {
    /// Reads `path`; `assumed_gpu` (a catalog id) is the GPU of a set that states none.
    pub fn load(path: &Path, assumed_gpu: Option<&'static str>) -> Result<Self, TunerError> {
        let mut measurements = Measurements::default();
        files::read_path(path, &mut measurements)?;
        measurements.screen(0.0, None);
        let named: BTreeSet<String> = measurements
            .gpu_models
            .values()
            .cloned()
            .chain(
                measurements
                    .records
                    .iter()
                    .filter_map(|r| r.detail.gpu_model.clone()),
            )
            .collect();
        let mut gpus = BTreeSet::new();
        let mut unknown_models = BTreeSet::new();
        for name in named {
            match gpu_named(&name) {
                Some(id) => {
                    gpus.insert(id);
                }
                None => {
                    unknown_models.insert(name);
                }
            }
        }
        if gpus.is_empty() && unknown_models.is_empty() {
            gpus.extend(assumed_gpu);
        }
        Ok(MeasurementSet {
            origin: path.display().to_string(),
            gpus,
            unknown_models,
            measurements,
        })
    }

    /// The GPUs it measured, in words.
    fn gpus_in_words(&self) -> String {
        let all: Vec<String> = self
            .gpus
            .iter()
            .map(|g| g.to_string())
            .chain(self.unknown_models.iter().cloned())
            .collect();
        if all.is_empty() {
            "no GPU it names".into()
        } else {
            all.join(", ")
        }
    }
}

/// A run priced from its measurements.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredPrediction {
    /// Predicted seconds per iteration.
    pub predicted_iteration_time_s: f64,
    /// predicted / observed - 1.
    pub error: f64,
    /// The step term by term.
    pub breakdown: Breakdown,
    /// The terms the measurements moved by more than 1% of the nominal step, largest first.
    pub changed: Vec<TermChange>,
    /// What each class of kernel and collective was priced from, with examples of the calls
    /// past the measurements where only part of a class was measured.
    pub priced_from: Vec<String>,
    /// The same without the examples, for counting runs alike.
    #[serde(skip)]
    pub priced_from_summary: Vec<String>,
    /// Unpublished knobs chosen otherwise than in the nominal price.
    pub choices_changed: BTreeMap<String, String>,
    /// The measurement sets used.
    pub measurements: Vec<String>,
}

/// One term, nominal and measured.
#[derive(Debug, Clone, Serialize)]
pub struct TermChange {
    /// The term's name.
    pub term: &'static str,
    /// Its exposed seconds in the nominal price.
    pub nominal_s: f64,
    /// Its exposed seconds in the measured price.
    pub measured_s: f64,
}

impl TermChange {
    /// `tp_comm 12.1 -> 19.5 ms (+61%)`.
    pub fn describe(&self) -> String {
        let ms = |s: f64| s * 1e3;
        let change = if self.nominal_s > 0.0 {
            format!(
                " ({:+.0}%)",
                (self.measured_s / self.nominal_s - 1.0) * 100.0
            )
        } else {
            String::new()
        };
        format!(
            "{} {:.1} -> {:.1} ms{change}",
            self.term,
            ms(self.nominal_s),
            ms(self.measured_s)
        )
    }
}

/// The terms of `measured` that differ from `nominal` by more than 1% of the nominal step.
fn changes(nominal: &Breakdown, measured: &Breakdown) -> Vec<TermChange> {
    let step = nominal.step_time_s();
    let mut out: Vec<TermChange> = nominal
        .terms()
        .iter()
        .zip(measured.terms())
        .filter(|((_, a), (_, b))| (a.exposed_s - b.exposed_s).abs() > 0.01 * step)
        .map(|((k, a), (_, b))| TermChange {
            term: k.name(),
            nominal_s: a.exposed_s,
            measured_s: b.exposed_s,
        })
        .collect();
    out.sort_by(|a, b| {
        (b.measured_s - b.nominal_s)
            .abs()
            .total_cmp(&(a.measured_s - a.nominal_s).abs())
    });
    out
}

/// Where runs find their measurements, and the fits made of them.
pub struct Serving {
    sets: Vec<MeasurementSet>,
    /// Sets from `--measurements`, which serve runs that name none of their own.
    shared: Vec<usize>,
    /// Each run's own sets, by runs file and run id.
    named: HashMap<(String, String), Vec<usize>>,
    /// By sets, GPU, and whether the GEMMs are fp8 (rowwise and tensorwise read one sweep).
    fits: HashMap<(Vec<usize>, &'static str, bool), Rc<Fits>>,
    /// What the user must be told about the sets.
    pub notes: Vec<String>,
}

/// What one run gets.
pub enum Served {
    /// Its measurements, priced.
    Priced(Box<MeasuredPrediction>),
    /// None: the reason, for its row.
    Without(String),
}

impl Serving {
    /// Loads the `--measurements` sets (`assumed_gpu` for those that name no GPU) and every
    /// set a run of `files` names. A run's own set that measured another GPU than the run's is
    /// refused by run, field and file.
    pub fn load(
        files: &[RunsFile],
        shared: &[PathBuf],
        assumed_gpu: Option<&'static str>,
    ) -> Result<Serving, TunerError> {
        let mut s = Serving {
            sets: Vec::new(),
            shared: Vec::new(),
            named: HashMap::new(),
            fits: HashMap::new(),
            notes: Vec::new(),
        };
        for path in shared {
            s.sets.push(MeasurementSet::load(path, assumed_gpu)?);
            s.shared.push(s.sets.len() - 1);
        }
        let mut by_path: HashMap<PathBuf, usize> = HashMap::new();
        for file in files {
            let base = Path::new(&file.origin)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            for run in &file.runs {
                let gpu = super::choices::gpu_named_in_notes(run).unwrap_or(&run.cluster.gpu);
                let accepted = [gpu, run.cluster.gpu.as_str()];
                let mut own = Vec::new();
                for (i, p) in run.cluster.measurements.iter().enumerate() {
                    let field = format!("runs[{}].cluster.measurements[{i}]", run.id);
                    let path = base.join(p);
                    let idx = match by_path.get(&path) {
                        Some(&i) => i,
                        None => {
                            let run_gpu = catalog::gpu(gpu)
                                .map_err(|_| {
                                    bad_input(&field, p, "a set for a GPU the catalog knows")
                                })?
                                .id;
                            let set = MeasurementSet::load(&path, Some(run_gpu)).map_err(|e| {
                                bad_input(
                                    &field,
                                    p,
                                    &format!("a measurement file or directory it can read ({e})"),
                                )
                            })?;
                            s.sets.push(set);
                            by_path.insert(path.clone(), s.sets.len() - 1);
                            s.sets.len() - 1
                        }
                    };
                    let set = &s.sets[idx];
                    if !set.gpus.iter().any(|g| accepted.contains(g)) {
                        return Err(bad_input(
                            &field,
                            format!("{p}, which measured {}", set.gpus_in_words()),
                            &format!("measurements of the run's GPU, {gpu}"),
                        ));
                    }
                    own.push(idx);
                }
                if !own.is_empty() {
                    s.named.insert((file.origin.clone(), run.id.clone()), own);
                }
            }
        }
        Ok(s)
    }

    /// Whether any run could be priced from measurements.
    pub fn any(&self) -> bool {
        !self.sets.is_empty()
    }

    /// The sets that serve `run` of `file` priced on `gpu`.
    fn sets_for(&self, file: &RunsFile, run: &Run, gpu: &str) -> Vec<usize> {
        if let Some(own) = self.named.get(&(file.origin.clone(), run.id.clone())) {
            return own.clone();
        }
        self.shared
            .iter()
            .copied()
            .filter(|&i| {
                let g = &self.sets[i].gpus;
                g.contains(gpu) || g.contains(run.cluster.gpu.as_str())
            })
            .collect()
    }

    /// The fits of `sets` for a run on `gpu` at `precision`, made once per combination.
    fn fits(
        &mut self,
        sets: Vec<usize>,
        gpu: &'static catalog::Gpu,
        precision: Precision,
    ) -> Rc<Fits> {
        let key = (sets, gpu.id, precision.is_fp8());
        if let Some(f) = self.fits.get(&key) {
            return Rc::clone(f);
        }
        let mut records = Vec::new();
        for &i in &key.0 {
            let set = &self.sets[i];
            // A set of several GPUs serves a run with the records of its GPU and those that
            // say nothing of theirs.
            records.extend(
                set.measurements
                    .records
                    .iter()
                    .filter(|r| {
                        r.detail
                            .gpu_model
                            .as_deref()
                            .is_none_or(|m| gpu_named(m) == Some(gpu.id))
                    })
                    .cloned(),
            );
        }
        let dtype = match precision {
            Precision::Bf16 => record::Dtype::Bf16,
            Precision::Fp8 | Precision::Fp8Rowwise => record::Dtype::Fp8E4m3,
        };
        let peak = match (precision, gpu.fp8_flops) {
            (Precision::Fp8 | Precision::Fp8Rowwise, Some(f)) => f,
            _ => gpu.bf16_flops,
        };
        let opts = FitOptions {
            gemm_dtype: dtype,
            ..FitOptions::default()
        };
        let fits = Rc::new(fit_all(&records, peak, &opts));
        self.fits.insert(key, Rc::clone(&fits));
        fits
    }

    /// The fits of the measurements that serve `run` of `file`, priced on `gpu` at
    /// `precision`, with the sets' names; or why there are none that price anything.
    pub fn fits_for(
        &mut self,
        file: &RunsFile,
        run: &Run,
        gpu: &str,
        precision: Precision,
    ) -> Result<(Rc<Fits>, Vec<String>), String> {
        let sets = self.sets_for(file, run, gpu);
        if sets.is_empty() {
            return Err(format!("no measurements of {gpu}"));
        }
        let Ok(part) = catalog::gpu(gpu) else {
            return Err(format!("{gpu} is not in the catalog"));
        };
        let names: Vec<String> = sets.iter().map(|&i| self.sets[i].origin.clone()).collect();
        let fits = self.fits(sets, part, precision);
        let usable = fits.fleet.iter().any(|f| f.unusable().is_none())
            || fits.gemm_table.is_some()
            || fits.attention_table.is_some()
            || fits.fleet_memory.is_some()
            || fits.fleet_nic.is_some();
        if !usable {
            return Err(format!(
                "{} hold nothing that prices a term",
                names.join(", ")
            ));
        }
        Ok((fits, names))
    }

    /// Prices `run` of `file` from its measurements, beside its nominal prediction.
    pub fn price(
        &mut self,
        file: &RunsFile,
        run: &Run,
        nominal: &RunPrediction,
        efficiency: &Efficiency,
    ) -> Served {
        let (fits, names) = match self.fits_for(file, run, &nominal.gpu, nominal.precision) {
            Ok(found) => found,
            Err(why) => return Served::Without(why),
        };
        let priced = super::price(run, efficiency, &|model, training, cluster, gpus, eff| {
            Scenario::measured(model, training, cluster, gpus, eff, &fits)
        });
        match priced {
            Ok((p, scenario, mesh)) => {
                let coverage = scenario.coverage(&mesh);
                let choices_changed = p
                    .choices
                    .iter()
                    .filter(|(k, v)| nominal.choices.get(*k) != Some(v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                Served::Priced(Box::new(MeasuredPrediction {
                    predicted_iteration_time_s: p.predicted_iteration_time_s,
                    error: p.error,
                    changed: changes(&nominal.breakdown, &p.breakdown),
                    breakdown: p.breakdown,
                    priced_from: coverage.iter().map(|c| c.line()).collect(),
                    priced_from_summary: coverage.iter().map(|c| c.summary()).collect(),
                    choices_changed,
                    measurements: names,
                }))
            }
            Err(e) => Served::Without(format!("measured price failed: {e}")),
        }
    }

    /// Notes on sets that served no run.
    pub fn unused(&self, served: &BTreeSet<String>) -> Vec<String> {
        self.shared
            .iter()
            .map(|&i| &self.sets[i])
            .filter(|s| !served.contains(&s.origin))
            .map(|s| {
                format!(
                    "{} ({}) served no run: --measurements serves runs on the GPU it measured{}",
                    s.origin,
                    s.gpus_in_words(),
                    if s.gpus.is_empty() && s.unknown_models.is_empty() {
                        "; pass --measurements-gpu for a set that names none"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }

    /// The reader's notes of every set, by set.
    pub fn set_notes(&self) -> Vec<String> {
        self.sets
            .iter()
            .flat_map(|s| s.measurements.notes.iter().cloned())
            .collect()
    }
}
