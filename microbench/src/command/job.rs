//! What every rank of a multi-node job does around its own part (issue 12): what it says of
//! itself at the rendezvous, and, once the job's records are in, what it writes and prints.

use super::output::{emit, json_lines, print_records, with_gpu_models, write_atomically};
use crate::cli::{Cli, CollectiveArgs, FabricArgs};
use crate::exit::partial;
use anyhow::{Context, Result};
use microbench::discovery::Topology;
use microbench::fabric::report::{findings, is_pair, pair_table};
use microbench::fabric::{self, Job, FABRIC_MIN_NODES};
use microbench::launcher::Placement;
use microbench::rendezvous::{self, Hello};
use microbench::sweep::Sweep;
use record::{Kind, Record, Scope};

use std::process::ExitCode;

/// This machine's host name: a rank's node when the launcher names none, and what it says
/// of itself at the rendezvous.
pub(super) fn hostname() -> Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the host name from /proc/sys/kernel/hostname")?
        .trim()
        .to_string())
}

/// What a job measures: `fabric`, or one collective swept over every rank.
#[derive(Clone, Copy)]
pub(super) enum Work<'a> {
    Fabric(&'a FabricArgs),
    Sweep(Kind, &'a CollectiveArgs),
}

pub(super) fn whom(placement: &Placement) -> String {
    format!(
        "rank {} of {} on {} ({})",
        placement.rank, placement.world, placement.node, placement.launcher
    )
}

/// Fewest nodes `work` needs: the pairwise pass is between nodes; a sweep runs on one node
/// too, as several processes on its GPUs.
pub(super) fn min_nodes(work: Work) -> usize {
    match work {
        Work::Fabric(_) => FABRIC_MIN_NODES,
        Work::Sweep(..) => 1,
    }
}

/// What every rank says of itself at the rendezvous.
pub(super) fn hello(cli: &Cli, placement: &Placement, backend: &str) -> Result<Hello> {
    Ok(Hello {
        job: placement.job_id.clone(),
        rank: placement.rank,
        world: placement.world,
        local_rank: placement.local_rank,
        node: placement.node.clone(),
        host: hostname()?,
        busy: cli.source.busy.contains(&placement.local_rank),
        backend: backend.into(),
        profile: cli.source.profile.clone(),
        faults: cli.source.fault.iter().map(ToString::to_string).collect(),
        // The NCCL backend fills it from its GPU; the sim's rank 0 knows its profile's.
        nvlink_fabric: None,
        error: None,
    })
}

/// A rank other than 0 once it has done its part: waits for rank 0's records and, as its
/// node's local rank 0 in `fabric`, writes its node's state file. A rank of a skipped node
/// leaves at once.
pub(super) fn follow(
    placement: &Placement,
    work: Work,
    job: &Job,
    joined: rendezvous::Rendezvous,
) -> Result<ExitCode> {
    if !job.includes(placement.rank) {
        eprintln!(
            "microbench: {}: a GPU on this node is busy; the node leaves the job",
            whom(placement)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let records: Vec<Record> = joined.finish(None, |_| true)?.unwrap_or_default();
    if let (Work::Fabric(args), 0) = (work, placement.local_rank) {
        write_state(args, &placement.node, &records)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Rank 0 with the job's records: hands them to every rank still in the job, writes its
/// node's state file and `--out`, prints the records and, for `fabric`, the pair table and
/// the slow nodes, NICs and pairs.
pub(super) fn lead(
    cli: &Cli,
    placement: &Placement,
    work: Work,
    job: &Job,
    joined: rendezvous::Rendezvous,
    mut outcome: microbench::Outcome,
    topology: &Topology,
) -> Result<ExitCode> {
    outcome.records = with_gpu_models(&outcome.records, topology);
    // Every collective over all ranks or one per node spans every node that runs.
    let names: Vec<String> = job.nodes.iter().map(|n| n.name.clone()).collect();
    for r in &mut outcome.records {
        if r.group.scope == Scope::InterNode && !is_pair(r) {
            r.detail.nodes = Some(names.clone());
        }
    }
    for (node, ranks) in &job.skipped {
        eprintln!("microbench: skipped node {node}: GPU busy on rank {ranks:?}");
    }
    joined.finish(Some(&outcome.records), |rank| job.includes(rank))?;
    for f in &outcome.failures {
        eprintln!("microbench: skipped {}: {}", f.point, f.error);
    }
    match work {
        Work::Fabric(args) => {
            if job.includes(placement.rank) && placement.local_rank == 0 {
                write_state(args, &placement.node, &outcome.records)?;
            }
            if let Some(out) = &args.out {
                write_atomically(out, &json_lines(&outcome.records)?)?;
            }
            let report: String = findings(&outcome.records)
                .iter()
                .map(|f| format!("{f}\n"))
                .collect();
            if cli.json() {
                emit(&json_lines(&outcome.records)?)?;
                eprint!("{report}");
            } else {
                let (pairs, wide): (Vec<Record>, Vec<Record>) =
                    outcome.records.iter().cloned().partition(is_pair);
                print_records(&wide, false)?;
                emit(&(pair_table(&pairs) + &report))?;
            }
        }
        Work::Sweep(..) => print_records(&outcome.records, cli.json())?,
    }
    Ok(partial(!outcome.failures.is_empty()))
}

pub(super) fn settings(args: &FabricArgs) -> fabric::Settings {
    fabric::Settings {
        sweep: Sweep {
            min_bytes: args.min_bytes,
            max_bytes: args.max_bytes,
            factor: args.factor,
            increment: 0,
        },
        dtype: args.dtype,
        iters: args.iters,
        warmup: args.warmup,
    }
}

/// `DIR/fabric.jsonl` of `node`: the job-wide records and the pairs `node` is an end of.
fn write_state(args: &FabricArgs, node: &str, records: &[Record]) -> Result<()> {
    let Some(dir) = &args.state_dir else {
        return Ok(());
    };
    let mine: Vec<Record> = records
        .iter()
        .filter(|r| match &r.detail.peer_node {
            Some(peer) => peer == node || r.group.node.as_deref() == Some(node),
            None => true,
        })
        .cloned()
        .collect();
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_atomically(&dir.join("fabric.jsonl"), &json_lines(&mine)?)
}
