//! The sim backend: the same records as the real GPUs, from a physical model of a node.
//!
//! A [`SimBackend`] is a [`Profile`] (datasheet figures of a server), optional [`Fault`]s, a
//! noise seed and a set of busy GPUs. Its records carry `backend = "sim"` and
//! `clock = "model"`, so they are never taken for measurements of hardware.

mod bandwidth;
mod fault;
mod model;
mod noise;
mod processes;
mod profile;
mod topology;

use crate::discovery::{Activity, Topology};
use crate::error::{Error, Result};
use crate::kernels::{
    check_gemm_layout, check_iters, check_point, loop_timing, node_group, point_record, summarize,
    Backend, LOOPS,
};
use crate::plan::{CopyPath, Point};

use bandwidth::{HOST_COPY_SHARE, NET_HOP_SCALE};
use noise::Noise;
use record::{Clock, Dtype, Group, Kind, Record, Scope};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use topology::build_topology;

pub use fault::Fault;
pub use model::Protocol;
pub use processes::{GpuProcess, ProcessTable, Registration, CONTEXT_BYTES};
pub use profile::{profile, profiles, Fabric, Peaks, Profile};

/// A busy GPU shares its time with the job already on it.
const BUSY_SPEED: f64 = 0.5;

/// The most identical nodes a sim collective spans: 131,072 GPUs at 8 a node, past the largest
/// training clusters built (about 100,000 GPUs). `--nodes 4294967295` asked for a 137 GB
/// allocation and aborted (issue 31, item 13).
pub const MAX_NODES: u32 = 16_384;

/// A node of a multi-node sim job (issue 12): its name and the node, with its own faults.
#[derive(Debug, Clone)]
struct JobNode {
    name: String,
    sim: SimBackend,
}

/// The sim backend.
#[derive(Debug, Clone)]
pub struct SimBackend {
    profile: Profile,
    faults: Vec<Fault>,
    noise: Noise,
    busy: BTreeSet<u32>,
    topology: Topology,
    nodes: u32,
    /// Wall time each point takes, as a real kernel would.
    point_delay: Duration,
    /// Points measured so far, for the `hang` and `panic` faults.
    measured: Arc<AtomicU32>,
    /// This process's entry in a shared process table, while it holds the GPUs.
    held: Option<Arc<Registration>>,
    /// The nodes of a multi-node job, when they differ; empty for `nodes` identical ones.
    job: Vec<JobNode>,
}

impl SimBackend {
    /// A node of `profile` with `faults` injected; `seed` fixes the noise.
    pub fn new(profile: Profile, faults: Vec<Fault>, seed: u64) -> Result<SimBackend> {
        for f in &faults {
            f.check(profile.gpus, profile.nics)?;
        }
        let topology = build_topology(&profile, &faults)?;
        Ok(SimBackend {
            profile,
            faults,
            noise: Noise::new(seed),
            busy: BTreeSet::new(),
            topology,
            nodes: 1,
            point_delay: Duration::ZERO,
            measured: Arc::default(),
            held: None,
            job: Vec::new(),
        })
    }

    /// Makes every point take `delay` of wall time, as a real kernel does, so a run lasts long
    /// enough to be stopped midway.
    pub fn set_point_delay(&mut self, delay: Duration) {
        self.point_delay = delay;
    }

    /// Holds every GPU of the node, as CUDA contexts do, in `table` until this backend is
    /// dropped, so readers of the table see this process on the GPUs.
    pub fn hold_gpus(&mut self, table: &ProcessTable) -> Result<()> {
        let gpus: Vec<u32> = (0..self.profile.gpus).collect();
        self.held = Some(Arc::new(table.register(&gpus)?));
        Ok(())
    }

    /// Applies the point delay and the process faults (`hang`, `panic`) before a point.
    fn before_point(&self) {
        let n = self.measured.fetch_add(1, Ordering::SeqCst);
        for fault in &self.faults {
            match *fault {
                Fault::Hang { after } if n >= after => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
                // Injected on purpose: the agent must survive a calibration child that dies.
                Fault::Panic { after } if n >= after => {
                    panic!("sim fault panic:after={after} at point {n}")
                }
                _ => {}
            }
        }
        if !self.point_delay.is_zero() {
            std::thread::sleep(self.point_delay);
        }
    }

    /// Spreads every collective over `nodes` identical nodes, the same GPUs on each, as
    /// nccl-tests does under `mpirun` across hosts: records are `inter_node` with
    /// `ranks = GPUs x nodes`. GEMMs and copies stay on this node.
    pub fn set_nodes(&mut self, nodes: u32) -> Result<()> {
        if !(1..=MAX_NODES).contains(&nodes) {
            return Err(Error::BadValue {
                field: "--nodes",
                value: nodes.to_string(),
                expected: format!("1 to {MAX_NODES} nodes"),
            });
        }
        self.nodes = nodes;
        Ok(())
    }

