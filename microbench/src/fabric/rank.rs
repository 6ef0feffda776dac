//! One rank of a job on real GPUs (issue 12), as nccl-tests runs under mpirun: this process
//! holds one rank of the job's NCCL communicator (`ncclCommInitRankConfig` with rank 0's unique id,
//! which the rendezvous handed out) on the GPU of its local rank, and, for the
//! one-GPU-per-node shape, a rank of its `ncclCommSplit`. It runs the job's steps
//! ([`super::world`]) in order and keeps its own timed loops, which rank 0 gathers.
//!
//! It lives beside the steps it runs, not among the kernels it times them with, so that
//! the job's plan imports the kernels and never the other way round.

use super::world::{Layout, Part, RankLoops, Step, SPLIT_NOCOLOR};
use crate::error::{Error, Result};
use crate::kernels::{check_libraries, measure_loops, Communicators, GpuBackend, Library};
use record::{Dtype, Kind};
use std::time::Duration;

/// This process's rank of the job.
pub struct JobRank {
    /// One GPU per node: `None` where this rank is not a node's local rank 0. Declared
    /// first, so dropped first: every rank closes the split before the world, in the same
    /// order, as each close waits for the peers' own.
    split: Option<Communicators>,
    world: Communicators,
}

impl JobRank {
    /// Joins the communicator as NCCL rank `rank` of `world` on GPU `gpu` (its local rank)
    /// of `backend`, in that GPU's context, then, with `split_color`, the split every rank
    /// of the world must join or decline together ([`super::world::split_color`];
    /// key: the NCCL rank). Each waits at most `timeout` for the others.
    pub fn join(
        backend: &GpuBackend,
        gpu: u32,
        (rank, world): (u32, u32),
        id: &[u8],
        split_color: Option<i32>,
        timeout: Duration,
    ) -> Result<JobRank> {
        check_libraries(&[Library::Nccl])?;
        let world = Communicators::join(gpu, backend.context(gpu)?, (rank, world), id, timeout)?;
        let split = match split_color {
            Some(color) => world.split(color, rank, timeout)?,
            None => None,
        };
        if split_color.is_some_and(|c| c != SPLIT_NOCOLOR) && split.is_none() {
            return Err(Error::Cuda {
                call: "ncclCommSplit",
                gpu,
                message: "gave no communicator to a rank with a color".into(),
            });
        }
        Ok(JobRank { split, world })
    }

    /// Runs `steps` as NCCL rank `me` of `layout`, `iters` timed and `warmup` untimed
    /// iterations per loop: its loops for each step it takes part in. On a failure the
    /// communicators are aborted (their kernels stopped, the peers' waits ended by NCCL's
    /// asynchronous error) and the error names the step.
    pub fn run(
        &mut self,
        steps: &[Step],
        layout: &Layout,
        me: u32,
        dtype: Dtype,
        (iters, warmup): (u32, u32),
    ) -> Result<RankLoops> {
        let mut out = Vec::with_capacity(steps.len());
        for step in steps {
            let done = self.step(step, layout, me, dtype, (iters, warmup));
            match done {
                Ok(loops) => out.push(loops),
                Err(e) => {
                    self.world.abort();
                    if let Some(s) = &mut self.split {
                        s.abort();
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn step(
        &mut self,
        step: &Step,
        layout: &Layout,
        me: u32,
        dtype: Dtype,
        timing: (u32, u32),
    ) -> Result<Option<[Vec<f64>; 2]>> {
        let Step::Point { kind, bytes, .. } = *step else {
            return self.barrier().map(|()| None);
        };
        let (group, peer) = match step.part(layout, me) {
            Part::Idle | Part::Barrier => return Ok(None),
            Part::World => (&mut self.world, None),
            Part::Pair(peer) => (&mut self.world, Some(peer)),
            Part::Split => {
                let split = self.split.as_mut().ok_or_else(|| {
                    Error::Job(format!(
                        "NCCL rank {me} has no one-GPU-per-node communicator for {kind}"
                    ))
                })?;
                (split, None)
            }
        };
        // A job's records carry no clocks: nothing to read while the loops run.
        measure_loops(group, (kind, peer), bytes, dtype, timing, &|| ()).map(Some)
    }

    /// Every rank waits for every other: an all-reduce of one element on the world
    /// communicator, whose completion each rank waits for, so the pairs of the next step
    /// start only once every pair of this one is done. It runs under the same watchdog as the
    /// measurements (asynchronous errors polled, a time limit, the abort), which a TCP
    /// barrier through rank 0 would need built again, and a failed peer ends it through
    /// NCCL's own error.
    fn barrier(&mut self) -> Result<()> {
        let one = Dtype::Fp32;
        measure_loops(
            &mut self.world,
            (Kind::AllReduce, None),
            one.size_bytes(),
            one,
            (1, 0),
            &|| (),
        )
        .map(|_| ())
    }
}
