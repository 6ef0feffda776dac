//! The `agent` binary: reads the configuration, logs to stderr (text, or JSON lines with
//! `MESHFIT_LOG_FORMAT=json`), runs until SIGTERM or Ctrl-C. A bad setting prints one line
//! naming it and exits with 2; a failure to start prints one line and exits with 1.

use agent::config::{Args, Config};
use agent::logging::{LogFormat, FILTER_ENV};
use anyhow::{Context, Result};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

fn main() -> ExitCode {
    let args = Args::parse();
    let format = match LogFormat::from_env() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(format);
    let print = args.print_config;
    let config = match Config::load(args) {
        Ok(c) => c,
        Err(e) => {
            report(format, &e);
            return ExitCode::from(2);
        }
    };
    if print {
        print!("{}", config.to_yaml());
        return ExitCode::SUCCESS;
    }
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(format, &format_args!("{e:#}"));
            ExitCode::from(1)
        }
    }
}

/// Logs to stderr, filtered by `MESHFIT_LOG` (default `info`).
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env(FILTER_ENV)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// The one line a failed start ends with: `agent: <why>` as a person reads it, or in JSON
/// an error event like every other line, so a log shipper keeps it.
fn report(format: LogFormat, message: &dyn std::fmt::Display) {
    match format {
        LogFormat::Text => eprintln!("agent: {message}"),
        LogFormat::Json => tracing::error!("{message}"),
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
