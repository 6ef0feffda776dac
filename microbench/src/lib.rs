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
pub mod plan;
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
