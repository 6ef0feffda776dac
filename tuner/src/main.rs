use std::process::ExitCode;

use clap::Parser;

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
            eprintln!("tuner: {err:#}");
            ExitCode::from(exit::code(&err))
        }
    }
}
