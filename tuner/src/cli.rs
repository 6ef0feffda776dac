//! Command line: flags, defaults, and one place that writes output.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand};

use record::terminal::escape_line;
use tuner::report::listing::{ClusterList, ModelList};
use tuner::report::table;
use tuner::search::Constraints;

use crate::commands::{
    compare, explain_one, fit_command, recommend, snapshot_command, validate_command, ValidateMode,
};
use crate::exit::EXIT_STATUS;
use crate::job_args::{Emit, JobArgs};
use crate::jobs_cli;
use crate::measure_args::MeasureArgs;
use crate::render::{render, Format};
use record::manual;

/// Ranks hybrid-parallel training layouts (DP x TP x PP x CP x EP, ZeRO, microbatches,
/// recomputation) for a model on a GPU cluster.
#[derive(Debug, Parser)]
#[command(name = "tuner", version, max_term_width = 100, after_help = EXIT_STATUS)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `recommend` and `explain` price a layout under: the job, the pinned knobs and the
/// measurements.
#[derive(Debug, Args)]
struct LayoutArgs {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    mesh: Constraints,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Rank every valid layout for a model and GPU count.
    Recommend {
        #[command(flatten)]
        layout: LayoutArgs,
        /// Rank with catalog figures too and show what the measurements changed.
        #[arg(long)]
        compare_nominal: bool,
        /// How many distinct layouts to print: layouts whose step time and memory per GPU
        /// agree within 0.5% count once, as one row with its equivalents listed below.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Print the launch configuration of the best layout instead of the ranking.
        #[arg(long, value_enum)]
        emit: Option<Emit>,
    },
    /// Price one layout term by term; say why it is impossible if it is.
    Explain {
        #[command(flatten)]
        layout: LayoutArgs,
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
        /// Write the fleet reduced in Prometheus (its aggregate per GPU model and its
        /// stragglers, format version 2) instead of every node's records (version 1).
        #[arg(long)]
        compact: bool,
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

/// Runs one command and writes its output.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let out = match cli.command {
        Command::Recommend {
            layout: l,
            compare_nominal,
            top,
            emit,
        } => recommend(&l.job, &l.mesh, &l.measure, compare_nominal, top, emit)?,
        Command::Explain { layout: l, emit } => explain_one(&l.job, &l.mesh, &l.measure, emit)?,
        Command::Compare { job, measure, a, b } => compare(&job, &measure, &a, &b)?,
        Command::Fit {
            measure,
            cluster,
            plot,
            format,
        } => fit_command(&measure, &cluster, plot.as_deref(), format)?,
        Command::Snapshot {
            measure,
            output,
            compact,
        } => snapshot_command(&measure, &output, compact)?,
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
        eprintln!("tuner: note: {}", escape_line(note));
    }
    let mut stdout = std::io::stdout().lock();
    let written = match stdout
        .write_all(out.data.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    };
    for warning in &out.warnings {
        eprintln!("tuner: warning: {}", escape_line(warning));
    }
    written
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
}
