//! Pricing runs from their own cluster's measurements beside the catalog's price: the
//! measurement files a run names (`cluster.measurements`, relative to its runs file), else the
//! `--measurements` sets whose GPU is the run's. A run with none says so; nothing measured is
//! presented for a run its measurements do not describe.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Serialize;

use super::{Choice, Run, RunPrediction, RunsFile};
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
    /// The GPU `--measurements-gpu` gives a set that names none.
    pub assumed: Option<&'static str>,
    /// The records and the reader's notes.
    pub measurements: Measurements,
}

impl MeasurementSet {
    /// Reads `path`; `assumed` (a catalog id) is the GPU of a set that states none.
    pub fn load(path: &Path, assumed: Option<&'static str>) -> Result<Self, TunerError> {
        let mut measurements = Measurements::default();
        files::read_path(path, &mut measurements)?;
        measurements.screen(0.0, None);
        let named: BTreeSet<String> = measurements
            .records
            .iter()
            .filter_map(|r| measurements.gpu_model_of(r).map(str::to_string))
            .chain(measurements.gpu_models.values().cloned())
            .collect();
        let mut gpus = BTreeSet::new();
        let mut unknown_models = BTreeSet::new();
        for name in named {
            match catalog::gpu_named(&name) {
                Some(id) => {
                    gpus.insert(id);
                }
                None => {
                    unknown_models.insert(name);
                }
            }
        }
        Ok(MeasurementSet {
            origin: path.display().to_string(),
            gpus,
            unknown_models,
            assumed,
            measurements,
        })
    }

    /// Whether the set names any GPU of its own.
    fn states_a_gpu(&self) -> bool {
        !self.gpus.is_empty() || !self.unknown_models.is_empty()
    }

    /// Whether it measured one of `accepted` (a run's GPU ids): by its own statement, else by
    /// `--measurements-gpu`.
    fn measured_one_of(&self, accepted: &[&str]) -> bool {
        if self.states_a_gpu() {
            self.gpus.iter().any(|g| accepted.contains(g))
        } else {
            self.assumed.is_some_and(|g| accepted.contains(&g))
        }
    }

    /// The records that describe a run on one of `accepted`: those of its GPU, and those that
    /// say nothing of theirs where the set names no other GPU (they are the same cluster's).
    /// Returns them with the count of records left out that named no GPU.
    fn records_for(&self, accepted: &[&str]) -> (Vec<record::Record>, usize) {
        let only_accepted =
            self.unknown_models.is_empty() && self.gpus.iter().all(|g| accepted.contains(g));
        let mut unstated_dropped = 0;
        let kept = self
            .measurements
            .records
            .iter()
            .filter(|r| match self.measurements.gpu_model_of(r) {
                Some(model) => catalog::gpu_named(model).is_some_and(|id| accepted.contains(&id)),
                None if only_accepted => true,
                None => {
                    unstated_dropped += 1;
                    false
                }
            })
            .cloned()
            .collect();
        (kept, unstated_dropped)
    }

    /// The GPUs it measured, in words.
    fn gpus_in_words(&self) -> String {
        let all: Vec<String> = self
            .gpus
            .iter()
            .map(|g| g.to_string())
            .chain(self.unknown_models.iter().cloned())
            .collect();
        match (all.is_empty(), self.assumed) {
            (false, _) => all.join(", "),
            (true, Some(g)) => format!("{g} (by --measurements-gpu)"),
            (true, None) => "no GPU it names".into(),
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
    pub choices_changed: BTreeMap<Choice, String>,
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

/// The fits of some sets for a run: the sets, the GPU priced and the one its runs file
/// names, and whether its GEMMs are fp8.
type FitsKey = (Vec<usize>, [&'static str; 2], bool);

/// Where runs find their measurements, and the fits made of them.
pub struct Serving {
    sets: Vec<MeasurementSet>,
    /// Sets from `--measurements`, which serve runs that name none of their own.
    shared: Vec<usize>,
    /// Each run's own sets, by runs file and run id.
    named: HashMap<(String, String), Vec<usize>>,
    /// By sets, GPU, and whether the GEMMs are fp8 (rowwise and tensorwise read one sweep).
    fits: HashMap<FitsKey, Rc<Fits>>,
    /// What pricing left out of the sets.
    notes: Vec<String>,
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
                            // A set a run names that names no GPU is the run's cluster's.
                            let set = MeasurementSet::load(&path, None).map_err(|e| {
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
                    if set.states_a_gpu() && !set.measured_one_of(&accepted) {
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
        let accepted = [gpu, run.cluster.gpu.as_str()];
        self.shared
            .iter()
            .copied()
            .filter(|&i| self.sets[i].measured_one_of(&accepted))
            .collect()
    }

    /// The fits of `sets` for a run priced on `gpu` whose runs file says `listed` (the two
    /// differ where the notes name a part), at `precision`, made once per combination.
    fn fits(
        &mut self,
        sets: Vec<usize>,
        gpu: &'static catalog::Gpu,
        listed: &str,
        precision: Precision,
    ) -> Rc<Fits> {
        let listed = catalog::gpu_named(listed).unwrap_or(gpu.id);
        let key = (sets, [gpu.id, listed], precision.is_fp8());
        if let Some(f) = self.fits.get(&key) {
            return Rc::clone(f);
        }
        let mut records = Vec::new();
        for &i in &key.0 {
            let set = &self.sets[i];
            let (kept, dropped) = set.records_for(&key.1);
            if dropped > 0 {
                self.notes.push(format!(
                    "{}: {dropped} records name no GPU beside records of {}; not used for {}",
                    set.origin,
                    set.gpus_in_words(),
                    gpu.id
                ));
            }
            records.extend(kept);
        }
        let dtype = match precision {
            Precision::Bf16 => record::Dtype::Bf16,
            Precision::Fp8 | Precision::Fp8Rowwise | Precision::Fp8Blockwise => {
                record::Dtype::Fp8E4m3
            }
        };
        let peak = match (precision, gpu.fp8_flops) {
            (Precision::Fp8 | Precision::Fp8Rowwise | Precision::Fp8Blockwise, Some(f)) => f,
            _ => gpu.bf16_flops,
        };
        let opts = FitOptions {
            gemm_dtype: dtype,
            attention_peak_flops: Some(gpu.bf16_flops),
            ..FitOptions::default()
        };
        let fits = Rc::new(fit_all(&records, peak, &opts));
        let sets: Vec<&str> = key
            .0
            .iter()
            .map(|&i| self.sets[i].origin.as_str())
            .collect();
        for r in &fits.refused {
            self.notes
                .push(format!("{}: refused for {}: {r}", sets.join(", "), gpu.id));
        }
        if let Some(record::Dtype::Fp16) = fits.gemm_table_dtype {
            self.notes.push(format!(
                "{}: GEMMs priced from the fp16 sweep for {} (no bf16 GEMM measured; one \
                 tensor-core rate)",
                sets.join(", "),
                gpu.id
            ));
        }
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
        let fits = self.fits(sets, part, &run.cluster.gpu, precision);
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
                    .map(|(k, v)| (*k, v.clone()))
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
                    if !s.states_a_gpu() && s.assumed.is_none() {
                        "; pass --measurements-gpu for a set that names none"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }

    /// The reader's notes of every set, by set, and what pricing left out.
    pub fn set_notes(&self) -> Vec<String> {
        self.sets
            .iter()
            .flat_map(|s| s.measurements.notes.iter().cloned())
            .chain(self.notes.iter().cloned())
            .collect()
    }
}
