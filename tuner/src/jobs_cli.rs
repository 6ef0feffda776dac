//! The commands of a cluster's own jobs: `jobs-from-logs` writes runs from training logs and
//! `calibrate` refits the fitted knobs to them into a profile.

use std::path::PathBuf;

use clap::Args;

use crate::measure_args::measurements_gpu_id;
use crate::render::{render, Format, Output};
use record::manual;
use tuner::calibrate::{self, profile::Profile};
use tuner::catalog::NOMINAL;
use tuner::report::table;
use tuner::validate::measured::Serving;

/// `tuner jobs-from-logs`.
#[derive(Debug, Args)]
pub struct JobsFromLogsArgs {
    /// Training logs, one run each (id from the file stem).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write the runs file here instead of stdout.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// GPU catalog id (`tuner clusters` lists the parts), where a log does not say.
    #[arg(long)]
    gpu: Option<String>,
    /// GPUs of each job, where a log does not say.
    #[arg(long)]
    gpus: Option<u32>,
    /// GPUs per node, where a log does not say.
    #[arg(long)]
    gpus_per_node: Option<u32>,
    /// Scale-out NICs per node.
    #[arg(long)]
    nics_per_node: Option<u32>,
    /// Line rate of one NIC, Gbit/s.
    #[arg(long, allow_negative_numbers = true)]
    nic_gbps: Option<f64>,
    /// Global batch in sequences, where a log does not say.
    #[arg(long)]
    global_batch: Option<u32>,
    /// Iteration lines to drop as warm-up (default: the first 10%, at least 2).
    #[arg(long)]
    warmup: Option<usize>,
    /// The runs' group (default: jobs-<file stem>).
    #[arg(long)]
    group: Option<String>,
}

impl JobsFromLogsArgs {
    pub fn run(self) -> anyhow::Result<Output> {
        let o = tuner::jobs::Overrides {
            gpu: self.gpu,
            gpus: self.gpus,
            gpus_per_node: self.gpus_per_node,
            nics_per_node: self.nics_per_node,
            nic_gbps: self.nic_gbps,
            global_batch: self.global_batch,
            warmup: self.warmup,
            group: self.group,
        };
        let paths: Vec<&std::path::Path> = self.files.iter().map(PathBuf::as_path).collect();
        let (yaml, mut notes) = tuner::jobs::jobs_from_logs(&paths, &o).map_err(|e| {
            if e.is_usage() {
                manual::usage(e)
            } else {
                anyhow::Error::from(e)
            }
        })?;
        let data = match self.output {
            Some(path) => {
                tuner::output::write_atomically(&path, yaml.as_bytes())?;
                notes.push(format!(
                    "wrote {} ({} runs)",
                    path.display(),
                    self.files.len()
                ));
                String::new()
            }
            None => yaml,
        };
        Ok(Output {
            data,
            notes,
            ..Output::default()
        })
    }
}

/// `tuner calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The cluster's jobs: runs files (format 1), such as `jobs-from-logs` writes.
    #[arg(long, num_args = 1.., required = true)]
    runs: Vec<PathBuf>,
    /// Measurements of the cluster, which price each job on its GPU beside the knobs (runs
    /// may also name their own in `cluster.measurements`).
    #[arg(long, num_args = 1..)]
    measurements: Vec<PathBuf>,
    /// The GPU (catalog id) of `--measurements` sets that name none.
    #[arg(long, requires = "measurements")]
    measurements_gpu: Option<String>,
    /// Where to write the profile (YAML).
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// What to print: the knobs and scores as a table, or the profile as JSON or YAML.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl CalibrateArgs {
    pub fn run(self) -> anyhow::Result<Output> {
        let files = tuner::validate::read_runs(&self.runs)?;
        let assumed = measurements_gpu_id(self.measurements_gpu.as_deref())?;
        let mut serving = Serving::load(&files, &self.measurements, assumed)?;
        let serving = serving.any().then_some(&mut serving);
        let (jobs, skipped) = calibrate::jobs(&files, &NOMINAL, serving);
        if jobs.is_empty() {
            anyhow::bail!(
                "no job could be priced: {}",
                skipped
                    .iter()
                    .map(|s| format!("{}: {}", s.id, s.reason))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        let c = calibrate::calibrate(&jobs, skipped, &NOMINAL);
        let names = |p: &[PathBuf]| p.iter().map(|p| p.display().to_string()).collect();
        let profile = Profile::new(&c, names(&self.runs));
        let yaml = serde_saphyr::to_string(&profile)?;
        tuner::output::write_atomically(&self.output, yaml.as_bytes())?;
        let mut notes: Vec<String> = c
            .skipped
            .iter()
            .map(|s| format!("job {} not priced: {}", s.id, s.reason))
            .collect();
        notes.extend(c.jobs.iter().filter_map(|j| match &j.pricing {
            calibrate::Pricing::Nominal(why) if !self.measurements.is_empty() => {
                Some(format!("job {} priced from the catalog: {why}", j.id))
            }
            _ => None,
        }));
        notes.push(format!(
            "wrote {} ({} jobs); recommend, explain, compare and validate read it with --profile",
            self.output.display(),
            c.jobs.len()
        ));
        let data = render(self.format, &profile, || table::calibration(&profile))?;
        Ok(Output {
            data,
            notes,
            ..Output::default()
        })
    }
}
