//! Command line: flags, defaults, and one place that writes output.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use tuner::catalog::{self, Arch, Cluster, NOMINAL, PRIOR};
use tuner::cost::{Evaluation, Scenario};
use tuner::mesh::{
    FlashKernel, Framework, LossKernel, MoeDispatch, Precision, Recompute, ReduceDtype, Training,
};
use tuner::report::doc::{Document, MeshDoc};
use tuner::report::listing::{ClusterList, ModelList};
use tuner::report::{explain, launch, table};
use tuner::search::{self, Constraints};
use tuner::validate;

use tuner::measure::Priced;

use crate::exit::{bad_flag, from_flags, EXIT_STATUS};
use crate::jobs_cli;
use crate::measure_args::{self, MeasureArgs};
use crate::render::{render, Format, Output};
use record::manual;

/// Ranks hybrid-parallel training layouts (DP x TP x PP x CP x EP, ZeRO, microbatches,
/// recomputation) for a model on a GPU cluster.
#[derive(Debug, Parser)]
#[command(name = "tuner", version, max_term_width = 100, after_help = EXIT_STATUS)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Rank every valid layout for a model and GPU count.
    Recommend {
        #[command(flatten)]
        job: JobArgs,
        #[command(flatten)]
        mesh: MeshArgs,
        #[command(flatten)]
        measure: MeasureArgs,
        /// Rank with catalog figures too and show what the measurements changed.
        #[arg(long)]
        compare_nominal: bool,
        /// How many layouts to print.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Print the launch configuration of the best layout instead of the ranking.
        #[arg(long, value_enum)]
        emit: Option<Emit>,
    },
    /// Price one layout term by term; say why it is impossible if it is.
    Explain {
        #[command(flatten)]
        job: JobArgs,
        #[command(flatten)]
        mesh: MeshArgs,
        #[command(flatten)]
        measure: MeasureArgs,
        /// Print the launch configuration of the layout instead of the breakdown.
        #[arg(long, value_enum)]
        emit: Option<Emit>,
    },
    /// Set two layouts side by side, term by term.
    Compare {
        #[command(flatten)]
        job: JobArgs,
        #[command(flatten)]
        measure: MeasureArgs,
        /// First layout, e.g. `tp=8,pp=8,dp=8,mb=1,v=1,zero=1,recompute=selective,sp=true`.
        #[arg(long)]
        a: String,
        /// Second layout, same syntax.
        #[arg(long)]
        b: String,
    },
    /// Predict published runs and score the predictions.
    Validate {
        /// Runs files (format 1), such as data/published-runs.yaml data/more-runs.yaml.
        #[arg(long, num_args = 1.., required = true)]
        runs: Vec<PathBuf>,
        /// Print the summaries only, not one row per run.
        #[arg(long)]
        summary: bool,
        /// Refit the fitted efficiencies to these runs and score with the refit.
        #[arg(long)]
        fit: bool,
        /// Refit the fitted efficiencies without each source in turn and score that source.
        #[arg(long, conflicts_with = "fit")]
        leave_one_source_out: bool,
        /// Price every run also from measurements: these files or directories serve each run
        /// on the GPU they measured that names no `cluster.measurements` of its own.
        #[arg(long, num_args = 1.., conflicts_with = "leave_one_source_out")]
        measurements: Vec<PathBuf>,
        /// The GPU (catalog id) of `--measurements` sets that name none (CSV tables, JSON
        /// lines and logs without a device list).
        #[arg(long, requires = "measurements")]
        measurements_gpu: Option<String>,
        /// A calibration profile (`tuner calibrate -o`): its knobs in place of the catalog's.
        #[arg(long, conflicts_with_all = ["fit", "leave_one_source_out"])]
        profile: Option<PathBuf>,
        /// Output format; JSON and YAML documents start with `schema_version` (now 1).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Write a runs file (format 1, as `validate --runs` reads) from training logs: Megatron-LM,
    /// Megatron-DeepSpeed, NeMo, Megatron-Bridge, torchtitan, DeepSpeed. One run per log.
    JobsFromLogs(jobs_cli::JobsFromLogsArgs),
    /// Refit the fitted knobs to a cluster's own jobs (runs files, as `jobs-from-logs` writes
    /// them) with the catalog as the prior, and write the profile `--profile` reads.
    Calibrate(jobs_cli::CalibrateArgs),
    /// Fit latency/bandwidth curves and GEMM efficiency to measurements and show them.
    Fit {
        #[command(flatten)]
        measure: MeasureArgs,
        /// Cluster preset whose datasheet GEMM peak the efficiencies are against.
        #[arg(long, default_value = "dgx-h100")]
        cluster: String,
        /// Write a plot (.svg or .png): measured points, fitted curve and nominal line per collective.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Output format; JSON and YAML documents start with `schema_version` (now 1).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Save the agents' measurements from Prometheus as a snapshot file for offline use.
    Snapshot {
        #[command(flatten)]
        measure: MeasureArgs,
        /// Where to write the snapshot.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
    /// List the catalog models and aliases.
    Models {
        /// Output format; JSON and YAML documents start with `schema_version` (now 1).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// List the cluster presets.
    Clusters {
        /// Output format; JSON and YAML documents start with `schema_version` (now 1).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Print a shell completion script, e.g. `tuner completions bash > /etc/bash_completion.d/tuner`.
    Completions {
        /// The shell.
        shell: manual::Shell,
    },
    /// Print the man page (roff), e.g. `tuner man > /usr/local/share/man/man1/tuner.1`.
    Man {
        /// Write tuner.1 and one page per subcommand (tuner-recommend.1, ...) into this
        /// directory instead.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Emit {
    Megatron,
    Deepspeed,
    Torchtitan,
}

impl Emit {
    /// The flag value, as clap spells it.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// The framework whose launch config this is, and so whose runtime is priced.
    fn framework(self) -> Framework {
        match self {
            Emit::Megatron => Framework::Megatron,
            Emit::Deepspeed => Framework::Deepspeed,
            Emit::Torchtitan => Framework::Fsdp,
        }
    }
}

/// What the job is: model, scale, cluster, training inputs.
#[derive(Debug, Args)]
struct JobArgs {
    /// Catalog model, alias (`70b`) or YAML file.
    #[arg(long)]
    model: String,
    /// GPUs for the job.
    #[arg(long, allow_negative_numbers = true)]
    gpus: i64,
    /// Cluster preset (see `tuner clusters`).
    #[arg(long, default_value = "dgx-h100")]
    cluster: String,
    /// Override the preset's GPUs per node.
    #[arg(long)]
    gpus_per_node: Option<u32>,
    /// Override the preset's NICs per node.
    #[arg(long)]
    nics_per_node: Option<u32>,
    /// Override the preset's NIC line rate, Gbit/s.
    #[arg(long, allow_negative_numbers = true)]
    nic_gbps: Option<f64>,
    /// Sequence length (default: the model's).
    #[arg(long)]
    seq_len: Option<u32>,
    /// Global batch in tokens: 4194304, 4M (10^6) or 4Mi (2^20); default 4Mi.
    #[arg(long, conflicts_with = "global_batch")]
    global_batch_tokens: Option<String>,
    /// Global batch in sequences.
    #[arg(long)]
    global_batch: Option<u32>,
    /// GEMM precision.
    #[arg(long, value_enum, default_value_t = Precision::Bf16)]
    precision: Precision,
    /// Price unfused attention that stores the s x s scores.
    #[arg(long)]
    no_flash_attention: bool,
    /// Price gradient reduction that waits for backward to finish.
    #[arg(long)]
    no_overlap_grad_reduce: bool,
    /// Price tensor-parallel collectives that wait for their GEMMs (Megatron without
    /// `--tp-comm-overlap`); by default Megatron overlaps them on Hopper and newer, over NVLink.
    #[arg(long)]
    no_tp_comm_overlap: bool,
    /// Framework whose gradient bucketing, kernels and recomputation are priced (default: the
    /// one `--emit` writes a config for, else megatron).
    #[arg(long, value_enum)]
    framework: Option<Framework>,
    /// Gradient reduction type (default: fp32, what Megatron-LM and torchtitan do under bf16;
    /// bf16 for DeepSpeed, which reduces in the training type).
    #[arg(long, value_enum)]
    grad_reduce: Option<ReduceDtype>,
    /// How MoE tokens reach their experts: NCCL all-to-all, or each token once per node and
    /// over NVLink from there (DeepEP, Megatron's flex dispatcher).
    #[arg(long, value_enum, default_value_t = MoeDispatch::AllToAll)]
    moe_dispatch: MoeDispatch,
    /// A calibration profile (`tuner calibrate -o`): its knobs in place of the catalog's.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Output format; JSON and YAML documents start with `schema_version` (now 1).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Knobs to pin; the rest are searched.
#[derive(Debug, Args)]
struct MeshArgs {
    /// Tensor parallel size.
    #[arg(long)]
    tp: Option<u32>,
    /// Pipeline stages.
    #[arg(long)]
    pp: Option<u32>,
    /// Data parallel size.
    #[arg(long)]
    dp: Option<u32>,
    /// Context parallel size.
    #[arg(long)]
    cp: Option<u32>,
    /// Expert parallel size.
    #[arg(long)]
    ep: Option<u32>,
    /// Sequences per microbatch.
    #[arg(long)]
    microbatch_size: Option<u32>,
    /// Microbatches per step.
    #[arg(long)]
    microbatches: Option<u32>,
    /// Virtual pipeline stages per rank.
    #[arg(long)]
    virtual_stages: Option<u32>,
    /// ZeRO stage, 0-3.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    zero: Option<u8>,
    /// Activation recomputation.
    #[arg(long, value_enum)]
    recompute: Option<Recompute>,
    /// Sequence parallelism.
    #[arg(long)]
    sequence_parallel: Option<bool>,
}

impl MeshArgs {
    fn constraints(&self) -> Constraints {
        Constraints {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            cp: self.cp,
            ep: self.ep,
            microbatch_size: self.microbatch_size,
            microbatches: self.microbatches,
            virtual_stages: self.virtual_stages,
            zero_stage: self.zero,
            recompute: self.recompute,
            sequence_parallel: self.sequence_parallel,
        }
    }
}

const DEFAULT_BATCH_TOKENS: u64 = 4 << 20;

/// Largest job priced: 2^20 GPUs, past the largest clusters built.
const MAX_GPUS: u32 = 1 << 20;

/// Largest global batch priced: 2^24 sequences or 2^40 tokens, a thousand times what any
/// published run used.
const MAX_GLOBAL_BATCH: u32 = 1 << 24;
const MAX_BATCH_TOKENS: f64 = (1u64 << 40) as f64;

/// Parses 4194304, 4M, 4.5M, 16Mi, 512K.
fn parse_tokens(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (num, mult) = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("K", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ]
    .iter()
    .find_map(|(suffix, m)| t.strip_suffix(suffix).map(|n| (n, *m)))
    .unwrap_or((t, 1));
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v * mult as f64 <= MAX_BATCH_TOKENS => {
            Ok((v * mult as f64).round() as u64)
        }
        _ => Err(bad_flag(
            "--global-batch-tokens",
            s,
            "a positive token count up to 1Ti, such as 4194304, 4M or 4Mi",
        )
        .into()),
    }
}

impl JobArgs {
    /// The framework priced: `--framework`, else the one `emit` writes for, else Megatron. A
    /// config for one framework priced as another would launch a job nobody priced.
    fn framework(&self, emit: Option<Emit>) -> anyhow::Result<Framework> {
        match (self.framework, emit) {
            (Some(f), Some(e)) if f != e.framework() => Err(bad_flag(
                "--framework",
                f,
                &format!(
                    "{}, the framework `--emit {}` writes for (or leave --framework out)",
                    e.framework(),
                    e.name()
                ),
            )
            .into()),
            (Some(f), _) => Ok(f),
            (None, e) => Ok(e.map_or(Framework::Megatron, Emit::framework)),
        }
    }

    /// Resolves the job into a scenario, with notes on every default and alias used.
    fn scenario(&self, emit: Option<Emit>) -> anyhow::Result<(Scenario, Vec<String>)> {
        let mut notes = Vec::new();
        if self.gpus <= 0 {
            bail!(bad_flag("--gpus", self.gpus, "a positive GPU count"));
        }
        let framework = self.framework(emit)?;
        if let (None, Some(e)) = (self.framework, emit) {
            notes.push(format!(
                "framework: {framework}, whose runtime the --emit {} config launches",
                e.name()
            ));
        }
        if self.gpus > i64::from(MAX_GPUS) {
            bail!(bad_flag(
                "--gpus",
                self.gpus,
                "at most 1048576: no cluster holds more"
            ));
        }
        let gpus = self.gpus as u32;
        let resolved = catalog::model(&self.model).map_err(from_flags)?;
        notes.extend(resolved.note);
        let model = resolved.shape;
        let mut cluster: Cluster = catalog::cluster(&self.cluster).map_err(from_flags)?;
        if let Some(n) = self.gpus_per_node {
            cluster.gpus_per_node = n;
            cluster.nvlink_domain =
                cluster
                    .nvlink_domain
                    .min(n)
                    .max(if cluster.gpu.nvlink_bytes_per_s > 0.0 {
                        n
                    } else {
                        1
                    });
        }
        if let Some(n) = self.nics_per_node {
            cluster.nics_per_node = n;
        }
        if let Some(g) = self.nic_gbps {
            cluster.nic_bits_per_s = g * 1e9;
        }
        cluster
            .check(gpus, |field| format!("--{}", field.replace('_', "-")))
            .map_err(from_flags)?;
        let seq_len = match self.seq_len {
            Some(0) => bail!(bad_flag("--seq-len", 0, "a positive length")),
            Some(s) => s,
            None => {
                notes.push(format!(
                    "seq_len {} from {} (set --seq-len to change)",
                    model.seq_len, model.name
                ));
                model.seq_len
            }
        };
        let global_batch = match (self.global_batch, &self.global_batch_tokens) {
            (Some(0), _) => bail!(bad_flag(
                "--global-batch",
                0,
                "a positive number of sequences"
            )),
            (Some(b), _) if b > MAX_GLOBAL_BATCH => {
                bail!(bad_flag("--global-batch", b, "at most 16777216 sequences"))
            }
            (Some(b), _) => b,
            (None, tokens) => {
                let (tokens, default) = match tokens {
                    Some(t) => (parse_tokens(t)?, false),
                    None => (DEFAULT_BATCH_TOKENS, true),
                };
                let seqs = ((tokens as f64 / f64::from(seq_len)).round() as u32).max(1);
                if default {
                    notes.push(format!("global batch {seqs} sequences = {:.2}M tokens (default 4Mi tokens; set --global-batch-tokens)", f64::from(seqs) * f64::from(seq_len) / 1e6));
                } else if u64::from(seqs) * u64::from(seq_len) != tokens {
                    notes.push(format!(
                        "global batch rounded to {seqs} whole sequences of {seq_len} tokens"
                    ));
                }
                seqs
            }
        };
        if self.precision.is_fp8() && cluster.gpu.fp8_flops.is_none() {
            notes.push(format!(
                "{} has no fp8 tensor cores: priced at its bf16 peak",
                cluster.gpu.id
            ));
        }
        notes.push("optimizer: mixed-precision Adam, 16 bytes of model state per parameter".into());

        // Megatron-Core's defaults, changed where the flags or the framework say otherwise.
        let training = Training {
            precision: self.precision,
            flash_attention: !self.no_flash_attention,
            overlap_grad_reduce: !self.no_overlap_grad_reduce,
            flash_kernel: match framework {
                Framework::Megatron => FlashKernel::Newest,
                Framework::Deepspeed | Framework::Fsdp => FlashKernel::Flash2,
            },
            // Transformer Engine's userbuffers overlap needs Hopper or newer.
            tp_comm_overlap: framework == Framework::Megatron
                && matches!(cluster.gpu.arch, Arch::Hopper | Arch::Blackwell)
                && !self.no_tp_comm_overlap,
            framework,
            grad_reduce: self.grad_reduce.unwrap_or(match framework {
                Framework::Deepspeed => ReduceDtype::Bf16,
                Framework::Megatron | Framework::Fsdp => ReduceDtype::Fp32,
            }),
            loss: LossKernel::default_for(framework),
            moe_dispatch: self.moe_dispatch,
            ..Training::megatron(seq_len, global_batch)
        };
        let (efficiency, profiled) = efficiency(self.profile.as_deref())?;
        notes.extend(profiled);
        Ok((
            Scenario::nominal(model, training, cluster, gpus, efficiency),
            notes,
        ))
    }
}

/// Runs one command and writes its output.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let out = match cli.command {
        Command::Recommend {
            job,
            mesh,
            measure,
            compare_nominal,
            top,
            emit,
        } => recommend(&job, &mesh, &measure, compare_nominal, top, emit)?,
        Command::Explain {
            job,
            mesh,
            measure,
            emit,
        } => explain_one(&job, &mesh, &measure, emit)?,
        Command::Compare { job, measure, a, b } => compare(&job, &measure, &a, &b)?,
        Command::Fit {
            measure,
            cluster,
            plot,
            format,
        } => fit_command(&measure, &cluster, plot.as_deref(), format)?,
        Command::Snapshot { measure, output } => snapshot_command(&measure, &output)?,
        Command::Validate {
            runs,
            summary,
            fit,
            leave_one_source_out,
            measurements,
            measurements_gpu,
            profile,
            format,
        } => validate_command(
            &runs,
            ValidateMode {
                summary_only: summary,
                fit,
                leave_one_source_out,
                profile,
            },
            &measurements,
            measurements_gpu.as_deref(),
            format,
        )?,
        Command::JobsFromLogs(args) => args.run()?,
        Command::Calibrate(args) => args.run()?,
        Command::Models { format } => {
            let list = ModelList::new();
            render(format, &list, || table::models(&list))?.into()
        }
        Command::Clusters { format } => {
            let list = ClusterList::new()?;
            render(format, &list, || table::clusters(&list))?.into()
        }
        Command::Completions { shell } => manual::completions(Cli::command(), shell).into(),
        Command::Man { dir } => manual::man_pages(Cli::command(), dir.as_deref())?.into(),
    };
    for note in &out.notes {
        eprintln!("tuner: note: {note}");
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.data.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// The catalog's efficiencies, with a profile's calibrated knobs where one is given, and the
/// note that says so.
fn efficiency(
    profile: Option<&std::path::Path>,
) -> anyhow::Result<(catalog::Efficiency, Option<String>)> {
    match profile {
        Some(path) => {
            let p = tuner::calibrate::profile::load(path)?;
            Ok((p.apply(&NOMINAL), Some(p.note(&path.display().to_string()))))
        }
        None => Ok((NOMINAL, None)),
    }
}

/// How validate scores: the flags that choose its efficiencies and its output.
struct ValidateMode {
    summary_only: bool,
    fit: bool,
    leave_one_source_out: bool,
    profile: Option<PathBuf>,
}

fn validate_command(
    paths: &[PathBuf],
    mode: ValidateMode,
    measurements: &[PathBuf],
    measurements_gpu: Option<&str>,
    format: Format,
) -> anyhow::Result<Output> {
    let ValidateMode {
        summary_only,
        fit,
        leave_one_source_out,
        profile,
    } = mode;
    let (calibrated, profiled) = efficiency(profile.as_deref())?;
    let files = validate::read_runs(paths)?;
    if leave_one_source_out {
        let rows = validate::fitting::leave_one_source_out(&files, &PRIOR);
        #[derive(serde::Serialize)]
        struct HeldOutDoc<'a> {
            held_out: &'a [validate::fitting::HeldOut],
        }
        return render(format, &HeldOutDoc { held_out: &rows }, || {
            table::held_out(&rows)
        })
        .map(Output::from);
    }
    let efficiency = if fit {
        // The global fit may also continue from the catalog's own values: no run is held out
        // of it, so where it starts leaks nothing.
        let mut starts = validate::fitting::starts(&PRIOR);
        starts.push(NOMINAL);
        validate::fitting::fit(&files, &starts, None)
    } else {
        calibrated
    };
    let assumed = measure_args::measurements_gpu_id(measurements_gpu)?;
    let mut serving = validate::measured::Serving::load(&files, measurements, assumed)?;
    let v = if serving.any() {
        validate::validate_measured(&files, &efficiency, &mut serving)
    } else {
        validate::validate(&files, &efficiency)
    };
    let mut notes: Vec<String> = profiled.into_iter().collect();
    notes.extend(v.measured.iter().flat_map(|m| m.notes.iter().cloned()));
    let data = render(format, &v, || table::validation(&v, summary_only))?;
    Ok(Output { data, notes })
}

fn emit(kind: Emit, scenario: &Scenario, e: &Evaluation) -> String {
    let (m, t) = (&e.mesh, &scenario.training);
    match kind {
        Emit::Megatron => launch::megatron(&scenario.model, t, m),
        Emit::Deepspeed => launch::deepspeed(t, m),
        Emit::Torchtitan => launch::torchtitan(&scenario.model, t, m),
    }
}

/// The job's scenario, priced from measurements where given, with its notes.
fn priced(
    job: &JobArgs,
    measure_args: &MeasureArgs,
    emit: Option<Emit>,
) -> anyhow::Result<(Priced, Vec<String>)> {
    let (nominal, mut notes) = job.scenario(emit)?;
    let priced = measure_args::price(nominal, measure_args)?;
    notes.extend(priced.notes.iter().cloned());
    notes.push(match priced.fits {
        Some(_) => {
            "figures: measured where each mesh's sources say so, catalog (nominal) elsewhere".into()
        }
        None => {
            "figures: catalog (nominal) datasheet numbers and efficiencies, not measurements".into()
        }
    });
    Ok((priced, notes))
}

fn document(
    priced: &Priced,
    notes: Vec<String>,
    evaluated: usize,
    fitting: usize,
    meshes: Vec<MeshDoc>,
) -> Document {
    let mut doc = Document::new(&priced.scenario, notes, evaluated, fitting, meshes);
    doc.measurements = priced.doc.clone();
    if priced.fits.is_some() {
        doc.cluster.figures = "measured".into();
    }
    doc
}

fn recommend(
    job: &JobArgs,
    mesh: &MeshArgs,
    measure_args: &MeasureArgs,
    compare_nominal: bool,
    top: usize,
    emit_as: Option<Emit>,
) -> anyhow::Result<Output> {
    let (mut priced, notes) = priced(job, measure_args, emit_as)?;
    let c = mesh.constraints();
    let result = search::search(&priced.scenario, &c, top.max(1));
    if result.ranked.is_empty() {
        bail!(no_mesh(&mut priced.scenario, result.leanest.as_ref(), &c));
    }
    if let Some(kind) = emit_as {
        return Ok(Output {
            data: emit(kind, &priced.scenario, &result.ranked[0]),
            notes,
        });
    }
    let scenario = &priced.scenario;
    let mut meshes: Vec<MeshDoc> = result
        .ranked
        .iter()
        .enumerate()
        .map(|(i, e)| {
            MeshDoc::new(
                i + 1,
                e,
                scenario,
                (i > 0).then(|| explain::why_below(&result.ranked[i - 1], e)),
            )
        })
        .collect();
    for i in 1..meshes.len() {
        meshes[i].tie_with_above = meshes[i].step_time_low_s <= meshes[i - 1].step_time_high_s;
    }
    let top_pick_changed = if compare_nominal {
        against_nominal(scenario, &c, &result.ranked, &mut meshes)
    } else {
        None
    };
    let mut doc = document(&priced, notes, result.evaluated, result.fitting, meshes);
    doc.top_pick_changed = top_pick_changed;
    with_notes(render(job.format, &doc, || table::recommend(&doc))?, &doc)
}

/// The rendered document, with its notes for stderr.
fn with_notes(data: String, doc: &Document) -> anyhow::Result<Output> {
    Ok(Output {
        data,
        notes: doc.notes.clone(),
    })
}

/// Ranks the same meshes with catalog figures: each mesh's nominal rank and, where it moved,
/// the term that moved it; returns a line when the top pick itself changed.
fn against_nominal(
    scenario: &Scenario,
    c: &Constraints,
    ranked: &[Evaluation],
    meshes: &mut [MeshDoc],
) -> Option<String> {
    let nominal = Scenario::nominal(
        scenario.model.clone(),
        scenario.training.clone(),
        scenario.cluster.clone(),
        scenario.gpus,
        scenario.efficiency.clone(),
    );
    let mut steps: Vec<f64> = Vec::new();
    search::for_each_evaluation(&nominal, c, |e| {
        if e.fits() {
            steps.push(e.step_time_s);
        }
    });
    steps.sort_by(f64::total_cmp);
    for (doc, e) in meshes.iter_mut().zip(ranked) {
        let n = nominal.evaluate(&e.mesh);
        if n.fits() {
            doc.nominal_rank = Some(steps.partition_point(|s| *s < n.step_time_s) + 1);
        }
        if doc.nominal_rank != Some(doc.rank) {
            doc.shift_cause = Some(explain::shift_cause(e, &n));
        }
    }
    let nb = search::search(&nominal, c, 1).ranked.into_iter().next()?;
    if nb.mesh == ranked[0].mesh {
        return None;
    }
    let measured_nb = scenario.evaluate(&nb.mesh);
    Some(format!(
        "top pick changed: the catalog picks {} ({:.3} s), the measurements pick {} ({:.3} s); on this cluster the catalog pick takes {:.3} s: {}",
        nb.mesh,
        nb.step_time_s,
        ranked[0].mesh,
        ranked[0].step_time_s,
        measured_nb.step_time_s,
        explain::shift_cause(&measured_nb, &nb)
    ))
}

/// Why nothing was ranked: no valid mesh at all, or none that fits memory (`leanest` is the
/// mesh that came closest).
fn no_mesh(
    scenario: &mut Scenario,
    leanest: Option<&Evaluation>,
    c: &Constraints,
) -> anyhow::Error {
    let name = scenario.model.name.clone();
    let gpus = scenario.gpus;
    let reason = match leanest {
        Some(lean) => format!(
            "the leanest layout ({}) needs {:.1} GiB per GPU, has {:.0} GiB",
            lean.mesh,
            lean.memory.total / GIB,
            lean.capacity_bytes / GIB
        ),
        None if *c != Constraints::default() => "no layout satisfies the pinned knobs (tp must divide heads and KV heads, pp the layers, dp x microbatch the global batch)".to_string(),
        None => "no layout divides the model and the global batch".to_string(),
    };
    // A pin that can never hold, or not at this count, is the answer; no larger count helps.
    if let Err(e) = c.check_knobs(&scenario.model) {
        return from_flags(e);
    }
    if let Err(e) = c.check_count(gpus) {
        return from_flags(with_nearest_counts(e, scenario, c));
    }
    let hint = match search::smallest_working_count(scenario, gpus, c) {
        Some(n) => format!("; the smallest GPU count that works is {n}"),
        None => String::new(),
    };
    tuner::TunerError::NoMesh {
        model: name,
        gpus,
        reason: reason + &hint,
    }
    .into()
}

/// A GPU count the pinned sizes do not divide, with the nearest counts where the pins leave
/// a layout, when there are any.
fn with_nearest_counts(
    mut err: tuner::TunerError,
    scenario: &Scenario,
    c: &Constraints,
) -> tuner::TunerError {
    if let tuner::TunerError::BadInput { allowed, .. } = &mut err {
        let t = &scenario.training;
        let near = search::nearest_valid_counts(
            &scenario.model,
            t.seq_len,
            t.global_batch,
            scenario.gpus,
            c,
        );
        let near = match near {
            (Some(below), Some(above)) => format!("{below} or {above}"),
            (Some(n), None) | (None, Some(n)) => n.to_string(),
            (None, None) => return err,
        };
        allowed.push_str(&format!(
            "; the nearest GPU counts with a layout for the pinned knobs: --gpus {near}"
        ));
    }
    err
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn explain_one(
    job: &JobArgs,
    mesh: &MeshArgs,
    measure_args: &MeasureArgs,
    emit_as: Option<Emit>,
) -> anyhow::Result<Output> {
    let (mut priced, mut notes) = priced(job, measure_args, emit_as)?;
    let c = mesh.constraints();
    let (best, count) = search::best_mesh(&priced.scenario, &c);
    let Some(e) = best else {
        bail!(no_mesh(&mut priced.scenario, None, &c));
    };
    if count > 1 {
        notes.push(format!("knobs not given were chosen as the fastest that fits (or the leanest) of {count} layouts: {}", e.mesh));
    }
    if !e.fits() {
        notes.push(format!(
            "impossible: needs {:.1} GiB per GPU, has {:.0} GiB",
            e.memory.total / GIB,
            e.capacity_bytes / GIB
        ));
    }
    if let Some(kind) = emit_as {
        return Ok(Output {
            data: emit(kind, &priced.scenario, &e),
            notes,
        });
    }
    let meshes = vec![MeshDoc::new(1, &e, &priced.scenario, None)];
    let doc = document(&priced, notes, 1, usize::from(e.fits()), meshes);
    with_notes(render(job.format, &doc, || table::explain(&doc))?, &doc)
}

/// Parses `tp=8,pp=8,dp=8,mb=1,v=1,zero=1,recompute=full,sp=true` into pinned knobs.
fn parse_mesh(spec: &str, flag: &str) -> anyhow::Result<Constraints> {
    let mut c = Constraints::default();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| bad_flag(flag, part, "key=value pairs such as tp=8"))?;
        let num = || {
            v.parse::<u32>()
                .map_err(|_| bad_flag(&format!("{flag} {k}"), v, "a positive integer"))
        };
        match k {
            "tp" => c.tp = Some(num()?),
            "pp" => c.pp = Some(num()?),
            "dp" => c.dp = Some(num()?),
            "cp" => c.cp = Some(num()?),
            "ep" => c.ep = Some(num()?),
            "mb" | "microbatch_size" => c.microbatch_size = Some(num()?),
            "m" | "microbatches" => c.microbatches = Some(num()?),
            "v" | "virtual_stages" => c.virtual_stages = Some(num()?),
            "zero" => {
                c.zero_stage = Some(
                    v.parse::<u8>()
                        .ok()
                        .filter(|z| *z <= 3)
                        .ok_or_else(|| bad_flag(&format!("{flag} zero"), v, "0, 1, 2 or 3"))?,
                )
            }
            "recompute" => {
                c.recompute = Some(Recompute::from_str(v, true).map_err(|_| {
                    bad_flag(&format!("{flag} recompute"), v, "none, selective or full")
                })?)
            }
            "sp" | "sequence_parallel" => {
                c.sequence_parallel = Some(
                    v.parse::<bool>()
                        .map_err(|_| bad_flag(&format!("{flag} sp"), v, "true or false"))?,
                )
            }
            _ => bail!(bad_flag(
                flag,
                k,
                "keys tp, pp, dp, cp, ep, mb, m, v, zero, recompute, sp"
            )),
        }
    }
    Ok(c)
}

fn compare(job: &JobArgs, measure_args: &MeasureArgs, a: &str, b: &str) -> anyhow::Result<Output> {
    let (mut priced, notes) = priced(job, measure_args, None)?;
    let mut picked = Vec::new();
    for (flag, spec) in [("--a", a), ("--b", b)] {
        let c = parse_mesh(spec, flag)?;
        match search::best_mesh(&priced.scenario, &c).0 {
            Some(e) => picked.push(e),
            None => {
                return Err(
                    no_mesh(&mut priced.scenario, None, &c).context(format!("{flag} {spec}"))
                )
            }
        }
    }
    let meshes: Vec<MeshDoc> = picked
        .iter()
        .enumerate()
        .map(|(i, e)| MeshDoc::new(i + 1, e, &priced.scenario, None))
        .collect();
    let doc = document(
        &priced,
        notes,
        2,
        picked.iter().filter(|e| e.fits()).count(),
        meshes,
    );
    with_notes(render(job.format, &doc, || table::compare(&doc))?, &doc)
}

fn fit_command(
    measure_args: &MeasureArgs,
    cluster: &str,
    plot: Option<&std::path::Path>,
    format: Format,
) -> anyhow::Result<Output> {
    if !measure_args.any() {
        bail!(bad_flag(
            "--measurements/--prometheus",
            "none",
            "at least one source of measurements"
        ));
    }
    let cluster = catalog::cluster(cluster).map_err(from_flags)?;
    let (m, _) = measure_args.load()?;
    let fits = tuner::fit::fit_all(
        &m.records,
        cluster.gpu.bf16_flops,
        &measure_args.fit_options(Precision::Bf16),
    );
    let report = tuner::report::fit::FitReport::new(&fits, &cluster, &m);
    match plot {
        Some(path)
            if path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("png")) =>
        {
            tuner::report::plot::png(&fits, &m.records, &cluster, path)?;
        }
        Some(path) => {
            let svg = tuner::report::plot::svg(&fits, &m.records, &cluster);
            tuner::output::write_atomically(path, svg.as_bytes())?;
        }
        None => {}
    }
    Ok(Output {
        data: render(format, &report, || tuner::report::fit::table(&report))?,
        notes: report.notes.clone(),
    })
}

fn snapshot_command(
    measure_args: &MeasureArgs,
    output: &std::path::Path,
) -> anyhow::Result<Output> {
    if measure_args.prometheus.is_none() {
        bail!(bad_flag(
            "--prometheus",
            "none",
            "the URL of the Prometheus that scrapes the agents"
        ));
    }
    let (m, snapshot) = measure_args.load()?;
    let snapshot = snapshot.context("no snapshot came back from Prometheus")?;
    let json = serde_json::to_string_pretty(&snapshot)?;
    tuner::output::write_atomically(output, (json + "\n").as_bytes())?;
    Ok(Output {
        data: format!(
            "wrote {} ({} nodes, {} records)\n",
            output.display(),
            snapshot.nodes.len(),
            m.records.len()
        ),
        notes: m.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn documents_lead_with_the_schema_version() {
        #[derive(serde::Serialize)]
        struct Rows {
            held_out: Vec<u32>,
        }
        let rows = Rows {
            held_out: vec![7, 9],
        };
        let json = render(Format::Json, &rows, String::new).unwrap();
        assert_eq!(
            json,
            "{\n  \"schema_version\": 1,\n  \"held_out\": [\n    7,\n    9\n  ]\n}\n"
        );
        let yaml = render(Format::Yaml, &rows, String::new).unwrap();
        assert_eq!(yaml, "schema_version: 1\nheld_out:\n- 7\n- 9\n");
        assert_eq!(render(Format::Table, &rows, || "t".into()).unwrap(), "t");
    }

    #[test]
    fn token_counts() {
        assert_eq!(parse_tokens("4194304").unwrap(), 4194304);
        assert_eq!(parse_tokens("4M").unwrap(), 4_000_000);
        assert_eq!(parse_tokens("16Mi").unwrap(), 16 << 20);
        assert!(parse_tokens("-3M").is_err());
        assert!(parse_tokens("lots")
            .unwrap_err()
            .to_string()
            .contains("--global-batch-tokens"));
    }

    #[test]
    fn mesh_specs() {
        let c = parse_mesh("tp=8,pp=4,dp=16,mb=2,zero=1,recompute=full,sp=true", "--a").unwrap();
        assert_eq!(
            (c.tp, c.pp, c.dp, c.microbatch_size, c.zero_stage),
            (Some(8), Some(4), Some(16), Some(2), Some(1))
        );
        assert_eq!(
            (c.recompute, c.sequence_parallel),
            (Some(Recompute::Full), Some(true))
        );
        let err = parse_mesh("tp=8,zero=5", "--b").unwrap_err().to_string();
        assert!(err.contains("--b zero") && err.contains('5'), "{err}");
    }
}
