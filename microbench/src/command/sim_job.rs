//! A multi-node job on the sim (issue 12): every rank checks its own flags and meets the
//! others, and rank 0 computes every node's records from the faults each rank brought.

use super::backend::backend;
use super::job::{follow, hello, lead, min_nodes, settings, Work};
use super::plan::sweep_of;
use crate::cli::Cli;
use anyhow::Result;
use microbench::fabric::{self, Job};
use microbench::launcher::Placement;
use microbench::plan::Plan;
use microbench::rendezvous::{self, Meeting};
use microbench::Backend;

use std::process::ExitCode;

/// A job on the sim: rank 0 computes every node's records.
pub(super) fn sim_job(
    cli: &Cli,
    placement: &Placement,
    work: Work,
    meeting: &Meeting,
) -> Result<ExitCode> {
    // Checked here, so a bad profile or fault stops this rank with its own flags named.
    let local = backend(&cli.source)?;
    let topology = local.topology()?;
    let gpus = topology.gpus.len() as u32;
    if placement.local_rank >= gpus {
        return Err(microbench::Error::NoSuchGpu {
            field: "local rank",
            gpu: placement.local_rank,
            count: gpus as usize,
        }
        .into());
    }
    let joined = rendezvous::join(meeting, hello(cli, placement, "sim")?, None)?;
    let job = Job::from_roster(&joined.roster, min_nodes(work))?;
    if placement.rank != 0 {
        return follow(placement, work, &job, joined);
    }
    let sim = job.sim(cli.source.seed)?;
    let outcome = match work {
        Work::Fabric(args) => fabric::run_sim(&sim, &job, &settings(args))?,
        Work::Sweep(kind, args) => {
            let gpus: Vec<u32> = (0..job.ranks_per_node).collect();
            let plan = Plan::collectives(
                kind,
                &[gpus],
                &sweep_of(&args.sweep),
                args.dtype,
                args.sweep.iters,
                args.sweep.warmup,
            )?;
            sim.run(&plan, &mut |_| {})?
        }
    };
    lead(cli, placement, work, &job, joined, outcome, &topology)
}