    /// Spreads every collective over the named `nodes` of a job, each with its own faults
    /// (the `--fault`s its ranks were started with), as rank 0 of a multi-process sim job
    /// models it: a ring runs at its slowest node. Records name the first node, rank 0's.
    pub fn set_job(&mut self, nodes: &[(String, Vec<Fault>)]) -> Result<()> {
        let Some((first, _)) = nodes.first() else {
            return Err(Error::BadValue {
                field: "job nodes",
                value: "none".into(),
                expected: "1 or more nodes".into(),
            });
        };
        self.job = nodes
            .iter()
            .map(|(name, faults)| {
                Ok(JobNode {
                    name: name.clone(),
                    sim: SimBackend::new(self.profile.clone(), faults.clone(), 0)?,
                })
            })
            .collect::<Result<_>>()?;
        self.nodes = nodes.len() as u32;
        self.topology.node = first.clone();
        Ok(())
    }

    /// The send/recv of GPU `rail` of job node `a` to GPU `rail` of job node `b`, through
    /// NIC `rail` of each (see [`SimBackend::set_job`]): a `send_recv` record of 2 ranks whose
    /// `group.node` is `a` and `detail.peer_node` is `b`.
    pub fn measure_pair(
        &self,
        (a, b): (usize, usize),
        rail: u32,
        bytes: u64,
        dtype: Dtype,
        (iters, warmup): (u32, u32),
    ) -> Result<Record> {
        check_iters(iters, warmup)?;
        let node = |i: usize| {
            self.job.get(i).ok_or_else(|| Error::BadValue {
                field: "pair",
                value: i.to_string(),
                expected: format!("a job node, 0 to {}", self.job.len().saturating_sub(1)),
            })
        };
        let (from, to) = (node(a)?, node(b)?);
        if rail >= self.profile.gpus {
            return Err(Error::NoSuchGpu {
                field: "rail",
                gpu: rail,
                count: self.profile.gpus as usize,
            });
        }
        self.before_point();
        // Trays of one NVL72 rack exchange over NVLink, as NCCL routes them; others through
        // their NICs.
        let same_domain = self.domain_of(a) == self.domain_of(b);
        let (bw, hop_scale) = if same_domain {
            let bw = from.sim.domain_pair_bytes_per_s(rail);
            (bw.min(to.sim.domain_pair_bytes_per_s(rail)), 1.0)
        } else {
            let bw = from.sim.rail_bytes_per_s(rail);
            (bw.min(to.sim.rail_bytes_per_s(rail)), NET_HOP_SCALE)
        };
        let model_s = model::collective_time(Kind::SendRecv, 2, bytes, bw, hop_scale).0;
        let key = format!("send_recv {}-{} rail {rail} {bytes}", from.name, to.name);
        let timing = self.timed_loops(&key, model_s, iters, warmup);
        let mut r = Record::pair(
            record::Backend::Sim,
            (&from.name, &to.name),
            rail,
            bytes,
            dtype,
            timing,
        );
        r.detail.nvlink_domains = Some(if same_domain { 1 } else { 2 });
        Ok(r)
    }

    /// The NVLink domain of job node `i`: the profile's domain holds this many nodes, and a
    /// job fills one domain after another with its nodes in rank order (18 trays to a GB200
    /// NVL72 rack; one node to a domain elsewhere).
    fn domain_of(&self, i: usize) -> u32 {
        let per_domain = (self.profile.nvlink_domain / self.profile.gpus.max(1)).max(1);
        i as u32 / per_domain
    }

    /// NVLink domains the first `nodes` nodes of the job span.
    fn domains_of(&self, nodes: u32) -> u32 {
        self.domain_of(nodes.saturating_sub(1) as usize) + 1
    }

    /// Collectives as the GPU backend times them: warm-up iterations drawn and dropped, then
    /// LOOPS loops of `iters`, each timed as a whole; the median loop mean.
    fn timed_loops(&self, key: &str, model_s: f64, iters: u32, warmup: u32) -> record::Timing {
        let samples = self.noise.samples(key, model_s, warmup + LOOPS * iters);
        let elapsed: Vec<f64> = samples[warmup as usize..]
            .chunks(iters as usize)
            .map(|l| l.iter().sum())
            .collect();
        loop_timing(&elapsed, iters, Clock::Model)
    }

    /// Marks `gpus` as running someone else's job: [`Backend::activity`] reports them busy and
    /// points on them run at half speed. Replaces any earlier set.
    pub fn set_busy(&mut self, gpus: &[u32]) -> Result<()> {
        let count = self.topology.gpus.len();
        if let Some(&gpu) = gpus.iter().find(|&&g| g as usize >= count) {
            return Err(Error::NoSuchGpu {
                field: "--busy",
                gpu,
                count,
            });
        }
        self.busy = gpus.iter().copied().collect();
        Ok(())
    }

