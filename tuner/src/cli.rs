//! Command line.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use tuner::catalog::NOMINAL;
use tuner::validate;

/// Ranks hybrid-parallel training layouts for a model on a cluster.
#[derive(Debug, Parser)]
#[command(name = "tuner", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Predict published runs and score the predictions.
    Validate {
        /// Runs file (format 1).
        #[arg(long)]
        runs: PathBuf,
    },
}

/// Runs one command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Validate { runs } => {
            let text = std::fs::read_to_string(&runs)
                .with_context(|| format!("reading {}", runs.display()))?;
            let file = validate::parse_runs(&text, &runs.display().to_string())?;
            let v = validate::validate(&file, &NOMINAL)?;
            for r in &v.runs {
                println!(
                    "{:50} {:9.3} {:9.3} {:+6.1}% {:?} {:?}",
                    r.id,
                    r.predicted_iteration_time_s,
                    r.observed_iteration_time_s,
                    r.error * 100.0,
                    r.choices,
                    r.notes
                );
            }
            println!("{:#?}", v.summary);
            Ok(())
        }
    }
}
