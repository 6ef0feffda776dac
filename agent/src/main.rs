//! The `agent` binary: reads the configuration, logs to stderr, runs until SIGTERM or
//! Ctrl-C. A bad setting prints one line naming it and exits with 2; a failure to start
//! prints one line and exits with 1.

use agent::config::{Args, Config};
use anyhow::{Context, Result};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

fn main() -> ExitCode {
    let args = Args::parse();
    let print = args.print_config;
    let config = match Config::load(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(2);
        }
    };
    if print {
        print!("{}", config.to_yaml());
        return ExitCode::SUCCESS;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MESHFIT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn serve(config: Config) -> Result<()> {
    // One thread serves HTTP and schedules; points and NVML calls run on blocking threads.
    // The calibration child dies with the thread that forked it, this one, which lives as
    // long as the process (`agent::child`, issue 31).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        agent::run(config, shutdown)
            .await
            .map_err(anyhow::Error::from)
    });
    // A hung calibration point must not hold the exit: blocking threads are left behind.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}
