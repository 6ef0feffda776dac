//! The `microbench` binary: parses flags, runs one command, prints one line per error.

mod cli;
mod command;
mod exit;

use clap::Parser;
use record::terminal::escape_controls;
use std::process::ExitCode;

fn main() -> ExitCode {
    // cudarc panics when a loaded CUDA library lacks a symbol it expects (an older driver or
    // NCCL than its bindings). Missing libraries are checked before use; this keeps anything
    // that still slips through to one line, like every other error.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let first = message.lines().next().unwrap_or("");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("microbench: internal error: {first}{at}");
    }));
    match command::run(cli::Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("microbench: {}", escape_controls(&format!("{err:#}")));
            ExitCode::from(exit::code(&err))
        }
    }
}
