//! A job on real GPUs (issue 12), the parts that need none: which NCCL rank each process is,
//! the steps every rank runs in the same order, and how rank 0 turns the ranks' timed loops
//! into records, as nccl-tests does under mpirun.
//!
//! NCCL's communicator is built from the ranks that stay, renumbered 0 to n-1 in rank order
//! ([`Layout`]): a rank whose node left for a busy GPU never calls NCCL's init, and a world
//! that counted it would wait for it there for good.

use super::{rounds, shapes, Job, Settings, COLLECTIVES};
use crate::discovery::NvlinkFabric;
use crate::error::{Error, Result};
use crate::kernels::loop_timing;
use crate::rendezvous::{Hello, Roster};
use crate::sweep::Sweep;
use record::{Backend, Clock, Dtype, Group, Kind, Record, Scope, Versions};
use std::collections::BTreeSet;

/// NCCL's `NCCL_SPLIT_NOCOLOR`: the rank takes no part in the split's communicator.
pub const SPLIT_NOCOLOR: i32 = -1;

/// The color of the one-GPU-per-node split (the data-parallel shape): local rank 0 of each
/// node joins it, every other rank passes [`SPLIT_NOCOLOR`]. The key is the NCCL rank, so the
/// split keeps the world's order.
pub fn split_color(local_rank: u32) -> i32 {
    if local_rank == 0 {
        0
    } else {
        SPLIT_NOCOLOR
    }
}

/// The NVLink domain a rank's GPU is in: a fabric shared across nodes, or its own node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Domain {
    /// A fabric that spans nodes, as NVML names it.
    Fabric(NvlinkFabric),
    /// The node, by name.
    Node(String),
}

impl Domain {
    /// The domain of the rank that said `hello`; `None` where it could not tell.
    fn of(hello: &Hello) -> Option<Domain> {
        Some(match hello.nvlink_fabric.as_ref()? {
            NvlinkFabric::Node => Domain::Node(hello.node.clone()),
            shared => Domain::Fabric(shared.clone()),
        })
    }
}

/// The ranks that stay, as NCCL numbers them.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The launcher's rank of each NCCL rank, in order.
    pub members: Vec<u32>,
    /// The local rank (the GPU, the rail) of each NCCL rank.
    pub rails: Vec<u32>,
    /// NCCL rank of rail j on job node i: `grid[i][j]`.
    grid: Vec<Vec<u32>>,
    /// The NVLink domain of each NCCL rank, where its rank said.
    domains: Vec<Option<Domain>>,
}

impl Layout {
    /// The ranks of `job`'s nodes, renumbered in rank order.
    pub fn new(job: &Job, roster: &Roster) -> Layout {
        let mut members: Vec<u32> = job.nodes.iter().flat_map(|n| n.ranks.clone()).collect();
        members.sort_unstable();
        let local = |rank: u32| roster.members[rank as usize].local_rank;
        // (rail, NCCL rank) of each node's ranks; `members` holds exactly the nodes' ranks.
        let mut grid: Vec<Vec<(u32, u32)>> = vec![Vec::new(); job.nodes.len()];
        for (nccl, &rank) in members.iter().enumerate() {
            if let Some(i) = job.nodes.iter().position(|n| n.ranks.contains(&rank)) {
                grid[i].push((local(rank), nccl as u32));
            }
        }
        let grid = grid
            .into_iter()
            .map(|mut rails| {
                rails.sort_unstable();
                rails.into_iter().map(|(_, r)| r).collect()
            })
            .collect();
        Layout {
            rails: members.iter().map(|&r| local(r)).collect(),
            domains: members
                .iter()
                .map(|&r| Domain::of(&roster.members[r as usize]))
                .collect(),
            members,
            grid,
        }
    }

