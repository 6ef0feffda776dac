//! A multi-node job on real GPUs under NCCL (issue 12), as nccl-tests under mpirun: each
//! rank checks what it needs before the rendezvous, joins the communicator, runs the job's
//! steps on its own GPU and hands its timed loops to rank 0, which builds the records.

use super::backend::reject_sim_flags;
use super::job::{follow, hello, lead, min_nodes, settings, Work};
use super::plan::sweep_of;
use crate::cli::Cli;
use anyhow::{anyhow, Result};
use microbench::discovery::{self, Topology};
use microbench::fabric::world::{self, Layout};
use microbench::fabric::{Job, JobRank};
use microbench::kernels::{check_libraries, nccl_unique_id, nccl_version, rank_gpu, Library};
use microbench::launcher::Placement;
use microbench::rendezvous::{self, Meeting};
use microbench::GpuBackend;

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a job rank needs to measure, checked before the rendezvous so that a rank that
/// cannot says why there, and the job ends at once on every rank instead of in NCCL's init.
struct Prepared {
    /// `None` when the GPU is busy: the rank leaves before NCCL's init.
    gpu: Option<GpuBackend>,
    /// That GPU's NVML index: the local rank's CUDA device, matched by PCI address.
    index: u32,
    busy: bool,
    versions: record::Versions,
    /// Rank 0's NCCL unique id.
    id: Option<Vec<u8>>,
    /// This node's GPUs, whose model names the records carry.
    topology: Topology,
}

fn prepare(placement: &Placement) -> Result<Prepared> {
    check_libraries(&[Library::Cuda, Library::Nccl])?;
    // NVML only: no CUDA context yet, which would show on the GPU as a process.
    let topology = discovery::discover()?;
    // A launcher may narrow CUDA_VISIBLE_DEVICES per rank, which NVML ignores: the local
    // rank names a CUDA device, not an NVML index.
    let gpu = rank_gpu(placement.local_rank, &topology)?;
    let busy = discovery::activity()?
        .iter()
        .any(|a| a.gpu == gpu && a.is_busy());
    let mut versions = topology.versions.clone();
    versions.nccl = nccl_version();
    Ok(Prepared {
        topology: topology.clone(),
        gpu: if busy {
            None
        } else {
            Some(GpuBackend::for_gpu(gpu)?)
        },
        index: gpu,
        busy,
        versions,
        id: if placement.rank == 0 {
            Some(nccl_unique_id()?)
        } else {
            None
        },
    })
}

