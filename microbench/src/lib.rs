//! microbench: what is wired to what on one node, and what the wires and tensor cores deliver.
//!
//! - [`discovery`]: [`Topology`] (GPUs, the `nvidia-smi topo -m` link matrix, NICs) from NVML
//!   and sysfs, printed like nvidia-smi by [`discovery::matrix::Matrix`].
//! - [`kernels`]: the [`Backend`] trait and the real [`GpuBackend`] (CUDA, cuBLAS and NCCL
//!   loaded at run time through cudarc; without a driver it fails with one clear error).
//! - [`sim`]: [`SimBackend`], the same records from a physical model of a node profile, with
//!   faults, seeded noise and busy GPUs for tests of the tuner and the agent.
//! - [`sweep`]: [`Plan`]s of points (sizes as nccl-tests sweeps them, TP/EP groups, GEMM
//!   shapes, copy paths), and [`sweep::Calibration`], the full plan the agent runs.
//! - [`report`]: tables and summaries of [`record::Record`]s for people.
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
pub mod kernels;
pub mod report;
pub mod sim;
pub mod sweep;

pub use discovery::Topology;
pub use error::{Error, Result};
pub use kernels::{Backend, GpuBackend, Outcome, Point, Progress};
pub use sim::SimBackend;
pub use sweep::{Plan, Sweep};
