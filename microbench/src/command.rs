//! Runs a parsed command line: builds the backend and the plan, shows progress, prints tables
//! or JSON lines. Under a launcher with more than one rank, collective sweeps and `fabric`
//! run across the job (issue 12). Exit codes are [`crate::exit`]'s.
//!
//! - backend.rs: the backend the flags pick, and the flags only the sim takes.
//! - libs.rs: `libs`, the GPU libraries found and what they lack.
//! - plan.rs: the points a single-node command measures.
//! - output.rs: tables, JSON lines and state files, as the commands print and write them.
//! - job.rs: what every rank of a multi-node job does: its hello at the rendezvous, and
//!   what it does with the job's records (rank 0 prints them, every node writes its state).
//! - sim_job.rs and nccl_job.rs: a job on the sim and on real GPUs under NCCL.

mod backend;
mod job;
mod libs;
mod nccl_job;
mod output;
mod plan;
mod sim_job;

use crate::cli::{BackendChoice, Cli, Command, ImportArgs};
use crate::exit::{partial, usage};
use anyhow::{Context, Result};
use backend::{backend, reject_sim_flags};
use clap::CommandFactory;
use indicatif::{ProgressBar, ProgressStyle};
use job::{hostname, whom, Work};
use microbench::discovery::{self, matrix::Matrix, Topology};
use microbench::launcher::{self, Placement};
use microbench::rendezvous::Meeting;
use microbench::report;
use nccl_job::nccl_job;
use output::{emit, json_lines, print_records, with_gpu_models};
use plan::plan;
use record::manual;
use record::nccl_tests::ImportOptions;
use record::terminal::{escape_controls, escape_line};
use sim_job::sim_job;

use std::io::IsTerminal;
use std::process::ExitCode;

/// Runs `cli`.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Import(args) => import(args, cli.json()),
        Command::Topo => topo(&cli),
        Command::Libs => libs::libs(cli.json()),
        Command::Completions { shell } => {
            text_only(&cli, "completions", "a shell script")?;
            emit(&manual::completions(Cli::command(), *shell))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            text_only(&cli, "man", "roff")?;
            emit(&manual::man_pages(Cli::command(), dir.as_deref())?)?;
            Ok(ExitCode::SUCCESS)
        }
        _ => match placement(&cli)? {
            Some(placement) => job(&cli, &placement),
            None if matches!(cli.command, Command::Fabric(_)) => Err(usage(
                "fabric runs across a multi-node job, and no launcher variables here give a \
                 world of more than one rank: start one process per GPU under mpirun, srun, \
                 torchrun or a Kubernetes Indexed Job (see microbench --help)",
            )),
            None => measure(&cli),
        },
    }
}

/// Refuses JSON for `command`, whose output (`prints`) has no JSON form, rather than
/// printing text to a reader that asked for JSON.
fn text_only(cli: &Cli, command: &str, prints: &str) -> Result<()> {
    if cli.json() {
        return Err(usage(format!(
            "--format json: `{command}` prints {prints}, which has no JSON form; run it \
             without --format json (or --json)"
        )));
    }
    Ok(())
}

/// This process's place in a multi-node job, if any.
fn placement(cli: &Cli) -> Result<Option<Placement>> {
    let host = hostname()?;
    let env = |name: &str| std::env::var(name).ok();
    Ok(launcher::detect(
        cli.job.launcher,
        &env,
        (cli.job.node_name.as_deref(), cli.job.job_id.as_deref()),
        &host,
    )?)
}