    /// The profile simulated.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    fn speed(&self, gpu: u32) -> f64 {
        if self.busy.contains(&gpu) {
            BUSY_SPEED
        } else {
            1.0
        }
    }

    /// The slowest member's speed: a collective waits for its slowest rank.
    fn group_speed(&self, gpus: &[u32]) -> f64 {
        gpus.iter().map(|&g| self.speed(g)).fold(1.0, f64::min)
    }

    fn compute_factor(&self, gpu: u32) -> f64 {
        self.faults
            .iter()
            .map(|f| match *f {
                Fault::SlowGpu { gpu: g, factor } if g == gpu => factor,
                _ => 1.0,
            })
            .product()
    }

    /// The modelled time of a point, before noise.
    fn model_time(&self, point: &Point) -> Result<f64> {
        Ok(match point {
            Point::Collective {
                kind, gpus, bytes, ..
            } => {
                if !kind.is_collective() {
                    return Err(Error::BadValue {
                        field: "collective",
                        value: kind.to_string(),
                        expected: "all_reduce, all_gather, reduce_scatter, all_to_all or send_recv"
                            .into(),
                    });
                }
                let (bw, scale) = self.collective_bytes_per_s(*kind, gpus);
                let ranks = gpus.len() as u32 * self.nodes;
                model::collective_time(*kind, ranks, *bytes, bw, scale).0
            }
            Point::Gemm {
                gpu,
                shape,
                dtype,
                layout,
            } => {
                let peak = self
                    .profile
                    .peaks
                    .of(*dtype)
                    .ok_or_else(|| Error::Unsupported {
                        what: format!("{dtype} GEMM"),
                        gpu: *gpu,
                        reason: format!("{} has no {dtype} tensor cores", self.profile.gpu_name),
                    })?;
                check_gemm_layout(*dtype, *layout, *gpu)?;
                let speed = self.speed(*gpu) * self.compute_factor(*gpu);
                model::gemm_time(
                    *shape,
                    dtype.size_bytes(),
                    peak * speed,
                    self.profile.sms,
                    self.profile.hbm_bytes_per_s,
                )
            }
            Point::Copy { path, bytes } => {
                let bw = match *path {
                    CopyPath::P2p { src, dst, .. } => self.pair_bytes_per_s(src, dst),
                    CopyPath::H2d { gpu } | CopyPath::D2h { gpu } => {
                        self.host_bytes_per_s(gpu) * HOST_COPY_SHARE
                    }
                    CopyPath::Hbm { gpu } => self.pair_bytes_per_s(gpu, gpu),
                };
                let speed = path
                    .gpus()
                    .iter()
                    .map(|&g| self.speed(g))
                    .fold(1.0, f64::min);
                model::copy_time(*bytes, bw * speed)
            }
        })
    }

    /// A collective's group: on this node, or across the nodes with the device index of each
    /// rank in rank order, as `microbench import` reads an `mpirun` log.
    fn collective_group(&self, point: &Point) -> Group {
        let group = node_group(&self.topology, point);
        if self.nodes < 2 {
            return group;
        }
        let per_rank = group.gpus.repeat(self.nodes as usize);
        Group {
            ranks: per_rank.len() as u32,
            scope: Scope::InterNode,
            gpus: per_rank,
            ..group
        }
    }

    /// The ranks on each node of a collective over `gpus`, and the NVLink domains its nodes
    /// span, for records across nodes.
    fn spread(&self, gpus: &[u32]) -> (Option<u32>, Option<u32>) {
        if self.nodes < 2 {
            return (None, None);
        }
        (Some(gpus.len() as u32), Some(self.domains_of(self.nodes)))
    }
}

impl Backend for SimBackend {
    fn topology(&self) -> Result<Topology> {
        Ok(self.topology.clone())
    }

    fn activity(&self) -> Result<Vec<Activity>> {
        Ok((0..self.profile.gpus)
            .map(|gpu| {
                let busy = self.busy.contains(&gpu);
                Activity {
                    gpu,
                    utilization_percent: Some(if busy { 100 } else { 0 }),
                    processes: Some(u32::from(busy)),
                }
            })
            .collect())
    }

    fn measure(&self, point: &Point, iters: u32, warmup: u32) -> Result<Vec<Record>> {
        check_iters(iters, warmup)?;
        check_point(point, &self.topology)?;
        self.before_point();
        let model_s = self.model_time(point)?;
        let timing = |tag: &str| {
            summarize(
                &mut self
                    .noise
                    .samples(&format!("{point} {tag}"), model_s, iters),
                Clock::Model,
            )
        };
        let timed_loops =
            |tag: &str| self.timed_loops(&format!("{point} {tag}"), model_s, iters, warmup);
        Ok(match point {
            Point::Collective { gpus, .. } => [false, true]
                .into_iter()
                .map(|in_place| {
                    let mut r = point_record(
                        record::Backend::Sim,
                        self.collective_group(point),
                        point,
                        timed_loops(if in_place { "in-place" } else { "out-of-place" }),
                    );
                    r.in_place = in_place;
                    (r.detail.ranks_per_node, r.detail.nvlink_domains) = self.spread(gpus);
                    r
                })
                .collect(),
            // No clock or throttle reasons, which would read as hardware.
            Point::Gemm { .. } | Point::Copy { .. } => vec![point_record(
                record::Backend::Sim,
                node_group(&self.topology, point),
                point,
                timing(""),
            )],
        })
    }
}

#[cfg(test)]
mod tests;
