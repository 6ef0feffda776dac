//! The `microbench` binary: parses flags, runs one command, prints one line per error.

mod cli;
mod command;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    match command::run(cli::Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("microbench: {err:#}");
            ExitCode::from(1)
        }
    }
}
