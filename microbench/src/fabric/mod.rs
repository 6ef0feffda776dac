//! The multi-node calibration (issue 12): what a job of ranks on several nodes measures.
//!
//! - [`Job`] (job.rs): the nodes of a rendezvous [`Roster`](crate::rendezvous::Roster), their
//!   ranks and sim faults, and the nodes skipped because a GPU there is busy.
//! - [`rounds`]: the pairwise pass's schedule, a round-robin tournament, so every node pair
//!   is tested once and no node is in two pairs at the same time.
//! - [`run_sim`]: the job-wide sweeps (all-reduce, all-gather, reduce-scatter, all-to-all
//!   over all ranks and over one GPU per node) and the pairwise send/recv pass, rail by rail.
//! - [`world`]: the same on real GPUs under NCCL, the parts that need none: the ranks that
//!   stay renumbered for NCCL, the steps every rank runs, and rank 0's records from the
//!   ranks' timed loops, averaged as nccl-tests averages them.
//! - `JobRank` (rank.rs, with the `cuda` feature): one rank of that job on its own GPU,
//!   which joins the communicator and runs the steps with the kernels' NCCL loops.
//! - [`report`]: which node, NIC (rail) or pair is slow, against the median of its rail.

mod job;
#[cfg(feature = "cuda")]
mod rank;
pub mod report;
pub mod world;

pub use job::{Job, JobNode, FABRIC_MIN_NODES};
#[cfg(feature = "cuda")]
pub use rank::JobRank;

use crate::error::Result;
use crate::kernels::{Backend, Outcome};
use crate::sim::SimBackend;
use crate::sweep::Sweep;
use crate::Plan;
use record::{Dtype, Kind};

/// The collectives swept across the whole job.
pub const COLLECTIVES: [Kind; 4] = [
    Kind::AllReduce,
    Kind::AllGather,
    Kind::ReduceScatter,
    Kind::AllToAll,
];

/// Sizes and iterations of a fabric run. The pairwise pass times the largest size only: it
/// looks for a slow link, which shows at bandwidth-bound sizes, and its point count grows
/// with the square of the nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Sizes of the job-wide sweeps.
    pub sweep: Sweep,
    /// Element type.
    pub dtype: Dtype,
    /// Timed iterations per point.
    pub iters: u32,
    /// Untimed iterations per point.
    pub warmup: u32,
}

/// Pairs of node indices, round by round: the circle method of a round-robin tournament.
/// With an odd count one node sits out each round. `n` nodes give `n - 1` rounds (`n` when
/// odd) and every pair exactly once.
pub fn rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // A phantom node n stands for the bye when n is odd.
    let slots = n + n % 2;
    let mut ring: Vec<usize> = (1..slots).collect();
    let mut out = Vec::with_capacity(slots - 1);
    for _ in 0..slots - 1 {
        let mut round = Vec::with_capacity(slots / 2);
        let order: Vec<usize> = std::iter::once(0).chain(ring.iter().copied()).collect();
        for i in 0..slots / 2 {
            let (a, b) = (order[i], order[slots - 1 - i]);
            if a < n && b < n {
                round.push((a.min(b), a.max(b)));
            }
        }
        out.push(round);
        ring.rotate_right(1);
    }
    out
}

/// The job-wide collective shapes, as GPUs on each node: all ranks, then one GPU per node
/// (the data-parallel shape) when a node has more than one rank.
pub fn shapes(ranks_per_node: u32) -> Vec<Vec<u32>> {
    let all: Vec<u32> = (0..ranks_per_node).collect();
    if ranks_per_node > 1 {
        vec![all, vec![0]]
    } else {
        vec![all]
    }
}

/// The whole fabric calibration of `job` on the sim, as rank 0 computes it: the job-wide
/// sweeps, then the pairwise pass round by round and, within a round, rail by rail.
pub fn run_sim(sim: &SimBackend, job: &Job, settings: &Settings) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    for kind in COLLECTIVES {
        let plan = Plan::collectives(
            kind,
            &shapes(job.ranks_per_node),
            &settings.sweep,
            settings.dtype,
            settings.iters,
            settings.warmup,
        )?;
        let done = sim.run(&plan, &mut |_| {})?;
        outcome.records.extend(done.records);
        outcome.failures.extend(done.failures);
    }
    for round in rounds(job.nodes.len()) {
        for rail in 0..job.ranks_per_node {
            for &pair in &round {
                outcome.records.push(sim.measure_pair(
                    pair,
                    rail,
                    settings.sweep.max_bytes,
                    settings.dtype,
                    (settings.iters, settings.warmup),
                )?);
            }
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_pair_once_and_no_node_twice_in_a_round() {
        for n in 2..=9 {
            let rounds = rounds(n);
            assert_eq!(rounds.len(), if n % 2 == 0 { n - 1 } else { n }, "{n}");
            let mut seen = BTreeSet::new();
            for round in &rounds {
                let mut busy = BTreeSet::new();
                for &(a, b) in round {
                    assert!(a < b && b < n);
                    assert!(busy.insert(a) && busy.insert(b), "{n}: {round:?}");
                    assert!(seen.insert((a, b)), "{n}: ({a}, {b}) twice");
                }
            }
            assert_eq!(seen.len(), n * (n - 1) / 2);
        }
        assert!(rounds(1).is_empty());
    }

    #[test]
    fn shapes_are_all_ranks_then_one_gpu_per_node() {
        assert_eq!(shapes(2), vec![vec![0, 1], vec![0]]);
        assert_eq!(shapes(1), vec![vec![0]]);
    }
}