    /// How many NVLink domains the NCCL `ranks` span: 1 when they share one fabric (trays of
    /// one NVL72 rack, which NCCL joins over NVLink); `None` when a rank's is unknown.
    pub fn nvlink_domains(&self, ranks: &[u32]) -> Option<u32> {
        let domains: Option<BTreeSet<&Domain>> = ranks
            .iter()
            .map(|&r| self.domains.get(r as usize)?.as_ref())
            .collect();
        domains.map(|d| d.len() as u32)
    }

    /// Ranks in the communicator.
    pub fn world(&self) -> u32 {
        self.members.len() as u32
    }

    /// The NCCL rank of the launcher's `rank`; `None` when it left the job.
    pub fn nccl_rank(&self, rank: u32) -> Option<u32> {
        self.members
            .iter()
            .position(|&m| m == rank)
            .map(|r| r as u32)
    }

    /// The NCCL ranks of a step, in NCCL order (pairs: each pair's two ends).
    fn ranks_of(&self, over: &Over) -> Vec<u32> {
        match over {
            Over::All => (0..self.world()).collect(),
            Over::OnePerNode => {
                let mut ranks: Vec<u32> = self.grid.iter().map(|rails| rails[0]).collect();
                ranks.sort_unstable();
                ranks
            }
            Over::Pairs { pairs, rail } => pairs
                .iter()
                .flat_map(|&(a, b)| [self.grid[a][*rail as usize], self.grid[b][*rail as usize]])
                .collect(),
        }
    }
}

/// Which ranks run a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Over {
    /// Every rank, on the world communicator.
    All,
    /// Local rank 0 of each node, on the split communicator.
    OnePerNode,
    /// For each pair of job nodes, GPU `rail` of one and of the other exchange on the world
    /// communicator; every pair of the round at once, the other ranks idle.
    Pairs {
        /// Job node indices.
        pairs: Vec<(usize, usize)>,
        /// The GPU, and so the NIC, on both nodes.
        rail: u32,
    },
}

/// One step of the job, run by every rank in the same order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A timed point.
    Point {
        /// Who runs it.
        over: Over,
        /// What.
        kind: Kind,
        /// Per-rank buffer, nccl-tests' size.
        bytes: u64,
    },
    /// Every rank waits for every other (the pairwise pass, between rounds).
    Barrier,
}

/// What one rank does in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Nothing: it waits for the next step.
    Idle,
    /// The collective on the world communicator.
    World,
    /// The collective on the split communicator.
    Split,
    /// A send/recv exchange with this NCCL rank, on the world communicator.
    Pair(u32),
    /// The barrier, on the world communicator.
    Barrier,
}

impl Step {
    /// What NCCL rank `me` does in this step.
    pub fn part(&self, layout: &Layout, me: u32) -> Part {
        match self {
            Step::Barrier => Part::Barrier,
            Step::Point {
                over: Over::All, ..
            } => Part::World,
            Step::Point { over, .. } => {
                let ranks = layout.ranks_of(over);
                match over {
                    Over::OnePerNode if ranks.contains(&me) => Part::Split,
                    Over::Pairs { .. } => ranks
                        .chunks(2)
                        .find_map(|p| match *p {
                            [a, b] if a == me => Some(Part::Pair(b)),
                            [a, b] if b == me => Some(Part::Pair(a)),
                            _ => None,
                        })
                        .unwrap_or(Part::Idle),
                    _ => Part::Idle,
                }
            }
        }
    }
}

/// The steps of a collective sweep across the job: `kind` over every rank, each size.
pub fn sweep_steps(kind: Kind, layout: &Layout, sweep: &Sweep, dtype: Dtype) -> Result<Vec<Step>> {
    Ok(sweep
        .sizes(dtype, kind, layout.world() as usize)?
        .into_iter()
        .map(|bytes| Step::Point {
            over: Over::All,
            kind,
            bytes,
        })
        .collect())
}

