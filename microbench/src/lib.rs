//! microbench: what is wired to what on one node, and what the wires and tensor cores deliver.
//!
//! - [`discovery`]: [`Topology`] (GPUs, the `nvidia-smi topo -m` link matrix, NICs) from NVML
//!   and sysfs, printed like nvidia-smi by [`discovery::matrix::Matrix`].
//! - [`plan`]: the [`Point`]s of a [`Plan`], what every backend times.
//! - [`kernels`]: the [`Backend`] trait and, with the default `cuda` feature, the real
//!   `GpuBackend` (CUDA, cuBLAS and NCCL loaded at run time through cudarc; without a driver
//!   it fails with one clear error). Without the feature (the agent's build) no GPU library
//!   is linked or loaded: discovery and live counters need NVML only.
//! - [`sim`]: [`SimBackend`], the same records from a physical model of a node profile, with
//!   faults, seeded noise and busy GPUs for tests of the tuner and the agent.
//! - [`sweep`]: building [`Plan`]s (sizes as nccl-tests sweeps them, TP/EP groups, GEMM
//!   shapes, copy paths), and [`sweep::Calibration`], the full plan the agent runs.
//! - [`report`]: tables and summaries of [`record::Record`]s for people.
//! - Multi-node jobs (issue 12): [`launcher`] reads rank, world and node from srun, mpirun,
//!   torchrun or a Kubernetes Indexed Job; [`rendezvous`] gathers the ranks at
//!   `MASTER_ADDR:MASTER_PORT` ([`net`]: on both IP families); [`fabric`] turns the roster into a [`fabric::Job`], runs the
//!   job-wide sweeps and the rail-by-rail pairwise pass, and names slow nodes, NICs and pairs.
//!
//! ```
//! use microbench::{sim, Backend, Plan, Sweep};
//! use record::{Dtype, Kind};
//!
//! let node = sim::SimBackend::new(sim::profile("dgx-h100")?, vec![], 1)?;
//! let groups = microbench::sweep::groups(&node.topology()?, 8);
//! let plan = Plan::collectives(Kind::AllReduce, &groups, &Sweep::DEFAULT, Dtype::Bf16, 20, 5)?;
//! let outcome = node.run(&plan, &mut |_| {})?;
//! assert!(outcome.records.iter().all(|r| r.backend == record::Backend::Sim));
//! # Ok::<(), microbench::Error>(())
//! ```
#![deny(missing_docs)]

pub mod discovery;
mod error;
pub mod fabric;
pub mod kernels;
pub mod launcher;
pub mod net;
pub mod plan;
pub mod rendezvous;
pub mod report;
pub mod sim;
pub mod sweep;

pub use discovery::Topology;
pub use error::{Error, Result};
#[cfg(feature = "cuda")]
pub use kernels::GpuBackend;
pub use kernels::{Backend, Outcome, Progress};
pub use plan::{Plan, Point};
pub use sim::SimBackend;
pub use sweep::Sweep;