/// One rank of a multi-node job: meet the others at the rendezvous; on the sim, rank 0
/// computes the records; under NCCL every rank measures its part and rank 0 builds the
/// records from every rank's loops. Rank 0 hands the records to every rank still in the job
/// and prints them; each node's local rank 0 writes its node's state file.
fn job(cli: &Cli, placement: &Placement) -> Result<ExitCode> {
    let whom = whom(placement);
    let work = match &cli.command {
        Command::Fabric(args) => Work::Fabric(args),
        c => match c.collective() {
            Some((_, args)) if args.gpus.is_some() || args.all_groups => {
                return Err(usage(format!(
                    "-g and --all-groups pick GPUs on one node; in a job ({whom}) the ranks on \
                     each node are the GPUs"
                )))
            }
            Some((kind, args)) => Work::Sweep(kind, args),
            None => {
                return Err(usage(format!(
                    "gemm, copy and calibrate run on one node, and this process is {whom}: \
                     run them with --launcher none"
                )))
            }
        },
    };
    if cli.source.nodes != 1 {
        return Err(usage(format!(
            "--nodes {}: in a job ({whom}) the nodes are the ranks' nodes",
            cli.source.nodes
        )));
    }
    let meeting = Meeting {
        addr: placement.master_addr.clone(),
        port: placement.master_port,
        timeout: cli.job.rendezvous_timeout,
    };
    let ran = match cli.source.backend {
        BackendChoice::Sim => sim_job(cli, placement, work, &meeting),
        BackendChoice::Nccl => nccl_job(cli, placement, work, &meeting),
    };
    ran.with_context(|| whom)
}

fn topo(cli: &Cli) -> Result<ExitCode> {
    let topology = match cli.source.backend {
        // Discovery needs NVML only, not the CUDA libraries.
        BackendChoice::Nccl => {
            reject_sim_flags(&cli.source)?;
            discovery::discover()?
        }
        BackendChoice::Sim => backend(&cli.source)?.topology()?,
    };
    for note in &topology.notes {
        eprintln!("microbench: topo: {note}");
    }
    if cli.json() {
        /// The topology document, led by its schema version (raised when a field is removed,
        /// renamed or changes meaning; issue 11).
        #[derive(serde::Serialize)]
        struct Versioned<'a> {
            schema_version: u32,
            #[serde(flatten)]
            topology: &'a Topology,
        }
        let doc = Versioned {
            schema_version: 1,
            topology: &topology,
        };
        emit(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    } else {
        emit(&(Matrix::from(&topology).render() + &report::gpu_details(&topology)))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn measure(cli: &Cli) -> Result<ExitCode> {
    let node = backend(&cli.source)?;
    let topology = node.topology()?;
    let plan = plan(&cli.command, &topology)?;
    let bar = (!cli.json() && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(plan.points.len() as u64);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} points {elapsed}") {
            bar.set_style(style);
        }
        bar
    });
    // JSON lines leave as each point finishes, so a reader (the agent, issue 10) keeps what
    // was measured when it has to stop this process mid-run.
    let mut streamed = Ok(());
    let outcome = node.run(&plan, &mut |p| {
        if let Some(bar) = &bar {
            bar.set_position(p.done as u64);
        }
        if cli.json() && streamed.is_ok() {
            let named = with_gpu_models(p.records, &topology);
            streamed = json_lines(&named).and_then(|text| emit(&text));
        }
        if let Some(f) = p.failure {
            eprintln!("microbench: skipped {}: {}", f.point, f.error);
        }
    })?;
    streamed?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !cli.json() {
        print_records(&outcome.records, false)?;
    }
    Ok(partial(!outcome.failures.is_empty()))
}

fn import(args: &ImportArgs, json: bool) -> Result<ExitCode> {
    let opts = ImportOptions {
        collective: args.collective.map(|c| c.0),
        ranks: args.ranks,
        scope: args.scope,
        node: args.node.clone(),
    };

    let mut records = Vec::new();
    let mut failed = 0;
    for file in &args.files {
        let name = file.display();
        // InputError names the file and says why; `reading` keeps the message's old shape.
        let file_name = file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let parsed = record::read_bounded(file, record::MAX_LOG_BYTES)
            .map_err(|e| anyhow::anyhow!("reading {e}"))
            .and_then(|text| {
                record::import::import(&text, &file_name, &opts).with_context(|| name.to_string())
            });
        match parsed {
            Ok(parsed) => {
                for w in &parsed.notes {
                    eprintln!("microbench: {}", escape_line(&format!("{name}: {w}")));
                }
                records.extend(parsed.records);
            }
            Err(err) => {
                eprintln!("microbench: {}", escape_controls(&format!("{err:#}")));
                failed += 1;
            }
        }
    }
    if failed == args.files.len() {
        return Ok(ExitCode::from(1));
    }
    print_records(&records, json)?;
    Ok(partial(failed > 0))
}