/// A job on real GPUs under NCCL, as nccl-tests under mpirun: every rank runs the same steps
/// in the same order on its own GPU and times its own loops; rank 0 gathers them and builds
/// the records.
pub(super) fn nccl_job(
    cli: &Cli,
    placement: &Placement,
    work: Work,
    meeting: &Meeting,
) -> Result<ExitCode> {
    reject_sim_flags(&cli.source)?;
    let prepared = prepare(placement);
    let mut hello = hello(cli, placement, "nccl")?;
    match &prepared {
        Ok(p) => {
            hello.busy = p.busy;
            hello.nvlink_fabric = p
                .topology
                .gpus
                .iter()
                .find(|g| g.index == p.index)
                .and_then(|g| g.nvlink_fabric.clone());
        }
        Err(e) => hello.error = Some(format!("{e:#}")),
    }
    let id = prepared.as_ref().ok().and_then(|p| p.id.clone());
    let mut joined = rendezvous::join(meeting, hello, id)?;
    // Every rank that arrived is ready (the rendezvous ends the job otherwise).
    let prepared = prepared?;
    let job = Job::from_roster(&joined.roster, min_nodes(work))?;
    let layout = Layout::new(&job, &joined.roster);
    let plan = match work {
        Work::Fabric(args) => {
            let s = settings(args);
            RankPlan {
                steps: world::fabric_steps(&job, &layout, &s)?,
                dtype: s.dtype,
                timing: (s.iters, s.warmup),
            }
        }
        Work::Sweep(kind, args) => RankPlan {
            steps: world::sweep_steps(kind, &layout, &sweep_of(&args.sweep), args.dtype)?,
            dtype: args.dtype,
            timing: (args.sweep.iters, args.sweep.warmup),
        },
    };
    let me = layout.nccl_rank(placement.rank);
    if placement.rank != 0 && me.is_none() {
        return follow(placement, work, &job, joined);
    }
    let mine = match (me, prepared.gpu.as_ref()) {
        (Some(me), Some(gpu)) => {
            let rank = RankOf {
                gpu,
                index: prepared.index,
                local_rank: placement.local_rank,
                me,
                timeout: cli.job.rendezvous_timeout,
            };
            rank.measure(&joined.roster, &layout, &plan)
        }
        (Some(me), None) => Err(anyhow!(
            "NCCL rank {me}: its GPU was busy at the rendezvous, yet its node is in the job"
        )),
        // Rank 0 of a node that left: it takes no part in NCCL and only gathers.
        (None, _) => Ok(Vec::new()),
    };
    let mine = match mine {
        Ok(loops) => loops,
        Err(e) => {
            // Rank 0 learns why from this rank instead of waiting for its timings; rank 0's
            // own failure closes its connections, which ends the others' wait. Either way
            // this rank's error is the one it reports, so a failed send is not.
            if placement.rank != 0 {
                let _ = joined.gather::<world::RankLoops>(
                    placement.rank,
                    Err(format!("{e:#}")),
                    |_| false,
                );
            }
            return Err(e);
        }
    };
    let filter = |r| layout.nccl_rank(r).is_some();
    let Some(results) = joined.gather(placement.rank, Ok(mine), filter)? else {
        return follow(placement, work, &job, joined);
    };
    let stamp = world::Stamp {
        node: job.nodes[0].name.clone(),
        versions: prepared.versions,
        dtype: plan.dtype,
        iters: plan.timing.0,
        timestamp: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .ok(),
    };
    let records = world::records(&plan.steps, &job, &layout, &results, &stamp)?;
    let outcome = microbench::Outcome {
        records,
        failures: Vec::new(),
    };
    lead(
        cli,
        placement,
        work,
        &job,
        joined,
        outcome,
        &prepared.topology,
    )
}

/// The steps every rank of an NCCL job runs, with the type and (iterations, warm-up).
struct RankPlan {
    steps: Vec<world::Step>,
    dtype: record::Dtype,
    timing: (u32, u32),
}

/// This process as a rank of an NCCL job.
struct RankOf<'a> {
    gpu: &'a GpuBackend,
    /// The NVML index of its GPU.
    index: u32,
    /// The launcher's local rank, which picks the one-GPU-per-node split.
    local_rank: u32,
    /// NCCL rank.
    me: u32,
    /// For NCCL's init and split.
    timeout: Duration,
}

impl RankOf<'_> {
    /// Joins the communicator (and, when a step needs it, the one-GPU-per-node split) and runs
    /// the steps.
    fn measure(
        &self,
        roster: &rendezvous::Roster,
        layout: &Layout,
        plan: &RankPlan,
    ) -> Result<world::RankLoops> {
        let id = roster
            .nccl_id
            .as_deref()
            .ok_or_else(|| anyhow!("rank 0 handed out no NCCL unique id"))?;
        let needs_split = plan.steps.iter().any(|s| {
            matches!(
                s,
                world::Step::Point {
                    over: world::Over::OnePerNode,
                    ..
                }
            )
        });
        let color = needs_split.then(|| world::split_color(self.local_rank));
        let mut rank = JobRank::join(
            self.gpu,
            self.index,
            (self.me, layout.world()),
            id,
            color,
            self.timeout,
        )?;
        Ok(rank.run(&plan.steps, layout, self.me, plan.dtype, plan.timing)?)
    }
}