/// The steps of `microbench fabric`, in the sim's order: each collective over every rank,
/// then over one GPU per node; then the pairwise send/recv pass at the largest size, round
/// by round ([`rounds`]) and in a round rail by rail, a barrier before each and after the
/// last, so that the pairs of one round and rail, and only those, share the fabric.
pub fn fabric_steps(job: &Job, layout: &Layout, settings: &Settings) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    for kind in COLLECTIVES {
        for (shape, over) in shapes(job.ranks_per_node)
            .iter()
            .zip([Over::All, Over::OnePerNode])
        {
            let ranks = shape.len() * job.nodes.len();
            for bytes in settings.sweep.sizes(settings.dtype, kind, ranks)? {
                steps.push(Step::Point {
                    over: over.clone(),
                    kind,
                    bytes,
                });
            }
        }
    }
    for round in rounds(layout.grid.len()) {
        for rail in 0..job.ranks_per_node {
            steps.push(Step::Barrier);
            steps.push(Step::Point {
                over: Over::Pairs {
                    pairs: round.clone(),
                    rail,
                },
                kind: Kind::SendRecv,
                bytes: settings.sweep.max_bytes,
            });
        }
    }
    // And one after the last pairs, so that no rank tears its communicator down while a
    // pair still runs on it.
    if job.nodes.len() > 1 {
        steps.push(Step::Barrier);
    }
    Ok(steps)
}

/// One rank's timed loops for each step: out-of-place then in-place, each [`LOOPS`] loop
/// times in seconds; `None` for a step it did not time. What a rank sends rank 0.
///
/// [`LOOPS`]: crate::kernels::LOOPS
pub type RankLoops = Vec<Option<[Vec<f64>; 2]>>;

/// The per-rank loop times of one loop number averaged across ranks: nccl-tests under MPI
/// times its loop on every rank and reports the sum over processes divided by their count
/// (its default `-a 1`: `Allreduce(args, &deltaSec, average)` with `MPI_SUM`, then
/// `/= totalProcs*nThreads`; NVIDIA/nccl-tests src/common.cu, 2.19.6). Here each of the
/// [`LOOPS`](crate::kernels::LOOPS) loops is averaged so, before the median across loops.
pub fn average_loops(per_rank: &[&[f64]]) -> Vec<f64> {
    let loops = per_rank.iter().map(|l| l.len()).min().unwrap_or(0);
    (0..loops)
        .map(|i| per_rank.iter().map(|l| l[i]).sum::<f64>() / per_rank.len() as f64)
        .collect()
}

/// What every record of a job shares: the first node and rank 0's versions, the type, iterations and
/// the time the job ended.
#[derive(Debug, Clone)]
pub struct Stamp {
    /// The job's first node: rank 0's, unless its node left (as the sim writes it).
    pub node: String,
    /// Rank 0's driver, CUDA and NCCL.
    pub versions: Versions,
    /// Element type.
    pub dtype: Dtype,
    /// Timed iterations per loop (nccl-tests' `-n`).
    pub iters: u32,
    /// Unix seconds.
    pub timestamp: Option<f64>,
}

