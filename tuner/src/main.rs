use std::process::ExitCode;

use clap::Parser;
use record::terminal::escape_controls;

mod cli;
mod commands;
mod exit;
mod job_args;
mod jobs_cli;
mod measure_args;
mod render;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // An error may quote a Prometheus reply or a measurement file.
            let message = format!("{err:#}");
            eprintln!("tuner: {}", escape_controls(&message));
            ExitCode::from(exit::code(&err))
        }
    }
}