/// Rank 0's records from every rank's loops (`results`, keyed by the launcher's rank):
/// collectives as two records (out-of-place, in-place) with the per-rank time averaged
/// across the ranks that ran them; the pairwise pass as one record per pair, from its two
/// ends, as the sim writes it (`node` one end, `detail.peer_node` the other).
pub fn records(
    steps: &[Step],
    job: &Job,
    layout: &Layout,
    results: &[(u32, RankLoops)],
    stamp: &Stamp,
) -> Result<Vec<Record>> {
    let loops_of = |nccl: u32, at: usize| -> Result<&[Vec<f64>; 2]> {
        let rank = layout.members[nccl as usize];
        results
            .iter()
            .find(|(r, _)| *r == rank)
            .and_then(|(_, loops)| loops.get(at))
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Job(format!("rank {rank} sent no timing for step {at}")))
    };
    let timing = |ranks: &[u32], at: usize, which: usize| -> Result<record::Timing> {
        let loops = ranks
            .iter()
            .map(|&r| loops_of(r, at).map(|l| l[which].as_slice()))
            .collect::<Result<Vec<_>>>()?;
        Ok(loop_timing(
            &average_loops(&loops),
            stamp.iters,
            Clock::CudaEvent,
        ))
    };
    let nodes = job.nodes.len();
    let mut out = Vec::new();
    for (at, step) in steps.iter().enumerate() {
        let Step::Point { over, kind, bytes } = step else {
            continue;
        };
        let ranks = layout.ranks_of(over);
        let mut made = match over {
            Over::Pairs { pairs, rail } => pairs
                .iter()
                .zip(ranks.chunks(2))
                .map(|(&(a, b), ends)| {
                    let mut r = Record::pair(
                        Backend::Nccl,
                        (&job.nodes[a].name, &job.nodes[b].name),
                        *rail,
                        *bytes,
                        stamp.dtype,
                        timing(ends, at, 0)?,
                    );
                    r.detail.nvlink_domains = layout.nvlink_domains(ends);
                    Ok(r)
                })
                .collect::<Result<Vec<_>>>()?,
            _ => {
                let group = Group {
                    node: Some(stamp.node.clone()),
                    gpus: ranks.iter().map(|&r| layout.rails[r as usize]).collect(),
                    scope: if nodes > 1 {
                        Scope::InterNode
                    } else {
                        Scope::IntraNode
                    },
                    ranks: ranks.len() as u32,
                };
                [false, true]
                    .into_iter()
                    .map(|in_place| {
                        let mut r = Record::transfer(
                            *kind,
                            Backend::Nccl,
                            group.clone(),
                            *bytes,
                            stamp.dtype,
                            timing(&ranks, at, usize::from(in_place))?,
                        );
                        r.in_place = in_place;
                        if nodes > 1 {
                            r.detail.ranks_per_node = Some(ranks.len() as u32 / nodes as u32);
                            r.detail.nvlink_domains = layout.nvlink_domains(&ranks);
                        }
                        Ok(r)
                    })
                    .collect::<Result<Vec<_>>>()?
            }
        };
        for r in &mut made {
            r.versions = stamp.versions.clone();
            r.timestamp = stamp.timestamp;
        }
        out.extend(made);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::Hello;

    /// `nodes` nodes of `per_node` ranks; `busy` ranks take their node out.
    fn job(nodes: u32, per_node: u32, busy: &[u32]) -> (Job, Roster) {
        let members = (0..nodes * per_node)
            .map(|rank| Hello {
                job: "job-1".into(),
                rank,
                world: nodes * per_node,
                local_rank: rank % per_node,
                node: format!("n{}", rank / per_node),
                host: format!("h{}", rank / per_node),
                busy: busy.contains(&rank),
                backend: "nccl".into(),
                profile: None,
                faults: vec![],
                nvlink_fabric: None,
                error: None,
            })
            .collect();
        let roster = Roster {
            members,
            nccl_id: Some(vec![0; 128]),
        };
        (Job::from_roster(&roster, 1).unwrap(), roster)
    }

    #[test]
    fn split_colors_take_local_rank_0_only() {
        assert_eq!(split_color(0), 0);
        assert_eq!(split_color(1), SPLIT_NOCOLOR);
        assert_eq!(split_color(7), -1);
    }

    /// Four nodes of two GPUs: n0 and n1 are trays of one NVL72 rack (one cluster UUID and
    /// clique), n2 and n3 each their own domain (NVSwitches inside the node). Every rank
    /// spans 3 domains, and so does one GPU per node; the pair n0-n1 spans 1, n0-n2 and
    /// n2-n3 span 2. Where one rank could not tell, nothing is said of its groups.
    #[test]
    fn groups_count_the_nvlink_domains_of_their_ranks() {
        let (job, mut roster) = job(4, 2, &[]);
        let rack = NvlinkFabric::Shared {
            cluster_uuid: "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf".into(),
            clique_id: 1,
        };
        for h in &mut roster.members {
            h.nvlink_fabric = Some(match h.node.as_str() {
                "n0" | "n1" => rack.clone(),
                _ => NvlinkFabric::Node,
            });
        }
        let layout = Layout::new(&job, &roster);
        let all: Vec<u32> = (0..8).collect();
        assert_eq!(layout.nvlink_domains(&all), Some(3));
        assert_eq!(layout.nvlink_domains(&[0, 2, 4, 6]), Some(3));
        assert_eq!(layout.nvlink_domains(&[1, 3]), Some(1));
        assert_eq!(layout.nvlink_domains(&[0, 4]), Some(2));
        assert_eq!(layout.nvlink_domains(&[4, 6]), Some(2));
        roster.members[5].nvlink_fabric = None;
        let layout = Layout::new(&job, &roster);
        assert_eq!(layout.nvlink_domains(&all), None);
        assert_eq!(layout.nvlink_domains(&[1, 3]), Some(1));
    }

    /// Node n1 (ranks 2, 3) is busy: the communicator is ranks 0, 1, 4, 5, renumbered 0-3,
    /// so no rank's init waits for a rank that left.
    #[test]
    fn the_communicator_holds_only_the_ranks_that_stay_renumbered() {
        let (job, roster) = job(3, 2, &[3]);
        let layout = Layout::new(&job, &roster);
        assert_eq!(layout.members, vec![0, 1, 4, 5]);
        assert_eq!(layout.world(), 4);
        assert_eq!(layout.nccl_rank(4), Some(2));
        assert_eq!(layout.nccl_rank(2), None);
        assert_eq!(layout.rails, vec![0, 1, 0, 1]);
    }

    /// Worked numbers: two ranks time loops of 20 iterations in 1.0/1.2/0.9 ms and
    /// 1.4/1.0/1.1 ms; loop by loop the averages are 1.2, 1.1 and 1.0 ms, so the median loop
    /// mean is 1.1 ms / 20 = 55 us, fastest 50 us, slowest 60 us.
    #[test]
    fn per_rank_times_are_averaged_across_ranks_as_nccl_tests_does() {
        let a = [1.0e-3, 1.2e-3, 0.9e-3];
        let b = [1.4e-3, 1.0e-3, 1.1e-3];
        let avg = average_loops(&[&a, &b]);
        let us = |s: f64| (s * 1e9).round() / 1e3;
        assert_eq!(
            avg.iter().map(|&s| us(s)).collect::<Vec<_>>(),
            vec![1200.0, 1100.0, 1000.0]
        );
        let t = loop_timing(&avg, 20, Clock::CudaEvent);
        assert_eq!(
            (us(t.time_s), t.time_min_s.map(us), t.time_max_s.map(us)),
            (55.0, Some(50.0), Some(60.0))
        );
    }

    /// 2 nodes x 2 GPUs: in the pairwise step of rail 1, GPU 1 of n0 (NCCL rank 1) and GPU 1
    /// of n1 (rank 3) exchange; ranks 0 and 2 wait; the DP split is ranks 0 and 2.
    #[test]
    fn every_rank_knows_its_part_in_each_step() {
        let (job, roster) = job(2, 2, &[]);
        let layout = Layout::new(&job, &roster);
        let pair = Step::Point {
            over: Over::Pairs {
                pairs: vec![(0, 1)],
                rail: 1,
            },
            kind: Kind::SendRecv,
            bytes: 1 << 20,
        };
        let parts: Vec<Part> = (0..4).map(|r| pair.part(&layout, r)).collect();
        assert_eq!(
            parts,
            vec![Part::Idle, Part::Pair(3), Part::Idle, Part::Pair(1)]
        );
        let dp = Step::Point {
            over: Over::OnePerNode,
            kind: Kind::AllReduce,
            bytes: 8,
        };
        let parts: Vec<Part> = (0..4).map(|r| dp.part(&layout, r)).collect();
        assert_eq!(
            parts,
            vec![Part::Split, Part::Idle, Part::Split, Part::Idle]
        );
    }

    /// 4 nodes x 2 GPUs: the collectives (all ranks, then one GPU per node), then 3 rounds
    /// x 2 rails of pairwise steps, each behind a barrier; rank 0 builds records from the
    /// ranks' loops with scope, ranks, GPUs and peers as the sim writes them.
    #[test]
    fn fabric_steps_and_records_follow_the_sim() {
        let (job, roster) = job(4, 2, &[]);
        let layout = Layout::new(&job, &roster);
        let settings = Settings {
            sweep: Sweep {
                min_bytes: 1 << 20,
                max_bytes: 2 << 20,
                factor: 2,
                increment: 0,
            },
            dtype: Dtype::Fp32,
            iters: 10,
            warmup: 1,
        };
        let steps = fabric_steps(&job, &layout, &settings).unwrap();
        // 4 collectives x 2 shapes x 2 sizes, then 3 rounds x 2 rails x (barrier, pairs),
        // then the closing barrier.
        assert_eq!(steps.len(), 16 + 12 + 1);
        assert_eq!(steps.iter().filter(|s| **s == Step::Barrier).count(), 7);
        // Every rank took every step it is part of, each loop 1 ms for 10 iterations
        // (100 us), but rank 3 (n1, rail 1) takes 3 ms (300 us) in the pairwise pass.
        let results: Vec<(u32, RankLoops)> = (0..8)
            .map(|rank| {
                let loops = steps
                    .iter()
                    .map(|s| match s.part(&layout, rank) {
                        Part::Idle | Part::Barrier => None,
                        Part::Pair(_) if rank == 3 => Some([vec![3e-3; 5], vec![3e-3; 5]]),
                        _ => Some([vec![1e-3; 5], vec![1e-3; 5]]),
                    })
                    .collect();
                (rank, loops)
            })
            .collect();
        let stamp = Stamp {
            node: "n0".into(),
            versions: Versions::default(),
            dtype: Dtype::Fp32,
            iters: 10,
            timestamp: Some(1.0),
        };
        let records = records(&steps, &job, &layout, &results, &stamp).unwrap();
        assert_eq!(records.len(), 16 * 2 + 6 * 2);
        let all = &records[0];
        assert_eq!(
            (all.group.ranks, all.group.scope, all.detail.ranks_per_node),
            (8, Scope::InterNode, Some(2))
        );
        assert_eq!(all.group.gpus, vec![0, 1, 0, 1, 0, 1, 0, 1]);
        assert!(!all.in_place && records[1].in_place);
        let dp = records.iter().find(|r| r.group.ranks == 4).unwrap();
        assert_eq!(
            (dp.group.gpus.clone(), dp.detail.ranks_per_node),
            (vec![0; 4], Some(1))
        );
        let pairs: Vec<&Record> = records
            .iter()
            .filter(|r| r.kind == Kind::SendRecv)
            .collect();
        assert_eq!(pairs.len(), 12);
        for p in &pairs {
            assert_eq!(
                (p.group.ranks, p.group.scope, p.detail.ranks_per_node),
                (2, Scope::InterNode, Some(1))
            );
            let ends = [
                p.group.node.as_deref().unwrap(),
                p.detail.peer_node.as_deref().unwrap(),
            ];
            let us = (p.timing.time_s * 1e9).round() / 1e3;
            // A pair with n1 on rail 1 averages 100 us and 300 us.
            let slow = ends.contains(&"n1") && p.group.gpus == [1];
            assert_eq!(
                us,
                if slow { 200.0 } else { 100.0 },
                "{ends:?} {:?}",
                p.group.gpus
            );
        }
        let missing: Vec<(u32, RankLoops)> = results[1..].to_vec();
        assert_eq!(
            super::records(&steps, &job, &layout, &missing, &stamp)
                .unwrap_err()
                .to_string(),
            "job: rank 0 sent no timing for step 0"
        );
    }
}
